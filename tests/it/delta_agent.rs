//! Deltas through the real agent (issue 44): svc-server updated by a delta from the binary
//! that runs, from an HTTPS app and from a `file://` directory, without a byte of the full
//! artifact; and `svc-release publish` making deltas from the releases it published before.
use crate::common;
use common::https::{Behavior, HttpsServer};
use common::sandbox::*;
use serde_json::json;
use sha2::Digest;
use std::process::Command;
use svc::update::delta::Format;

fn sha(b: &[u8]) -> String {
    svc::encoding::hex(&sha2::Sha256::digest(b))
}

/// The running (fake) svc-server, the real one to move to, and the delta between them.
fn binaries(sb: &Sandbox) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    binaries_in(sb, Format::V1)
}

fn binaries_in(sb: &Sandbox, format: Format) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    sb.install_fake_server();
    let old = std::fs::read(sb.root.join("opt/svc/bin/svc-server")).unwrap();
    let new = std::fs::read(env!("CARGO_BIN_EXE_svc-server")).unwrap();
    let delta = svc::update::delta::make(&old, &new, format).unwrap();
    (old, new, delta)
}

fn target(
    old: &[u8],
    new: &[u8],
    delta: &[u8],
    full_url: &str,
    delta_url: &str,
) -> serde_json::Value {
    json!({"svc-server": {
        "version": env!("CARGO_PKG_VERSION"), "url": full_url, "sha256": sha(new), "size": new.len(),
        "deltas": [
            {"from": "ab".repeat(32), "url": "artifacts/elsewhere", "size": 10, "sha256": "cd".repeat(32)},
            {"from": sha(old), "url": delta_url, "size": delta.len(), "sha256": sha(delta)}
        ]
    }})
}

fn wait_applied(sb: &Sandbox) {
    let want = format!("../cache/svc-server-{}", env!("CARGO_PKG_VERSION"));
    wait_for("the new link", 180, || {
        std::fs::read_link(sb.root.join("opt/svc/bin/svc-server"))
            .is_ok_and(|p| p.display().to_string() == want)
    });
    wait_for("the delta's outcome in the status", 60, || {
        sb.status()["versions"]["svc-server"]["delta"]["outcome"] == "applied"
    });
    assert!(
        sb.log().contains("made from the running binary by a delta"),
        "{}",
        sb.log()
    );
}

