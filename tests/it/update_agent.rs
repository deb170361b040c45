//! Updates through the real agent, against a real HTTPS management app on loopback: a good
//! svc-server artifact is verified, activated with a link swap and run; bad artifacts
//! (wrong sha256, wrong size, not an executable for this machine) change nothing and leave
//! no file behind; a connection cut half-way is resumed with a Range request.
use crate::common;
use common::https::{Behavior, Front, HttpsServer};
use common::sandbox::*;
use serde_json::json;
use sha2::Digest;

const ARTIFACT: &str = "/artifacts/svc-server";

fn svc_server_bytes() -> Vec<u8> {
    std::fs::read(env!("CARGO_BIN_EXE_svc-server")).unwrap()
}

fn sha(b: &[u8]) -> String {
    svc::encoding::hex(&sha2::Sha256::digest(b))
}

fn setup(
    front: Front,
    name: &str,
    artifact: Vec<u8>,
    announced_sha: Option<String>,
    announced_size: Option<usize>,
) -> (Sandbox, HttpsServer) {
    let sb = Sandbox::new(&format!("{name}-{front:?}"));
    let srv = HttpsServer::start_behind(&sb.root.join("tls"), front);
    sb.write_credentials(srv.base_url());
    sb.install_fake_server();
    let size = announced_size.unwrap_or(artifact.len());
    let sha = announced_sha.unwrap_or_else(|| sha(&artifact));
    srv.add(ARTIFACT, artifact, Behavior::Normal);
    srv.set_answer(json!({
        "poll_interval_secs": 1,
        "config": {"agent": {}},
        "targets": {"svc-server": {"version": env!("CARGO_PKG_VERSION"), "url": "artifacts/svc-server", "sha256": sha, "size": size}}
    }));
    (sb, srv)
}

