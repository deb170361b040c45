//! Benchmark (ignored by default; run by `scripts/bench-update.sh` in release):
//! download + verify of a 256 MiB artifact over loopback HTTPS, against the floor
//! `curl -s --cacert CA URL | sha256sum`, and the downloader's peak memory (VmHWM of a child
//! process doing the update) against its idle peak.
use crate::common::https;
use crate::update_support;

use std::process::Command;
use std::time::Instant;

use https::{Behavior, HttpsServer};
use svc::paths::Paths;
use svc::update::{Artifact, Engine};
use update_support::*;

const SIZE: usize = 256 * 1024 * 1024;
const RUNS: usize = 3;

fn vm_hwm_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Not a benchmark: the child side (runs only when `SVC_BENCH_CHILD_ROOT` is set).
#[test]
#[ignore = "child process of bench_download_verify_256mib"]
fn bench_child() {
    let (Some(root), Ok(art)) = (
        std::env::var_os("SVC_BENCH_CHILD_ROOT"),
        std::env::var("SVC_BENCH_CHILD_ARTIFACT"),
    ) else {
        return;
    };
    let a: Artifact = serde_json::from_str(&art).unwrap();
    let idle = vm_hwm_kib();
    let mut opts = test_opts();
    opts.download.request_timeout = std::time::Duration::from_secs(600);
    opts.cache_cap = u64::MAX;
    let t = Instant::now();
    Engine::new(Paths::new(root), opts).install(&a).unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "BENCH idle_hwm_kib={idle} hwm_kib={} secs={secs:.3}",
        vm_hwm_kib()
    );
}

#[test]
#[ignore = "measurement: scripts/bench-update.sh"]
fn bench_download_verify_256mib() {
    let server = HttpsServer::start();
    let elf_len = fake_binary("svc-server", "2.0.0", "ok", 0).len();
    let body = fake_binary("svc-server", "2.0.0", "ok", SIZE - elf_len);
    assert_eq!(body.len(), SIZE);
    server.add("/big", body.clone(), Behavior::Normal);
    let url = server.url("/big");
    let a = artifact("svc-server", "2.0.0", &url, &body);
    let ca = crate::common::testca::test_ca().ca_file.clone();
    let mib = SIZE as f64 / 1048576.0;

    // The floor's two halves, to read it honestly: transfer alone, and hashing alone
    // (a file in the page cache).
    let file = scratch().join("bench-body");
    std::fs::write(&file, &body).unwrap();
    let mut curl_only = Vec::new();
    let mut sha_only = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let st = Command::new("curl")
            .args(["-sS", "--fail", "-o", "/dev/null", "--cacert"])
            .arg(&ca)
            .arg(&url)
            .status()
            .unwrap();
        assert!(st.success());
        curl_only.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let st = Command::new("sha256sum")
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        sha_only.push(t.elapsed().as_secs_f64());
    }
    let _ = std::fs::remove_file(&file);
    let mut curl = Vec::new();
    let mut ours = Vec::new();
    let mut hwm = Vec::new();
    for i in 0..RUNS {
        // Floor: curl | sha256sum (same server, same TLS stack on the server side).
        let t = Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "curl -sS --fail --cacert '{}' '{url}' | sha256sum",
                ca.display()
            ))
            .output()
            .unwrap();
        let secs = t.elapsed().as_secs_f64();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).starts_with(a.sha256.as_deref().unwrap()));
        curl.push(secs);

        // Ours, in a child process so that its VmHWM is its own.
        let paths = sandbox(&format!("bench-{i}"));
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "update_bench::bench_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SVC_BENCH_CHILD_ROOT", paths.root())
            .env(
                "SVC_BENCH_CHILD_ARTIFACT",
                serde_json::to_string(&a).unwrap(),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let line: &str = text
            .lines()
            .find_map(|l| l.find("BENCH ").map(|i| &l[i..]))
            .unwrap();
        let field = |k: &str| -> f64 {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                .unwrap()
                .parse()
                .unwrap()
        };
        ours.push(field("secs"));
        hwm.push((field("idle_hwm_kib"), field("hwm_kib")));
        assert_eq!(active(&paths, "svc-server").1.len(), SIZE);
        let _ = std::fs::remove_dir_all(paths.root());
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (c, o) = (med(&mut curl.clone()), med(&mut ours.clone()));
    println!();
    println!("| what | median of {RUNS} | throughput |");
    println!("|---|---|---|");
    println!(
        "| `curl -s --cacert CA URL \\| sha256sum` | {c:.2} s | {:.0} MiB/s |",
        mib / c
    );
    let (co, so) = (med(&mut curl_only.clone()), med(&mut sha_only.clone()));
    println!(
        "| of which: `curl -s -o /dev/null` | {co:.2} s | {:.0} MiB/s |",
        mib / co
    );
    println!(
        "| of which: `sha256sum FILE` (page cache) | {so:.2} s | {:.0} MiB/s |",
        mib / so
    );
    println!(
        "| svc-agent update (download + sha256 + ELF + `version --json` + activate) | {o:.2} s | {:.0} MiB/s |",
        mib / o
    );
    for (i, (idle, peak)) in hwm.iter().enumerate() {
        println!(
            "| run {} downloader VmHWM | idle {:.1} MiB | during {:.1} MiB (+{:.1} MiB) |",
            i + 1,
            idle / 1024.0,
            peak / 1024.0,
            (peak - idle) / 1024.0
        );
    }
    println!("raw: curl {curl:?} ours {ours:?}");
}
