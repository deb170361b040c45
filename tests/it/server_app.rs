//! svc-server on its own, fed by the management app over the agent's protocol: a real HTTPS
//! app on loopback (test CA), the machine credentials file, conditional polls, and real
//! module processes started and stopped as the app's config changes.
use crate::common;
use crate::common::sandbox::pid_alive as alive;
use common::https::{Front, HttpsServer};
use common::sandbox::wait_for;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

const MODULE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/modules/logenv/bin/module"
);

fn module_pid(home: &std::path::Path, name: &str) -> Option<i32> {
    std::fs::read_to_string(home.join(format!("module-data/m-app/{name}/pid")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn the_config_comes_from_the_app_over_https(front: Front) {
    let dir = std::env::temp_dir().join(format!("svc-server-app-{front:?}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("mod")).unwrap();
    let exe = dir.join("mod/module");
    std::fs::copy(MODULE, &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let srv = HttpsServer::start_behind(&dir.join("tls"), front);
    let creds = dir.join("svc.json");
    std::fs::write(
        &creds,
        json!({"cloud": {"app_address": srv.base_url(), "id": "part-app", "secret": "s3cr3t-app"}})
            .to_string(),
    )
    .unwrap();
    let module = json!({"type": "local", "name": "echo", "module_id": "acme:echo",
                        "executable_path": exe.display().to_string()});
    srv.set_answer(json!({"poll_interval_secs": 1,
                          "config": {"components": [], "modules": [module]}}));
    let home = dir.join("home");
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_svc-server"))
        .args([
            "--app",
            srv.base_url(),
            "--credentials",
            creds.to_str().unwrap(),
        ])
        .args([
            "--machine-id",
            "m-app",
            "--watch-interval",
            "0.3",
            "--stop-timeout",
            "2",
        ])
        .env("SVC_HOME", &home)
        .env("SSL_CERT_FILE", &srv.ca.ca_file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let server_log = || std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();

    wait_for("the module from the app's config running", 60, || {
        module_pid(&home, "echo").is_some_and(alive)
    });
    let pid = module_pid(&home, "echo").unwrap();
    // Unchanged answers are 304s: the module keeps running, nothing is re-applied.
    let polls = srv.polls().len();
    wait_for("more polls", 30, || srv.polls().len() >= polls + 3);
    assert!(alive(pid));
    assert!(
        srv.polls()
            .iter()
            .skip(1)
            .any(|p| p.header("if-none-match").is_some()),
        "polls are conditional"
    );
    // The app removes the module: svc-server stops it.
    srv.set_answer(json!({"poll_interval_secs": 1,
                          "config": {"components": [], "modules": []}}));
    wait_for("the removed module stopped", 60, || !alive(pid));
    assert!(!server_log().contains("s3cr3t-app"), "{}", server_log());
    svc::sys::kill(server.id() as i32, libc::SIGTERM);
    assert!(server.wait().unwrap().success(), "{}", server_log());
    let _ = std::fs::remove_dir_all(&dir);
}

both_fronts!(the_config_comes_from_the_app_over_https);
