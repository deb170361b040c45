//! The app conformance check (scripts/app-conformance.py, docs/protocol.md's checklist) run
//! against the project's own test app, holding polls: the check passes on an app that keeps
//! every rule, and the tools an app vendor runs stay working.
use crate::common::https::HttpsServer;
use std::process::Command;

fn check(srv: &HttpsServer) -> (bool, String) {
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/app-conformance.py"
        ))
        .args([
            "--app",
            srv.base_url(),
            "--part-id",
            "part-1",
            "--secret",
            "s3cret-conformance",
        ])
        .args(["--ca", srv.ca.ca_file.to_str().unwrap(), "--hold", "3"])
        // The test app checks no secret (the agent's tests need none refused).
        .arg("--no-auth-check")
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn the_test_app_passes_the_conformance_check() {
    let srv = HttpsServer::start();
    srv.hold_polls();
    srv.set_answer(serde_json::json!({"config": {"modules": []}, "poll_interval_secs": 60}));
    let (ok, text) = check(&srv);
    assert!(ok, "the conformance check failed:\n{text}");
    assert!(!text.contains("FAIL"), "{text}");
}

/// An app that says nothing of holding, and a `null` where the agent expects an array:
/// the check names both and fails.
#[test]
fn the_check_fails_an_app_that_breaks_a_rule() {
    let srv = HttpsServer::start();
    srv.set_answer(serde_json::json!({"config": {"modules": []}, "targets": null}));
    let (ok, text) = check(&srv);
    assert!(!ok, "{text}");
    assert!(
        text.contains("FAIL  Preference-Applied: wait on the answer"),
        "{text}"
    );
    assert!(text.contains("`targets` is NoneType"), "{text}");
}