fn spawn(sb: &Sandbox, srv: &HttpsServer) -> std::process::Child {
    sb.spawn_agent(&[("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap())])
}

fn link(sb: &Sandbox) -> String {
    std::fs::read_link(sb.root.join("opt/svc/bin/svc-server"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

fn leftovers(sb: &Sandbox) -> Vec<String> {
    std::fs::read_dir(sb.root.join("opt/svc/cache"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn a_good_artifact_is_verified_activated_and_run(front: Front) {
    let (sb, srv) = setup(front, "upd-good", svc_server_bytes(), None, None);
    let mut agent = spawn(&sb, &srv);
    let want = format!("../cache/svc-server-{}", env!("CARGO_PKG_VERSION"));
    wait_for("the new link", 120, || link(&sb) == want);
    wait_for("the new svc-server running", 60, || {
        sb.log()
            .contains(&format!("svc-server {} up", env!("CARGO_PKG_VERSION")))
    });
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sb.root.join("opt/svc/versions.json")).unwrap())
            .unwrap();
    assert_eq!(rec["svc-server"]["current"], env!("CARGO_PKG_VERSION"));
    assert!(sb.log().contains("verified"), "{}", sb.log());
    // The artifact lives on the app itself: its request carries the machine's identity,
    // as every request to the app does (docs/protocol.md).
    let get = srv
        .requests(ARTIFACT)
        .into_iter()
        .next()
        .expect("the artifact was requested");
    assert_eq!(
        get.header("authorization"),
        Some("Secret sandbox-secret-123")
    );
    assert_eq!(get.header("x-svc-part-id"), Some("part-1"));
    assert!(
        leftovers(&sb).iter().all(|f| !f.ends_with(".part")),
        "{:?}",
        leftovers(&sb)
    );
    // The status file is written at the end of the loop's pass, after the line above.
    wait_for("the new version in the status", 30, || {
        sb.status()["svc_server"]["version"] == env!("CARGO_PKG_VERSION")
    });
    // The app sees the version record (and so any rollback) in the status report.
    wait_for("the version record in the status", 30, || {
        sb.status()["versions"]["svc-server"]["current"] == env!("CARGO_PKG_VERSION")
    });
    terminate(&mut agent);
}

fn bad_artifacts_change_nothing_and_leave_no_file(front: Front) {
    let mut not_elf = b"#!/bin/sh\necho hi\n".to_vec();
    not_elf.resize(4096, b'#');
    let mut wrong_arch = svc_server_bytes();
    wrong_arch[18] ^= 183 ^ 62; // swap x86_64 <-> aarch64 in e_machine
    type Case<'a> = (&'a str, Vec<u8>, Option<String>, Option<usize>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "upd-sha",
            svc_server_bytes(),
            Some("ab".repeat(32)),
            None,
            "sha256 mismatch",
        ),
        (
            "upd-size",
            svc_server_bytes(),
            None,
            Some(1000),
            "exceeds the announced size of 1000 bytes",
        ),
        (
            "upd-notelf",
            not_elf,
            None,
            None,
            "not an executable ELF file",
        ),
        (
            "upd-arch",
            wrong_arch,
            None,
            None,
            "ELF for the wrong architecture",
        ),
    ];
    for (name, bytes, sha, size, why) in cases {
        let (sb, srv) = setup(front, name, bytes, sha, size);
        let before = link(&sb);
        let mut agent = spawn(&sb, &srv);
        // The daemon's "update failed" line comes after the engine cleaned up.
        wait_for(why, 120, || {
            sb.log().contains(why) && sb.log().contains("update failed")
        });
        assert_eq!(link(&sb), before, "{name}: the link moved");
        assert!(
            leftovers(&sb).is_empty(),
            "{name}: files left in the cache: {:?}",
            leftovers(&sb)
        );
        assert!(sb.log().contains("update failed"), "{name}: {}", sb.log());
        // svc-server starts after the failed first update check, on its own time.
        wait_for(&format!("{name}: the old svc-server running"), 60, || {
            !sb.fake("pids").is_empty()
        });
        terminate(&mut agent);
    }
}

fn a_cut_download_is_resumed_not_restarted(front: Front) {
    let bytes = svc_server_bytes();
    let half = bytes.len() / 2;
    let (sb, srv) = setup(front, "upd-resume", bytes, None, None);
    srv.next(ARTIFACT, Behavior::Cut(half as u64));
    let mut agent = spawn(&sb, &srv);
    let want = format!("../cache/svc-server-{}", env!("CARGO_PKG_VERSION"));
    wait_for("the new link", 120, || link(&sb) == want);
    let gets = srv.requests(ARTIFACT);
    assert!(gets.len() >= 2, "{gets:?}");
    let resumed = gets
        .iter()
        .find(|g| g.header("range").is_some())
        .expect("no Range request");
    let from: usize = resumed
        .header("range")
        .unwrap()
        .trim_start_matches("bytes=")
        .trim_end_matches('-')
        .parse()
        .unwrap();
    assert!(
        from > 0 && from <= half,
        "resumed from {from}, the cut was at {half}"
    );
    terminate(&mut agent);
}

fn a_missing_artifact_is_asked_for_once_not_in_a_storm(front: Front) {
    let (sb, srv) = setup(front, "upd-404", svc_server_bytes(), None, None);
    srv.remove(ARTIFACT);
    let mut agent = spawn(&sb, &srv);
    wait_for("the 404 logged", 60, || sb.log().contains("HTTP 404"));
    // The window: five more polls, each offering the same target (one a second); a storm
    // would ask for the artifact again at each of them.
    let polls = srv.polls().len();
    wait_for("five more polls", 60, || srv.polls().len() >= polls + 5);
    let gets = srv.requests(ARTIFACT).len();
    assert_eq!(gets, 1, "{}", sb.log());
    assert!(leftovers(&sb).is_empty(), "{:?}", leftovers(&sb));
    assert!(
        !sb.fake("pids").is_empty(),
        "the old svc-server is not running"
    );
    terminate(&mut agent);
}

both_fronts!(a_good_artifact_is_verified_activated_and_run);
both_fronts!(bad_artifacts_change_nothing_and_leave_no_file);
both_fronts!(a_cut_download_is_resumed_not_restarted);
both_fronts!(a_missing_artifact_is_asked_for_once_not_in_a_storm);