#[test]
fn the_agent_updates_svc_server_by_delta_from_an_https_app() {
    let sb = Sandbox::new("delta-https");
    let srv = HttpsServer::start_behind(&sb.root.join("tls"), common::https::Front::Direct);
    sb.write_credentials(srv.base_url());
    let (old, new, delta) = binaries(&sb);
    srv.add("/artifacts/full", new.clone(), Behavior::Normal);
    srv.add("/artifacts/delta", delta.clone(), Behavior::Normal);
    srv.set_answer(json!({
        "poll_interval_secs": 1,
        "config": {"agent": {}},
        "targets": target(&old, &new, &delta, "artifacts/full", "artifacts/delta"),
    }));
    let mut agent = sb.spawn_agent(&[("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap())]);
    wait_applied(&sb);
    assert_eq!(
        srv.requests("/artifacts/full").len(),
        0,
        "no byte of the full artifact"
    );
    assert_eq!(
        srv.requests("/artifacts/elsewhere").len(),
        0,
        "another binary's delta"
    );
    assert_eq!(srv.requests("/artifacts/delta").len(), 1);
    terminate(&mut agent);
}

#[test]
fn the_agent_updates_svc_server_by_delta_from_a_file_directory() {
    let sb = Sandbox::new("delta-file");
    sb.file_app();
    let (old, new, delta) = binaries(&sb);
    let artifacts = sb.app.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("delta"), &delta).unwrap();
    // No full artifact in the directory at all: only the delta can make the target.
    sb.answer(json!({
        "poll_interval_secs": 1,
        "config": {"agent": {}},
        "targets": target(&old, &new, &delta, "artifacts/full", "artifacts/delta"),
    }));
    let mut agent = sb.spawn_agent(&[]);
    wait_applied(&sb);
    terminate(&mut agent);
}

/// svc-delta-v2 end to end: offered beside a v1 delta (which agents before v2 would take),
/// the agent fetches the v2 one alone and applies it.
#[test]
fn the_agent_updates_svc_server_by_a_v2_delta_from_an_https_app() {
    let sb = Sandbox::new("delta-v2-https");
    let srv = HttpsServer::start_behind(&sb.root.join("tls"), common::https::Front::Direct);
    sb.write_credentials(srv.base_url());
    let (old, new, v2) = binaries_in(&sb, Format::V2);
    let mut t = target(&old, &new, &v2, "artifacts/full", "artifacts/v2");
    t["svc-server"]["deltas"][1]["format"] = "svc-delta-v2".into();
    // A v1 delta listed first and announced larger: the smaller one this agent reads wins.
    let v1 = json!({"from": sha(&old), "url": "artifacts/v1", "size": v2.len() + 1,
                    "sha256": "ef".repeat(32)});
    t["svc-server"]["deltas"]
        .as_array_mut()
        .unwrap()
        .insert(0, v1);
    srv.add("/artifacts/full", new.clone(), Behavior::Normal);
    srv.add("/artifacts/v2", v2.clone(), Behavior::Normal);
    srv.set_answer(json!({"poll_interval_secs": 1, "config": {"agent": {}}, "targets": t}));
    let mut agent = sb.spawn_agent(&[("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap())]);
    wait_applied(&sb);
    assert_eq!(srv.requests("/artifacts/v2").len(), 1);
    assert_eq!(
        (
            srv.requests("/artifacts/v1").len(),
            srv.requests("/artifacts/full").len()
        ),
        (0, 0),
        "neither the v1 delta nor the full artifact"
    );
    terminate(&mut agent);
}

#[test]
fn the_agent_updates_svc_server_by_a_v2_delta_from_a_file_directory() {
    let sb = Sandbox::new("delta-v2-file");
    sb.file_app();
    let (old, new, v2) = binaries_in(&sb, Format::V2);
    let artifacts = sb.app.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("delta"), &v2).unwrap();
    let mut t = target(&old, &new, &v2, "artifacts/full", "artifacts/delta");
    t["svc-server"]["deltas"][1]["format"] = "svc-delta-v2".into();
    sb.answer(json!({"poll_interval_secs": 1, "config": {"agent": {}}, "targets": t}));
    let mut agent = sb.spawn_agent(&[]);
    wait_applied(&sb);
    terminate(&mut agent);
}

fn tool(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_svc-release"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn publish_makes_deltas_from_the_releases_before() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("delta-publish");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("vendor.key");
    let mgmt = dir.join("mgmt");
    std::fs::create_dir_all(&mgmt).unwrap();
    tool(&["keygen", key.to_str().unwrap()]);
    tool(&["init", mgmt.to_str().unwrap()]);
    let mut releases = Vec::new();
    for i in 0..3 {
        // Three small releases (a fake svc-server with its release stamp): a delta of the real
        // debug build would take svc-release a GiB and a minute here.
        let b =
            crate::update_support::fake_binary("svc-server", &format!("1.0.{i}"), "ok", 200_000);
        let p = dir.join(format!("svc-server-{i}"));
        std::fs::write(&p, &b).unwrap();
        tool(&[
            "publish",
            "--key",
            key.to_str().unwrap(),
            "--deltas",
            "2",
            "--prune",
            mgmt.to_str().unwrap(),
            p.to_str().unwrap(),
        ]);
        releases.push(b);
    }
    let answer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mgmt.join("poll.json")).unwrap()).unwrap();
    let t = &answer["targets"]["svc-server"];
    let deltas = t["deltas"].as_array().unwrap();
    let froms: Vec<&str> = deltas.iter().map(|d| d["from"].as_str().unwrap()).collect();
    let (r1, r0) = (sha(&releases[1]), sha(&releases[0]));
    assert_eq!(froms, [&r1, &r1, &r0, &r0], "newest first, N = 2");
    // From each: svc-delta-v1 first (what agents before v2 take), then a smaller v2.
    let formats: Vec<_> = deltas.iter().map(|d| d["format"].as_str()).collect();
    let v2 = Some("svc-delta-v2");
    assert_eq!(formats, [None, v2, None, v2]);
    assert!(deltas[1]["size"].as_u64() < deltas[0]["size"].as_u64());
    let olds = [&releases[1], &releases[1], &releases[0], &releases[0]];
    for (d, old) in deltas.iter().zip(olds) {
        let bytes = std::fs::read(mgmt.join(d["url"].as_str().unwrap())).unwrap();
        assert_eq!(d["size"], bytes.len());
        assert_eq!(d["sha256"], sha(&bytes));
        assert!(
            bytes.len() * 10 < releases[2].len(),
            "{} bytes",
            bytes.len()
        );
        let mut out = Vec::new();
        svc::update::delta::apply(old, &mut &bytes[..], &mut out, releases[2].len() as u64)
            .unwrap();
        assert_eq!(out, releases[2]);
        // --prune keeps the release a delta starts from (the next publish needs it).
        assert!(mgmt
            .join("artifacts")
            .join(d["from"].as_str().unwrap())
            .is_file());
    }
    // The directory still verifies as a device would check it.
    let public = format!("{}.pub", key.display());
    tool(&["verify", "--pub", &public, mgmt.to_str().unwrap()]);
}

/// A stand-in for an aarch64 release (a 64-byte ELF header, e_machine 183, then code: calls
/// (BL) to word 16 and page loads (ADRP) of page 0x80 among other words) whose code grew by
/// `gap` words at word 1000: every call and page load after it changed its bytes.
fn aarch64_release(gap: u32) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    b[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN, as a static-pie
    b[18..20].copy_from_slice(&183u16.to_le_bytes());
    let word = |j: u32| {
        let p = 16 + if j < 1000 { j } else { j + gap };
        match j % 4 {
            0 => 0x9400_0000 | 16u32.wrapping_sub(p) & 0x03ff_ffff,
            1 => {
                let imm = 0x80u32.wrapping_sub((p * 4) >> 12) & 0x1f_ffff;
                0x9000_0000 | (imm & 3) << 29 | (imm >> 2) << 5 | 1
            }
            2 => j.wrapping_mul(2654435761),
            _ => 0xd503_201f,
        }
    };
    let code = (0..1000)
        .map(word)
        .chain((0..gap).map(|k| k.wrapping_mul(40503)))
        .chain((1000..60_000).map(word))
        .flat_map(u32::to_le_bytes);
    b.extend(code);
    b
}

/// svc-release's deltas (here for an aarch64 binary): each `from` gets an svc-delta-v1 first (what
/// agents before v2 take: the first delta from their binary) and a smaller svc-delta-v2;
/// both make the new release through the agent's own apply.
#[test]
fn publish_makes_v1_and_smaller_v2_deltas() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("delta-publish-arm");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("vendor.key");
    let mgmt = dir.join("mgmt");
    tool(&["keygen", key.to_str().unwrap()]);
    tool(&["init", mgmt.to_str().unwrap()]);
    let releases: Vec<Vec<u8>> = (0..2).map(|i| aarch64_release(i * 24)).collect();
    for (i, b) in releases.iter().enumerate() {
        let p = dir.join(format!("svc-server-{i}"));
        std::fs::write(&p, b).unwrap();
        let version = format!("1.0.{i}");
        tool(&[
            "publish",
            "--key",
            key.to_str().unwrap(),
            "--name",
            "svc-server",
            "--version",
            &version,
            mgmt.to_str().unwrap(),
            p.to_str().unwrap(),
        ]);
    }
    let answer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mgmt.join("poll.json")).unwrap()).unwrap();
    let deltas = answer["targets"]["svc-server"]["deltas"]
        .as_array()
        .unwrap();
    let formats: Vec<_> = deltas.iter().map(|d| d["format"].as_str()).collect();
    assert_eq!(formats, [None, Some("svc-delta-v2")], "{deltas:?}");
    let mut sizes = Vec::new();
    for d in deltas {
        assert_eq!(d["from"], sha(&releases[0]));
        let bytes = std::fs::read(mgmt.join(d["url"].as_str().unwrap())).unwrap();
        assert_eq!(d["size"], bytes.len());
        let mut out = Vec::new();
        svc::update::delta::apply(
            &releases[0],
            &mut &bytes[..],
            &mut out,
            releases[1].len() as u64,
        )
        .unwrap();
        assert!(
            out == releases[1],
            "{:?} makes the new release",
            d["format"]
        );
        sizes.push(bytes.len());
    }
    assert!(
        sizes[1] < sizes[0],
        "v2 {} bytes, v1 {}",
        sizes[1],
        sizes[0]
    );
    // `svc-release delta` makes v1 by default (what every agent reads), v2 when asked, and
    // refuses a format it does not know.
    let (a, b) = (dir.join("svc-server-0"), dir.join("svc-server-1"));
    let out = dir.join("d");
    let p = |x: &std::path::Path| x.to_str().unwrap().to_string();
    let said = tool(&["delta", &p(&a), &p(&b), &p(&out)]);
    assert!(String::from_utf8_lossy(&said.stdout).starts_with("svc-delta-v1: "));
    assert_eq!(&std::fs::read(&out).unwrap()[..8], b"SVCDLT01");
    let said = tool(&[
        "delta",
        "--format",
        "svc-delta-v2",
        &p(&a),
        &p(&b),
        &p(&out),
    ]);
    assert!(String::from_utf8_lossy(&said.stdout).starts_with("svc-delta-v2: "));
    assert_eq!(&std::fs::read(&out).unwrap()[..8], b"SVCDLT02");
    let refused = Command::new(env!("CARGO_BIN_EXE_svc-release"))
        .args([
            "delta",
            "--format",
            "svc-delta-v9",
            &p(&a),
            &p(&b),
            &p(&out),
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("svc-delta-v1 or svc-delta-v2"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
