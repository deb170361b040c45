//! The daemon's pass as a whole, in a sandbox with a `file://` app.
use super::tuning::Tuning;
use super::Agent;
use crate::paths::Paths;
use crate::update::record::LOADS;

/// A sandbox whose credentials name a `file://` app (an empty answer) and whose cached
/// config is empty: the agent connects, polls and steps both updates on every pass.
fn sandbox(test: &str) -> Paths {
    let root = std::env::temp_dir().join(format!("svc-tick-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let paths = Paths::new(&root);
    let app = root.join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(app.join("poll.json"), b"{}").unwrap();
    let creds = paths.credentials();
    std::fs::create_dir_all(creds.parent().unwrap()).unwrap();
    let text = serde_json::json!({"cloud": {
        "app_address": format!("file://{}", app.display()),
        "id": "part-1",
        "secret": "tick-secret-0123456789",
    }});
    std::fs::write(&creds, text.to_string()).unwrap();
    std::fs::create_dir_all(paths.state_dir()).unwrap();
    super::cache::save_config(&paths, &serde_json::json!({})).unwrap();
    paths
}

#[test]
fn a_pass_reads_the_version_records_once() {
    let paths = sandbox("records");
    let mut agent = Agent::new(paths.clone(), Tuning::default());
    agent.load_rest();
    assert!(agent.conn.updater.is_some(), "no update engine");
    assert!(agent.config.is_some(), "no config");
    for pass in 0..3 {
        LOADS.with(|n| n.set(0));
        let _ = agent.tick();
        let loads = LOADS.with(|n| n.get());
        assert_eq!(
            loads, 1,
            "pass {pass} loaded the version records {loads} times"
        );
    }
    assert!(
        std::fs::read(super::status::path(&paths)).is_ok(),
        "no status file written"
    );
    let _ = std::fs::remove_dir_all(paths.root());
}
