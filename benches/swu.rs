//! SWUpdate image figures for BENCHMARKS.md (issue 26): the `.swu` overhead in bytes, and
//! taking a 5 MB svc-server out of one through the engine (`Engine::unpack_swu`: the
//! engine's download from `file://`, sha256 of the archive, the bounded CPIO reader, each
//! file's sha256 against sw-description and its vendor signature), time and peak memory,
//! side by side with the floor: GNU `cpio -i` of the same archive plus `sha256sum` of the file.
//!
//! Run: `cargo bench --bench swu` (`SVC_BENCH_DIR` picks the scratch directory).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measurement harness
use sha2::{Digest, Sha256};
use std::fs;
use std::path::PathBuf;
use std::time::Instant;
use svc::encoding::hex;
use svc::update::swu::{self, Image, SwuOffer};
use svc::update::{Engine, UpdateOptions};

fn status_kib(field: &str) -> u64 {
    fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let base = std::env::var_os("SVC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("svc-bench-swu-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(&base).unwrap();
    let arch = svc::update::this_target();
    // 5 MB of incompressible bytes behind an ELF-looking start (nothing runs it here).
    let mut body = b"\x7fELF".to_vec();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    while body.len() < 5_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        body.extend_from_slice(&x.to_le_bytes());
    }
    body.truncate(5_000_000);
    let img = Image {
        filename: "svc-server".into(),
        name: "svc-server".into(),
        version: "2.0.0".into(),
        sha256: hex(&Sha256::digest(&body)),
        signature: Some(svc::encoding::base64_encode(&[0u8; 64])),
    };
    let desc = swu::sw_description("2.0.0", arch, &[img]);
    let mut archive = Vec::new();
    swu::write_newc(
        &mut archive,
        &[("sw-description", desc.as_bytes()), ("svc-server", &body)],
    )
    .unwrap();
    let swu_path = base.join("svc-server-2.0.0.swu");
    fs::write(&swu_path, &archive).unwrap();
    let overhead = archive.len() - body.len();
    println!(
        "swu: payload {} bytes, archive {} bytes, overhead {overhead} bytes ({} of them sw-description)",
        body.len(),
        archive.len(),
        desc.len()
    );
    let sha = hex(&Sha256::digest(&archive));
    drop(archive);
    drop(body);

    let runs = 5;
    let mut ours = Vec::new();
    let mut peak = 0;
    for i in 0..runs {
        let root = base.join(format!("root-{i}"));
        let engine = Engine::new(svc::paths::Paths::new(&root), UpdateOptions::default());
        let offer = SwuOffer {
            url: format!("file://{}", swu_path.display()),
            version: "2.0.0".into(),
            size: fs::metadata(&swu_path).unwrap().len(),
            sha256: Some(sha.clone()),
            sha1: None,
            identity: None,
        };
        let _ = fs::write("/proc/self/clear_refs", "5");
        let rss0 = status_kib("VmRSS:");
        let t = Instant::now();
        let files = engine.unpack_swu(&offer).unwrap();
        ours.push(t.elapsed().as_secs_f64() * 1000.0);
        peak = peak.max(status_kib("VmHWM:").saturating_sub(rss0));
        assert_eq!(files.len(), 1);
    }
    let mut floor = Vec::new();
    for i in 0..runs {
        let d = base.join(format!("cpio-{i}"));
        fs::create_dir_all(&d).unwrap();
        let t = Instant::now();
        let st = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "cpio -i --quiet < {} && sha256sum svc-server sw-description > /dev/null",
                swu_path.display()
            ))
            .current_dir(&d)
            .status()
            .unwrap();
        floor.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(st.success());
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    println!(
        "unpack 5 MB through the engine (download from file://, archive sha256, extract, sw-description sha256): median {:.1} ms of {runs}, peak memory +{peak} KiB",
        med(&mut ours)
    );
    println!(
        "floor: cpio -i + sha256sum of the same archive: median {:.1} ms of {runs}",
        med(&mut floor)
    );
    let _ = fs::remove_dir_all(&base);
}
