//! The test harness's own promise: a test that fails does not leave the processes it
//! started running through the rest of the suite (they would load a busy machine further).
use crate::common::sandbox::*;

#[test]
fn a_failed_test_leaves_no_agent_or_svc_server_running() {
    let root = std::sync::Mutex::new(std::path::PathBuf::new());
    let agent = std::sync::Mutex::new(None);
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let sb = Sandbox::new("harness-leak");
        sb.install_fake_server();
        sb.file_app();
        *root.lock().unwrap() = sb.root.clone();
        *agent.lock().unwrap() = Some(sb.spawn_agent(&[]));
        wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
        panic!("the test fails here, before its terminate");
    }));
    assert!(failed.is_err());
    let root = root.lock().unwrap().clone();
    let left = processes_naming(&root);
    assert!(left.is_empty(), "still running: {left:?}");
    if let Some(mut agent) = agent.lock().unwrap().take() {
        let _ = agent.wait();
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A server the harness starts counts as up only when it is the one listening on its port:
/// another test's server that took the port first answers a connection too (gooseBit tests
/// then talked to another test's gooseBit: a signature "not made by the vendor key", a 503).
#[test]
fn a_server_is_up_only_when_it_listens_on_its_port_itself() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    // Ours: a process that failed to bind (here one that never tries) and is still starting.
    let mut ours = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let answers = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    let is_ours = crate::common::listen::listens_on(ours.id(), port);
    let holder = crate::common::listen::listens_on(std::process::id(), port);
    let _ = ours.kill();
    let _ = ours.wait();
    assert!(
        answers,
        "the port answers (what the old readiness check took for ours)"
    );
    assert!(
        !is_ours,
        "a process that holds no socket on the port is not the server there"
    );
    assert!(holder, "the process that holds the listening socket is");
}
