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
