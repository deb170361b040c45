//! svc-server probation through the real agent (issue 16 item 5): a new svc-server build
//! that crashes at once is rolled back after exactly as many starts as the log and the docs
//! say (3), by the one probation rule (`update::probation_verdict`).
use crate::common;
use crate::update_support::{fake_binary, sha256_hex};
use common::sandbox::*;
use serde_json::json;

fn offer(sb: &Sandbox, version: &str, behavior: &str) {
    let body = fake_binary("svc-server", version, behavior, 0);
    let file = format!("svc-server-{version}");
    std::fs::write(sb.app.join(&file), &body).unwrap();
    sb.answer(json!({
        "poll_interval_secs": 1,
        "config": {"agent": {}},
        "targets": {"svc-server": {"version": version, "url": file,
                    "sha256": sha256_hex(&body), "size": body.len()}}
    }));
}

#[test]
fn a_crashing_svc_server_gets_three_starts_then_is_rolled_back() {
    let sb = Sandbox::new("probation-starts");
    sb.file_app();
    offer(&sb, "1.0.0", "hang");
    let mut agent = sb.spawn_agent(&[]);
    wait_for("svc-server 1.0.0 active", 120, || {
        sb.log().contains("svc-server 1.0.0 activated")
    });
    offer(&sb, "1.1.0", "exit1");
    wait_for("the rollback to 1.0.0", 180, || {
        sb.log().contains("rolled back to 1.0.0")
    });
    terminate(&mut agent);
    let log = sb.log();
    let from = log
        .find("svc-server 1.1.0 activated")
        .expect("activation logged");
    let to = from + log[from..].find("rolled back to 1.0.0").unwrap();
    let starts = log[from..to].matches("svc-server started pid=").count();
    assert_eq!(
        starts,
        3,
        "starts of the crashing build before its rollback:\n{}",
        &log[from..to]
    );
    assert!(
        log[from..to].contains("crashed 3 times"),
        "{}",
        &log[from..to]
    );
}
