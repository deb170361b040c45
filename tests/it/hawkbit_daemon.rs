//! The real daemon (`svc-agent run`) on the hawkBit backend, against the DDI test server
//! (`ddi_server.rs`): the loop chooses the backend from the cached config (the `hawkbit`
//! section and its token file), the one engine downloads with the token, activates and
//! watches the probation, and the server hears `closed` + `success` only after it; a crashing
//! build is rolled back, reported as `failure`, and what runs now is sent as `configData`.
use crate::common;
use crate::ddi_server::{DdiServer, CONTROLLER, TENANT, TOKEN};
use crate::update_support::Install;
use crate::update_support::{artifact, fake_binary, test_opts};
use common::sandbox::*;
use serde_json::json;
use svc::paths::Paths;

const NAME: &str = "svc-server";

/// A machine with svc-server `1.0.0` (a build that keeps running), the hawkBit section in
/// its cached config and the token in its 0600 file; no management app credentials.
pub(crate) fn machine(test: &str, ddi: &DdiServer) -> Sandbox {
    let sb = machine_on(test, &ddi.url(), CONTROLLER, TOKEN);
    ddi.state.lock().unwrap().sleep = "00:00:01".into();
    sb
}

/// The same machine on the DDI server at `server_url` as `controller`, its token `token`
/// (gooseBit's tests use it with their own server).
pub(crate) fn machine_on(test: &str, server_url: &str, controller: &str, token: &str) -> Sandbox {
    let sb = Sandbox::new(test);
    let paths = Paths::new(&sb.root);
    let body = fake_binary(NAME, "1.0.0", "hang", 0);
    let src = sb.root.join("src-1.0.0");
    std::fs::write(&src, &body).unwrap();
    let a = artifact(NAME, "1.0.0", &format!("file://{}", src.display()), &body);
    svc::update::Engine::new(paths.clone(), test_opts())
        .install(&a)
        .unwrap();
    let cfg = json!({"agent": {"svc-agent": {"hawkbit": {
        "server_url": server_url, "tenant": TENANT,
        "controller_id": controller, "auth": "target-token"}}}});
    cache_config(&sb, &cfg, token);
    sb
}

/// Caches `cfg` as the machine's config, writes the token file (0600) and makes the DDI
/// server ask for a poll every second.
pub(crate) fn on_hawkbit(sb: &Sandbox, ddi: &DdiServer, cfg: &serde_json::Value) {
    cache_config(sb, cfg, TOKEN);
    ddi.state.lock().unwrap().sleep = "00:00:01".into();
}

/// Caches `cfg` as the machine's config and writes `token` to the token file (0600).
pub(crate) fn cache_config(sb: &Sandbox, cfg: &serde_json::Value, token: &str) {
    svc::fsutil::atomic_write(
        &sb.root.join("opt/svc/config.json"),
        cfg.to_string().as_bytes(),
        0o600,
    )
    .unwrap();
    svc::fsutil::atomic_write(
        &Paths::new(&sb.root).device("/etc/svc-hawkbit.token"),
        format!("{token}\n").as_bytes(),
        0o600,
    )
    .unwrap();
}

#[test]
fn the_daemon_reports_success_only_after_probation() {
    let ddi = DdiServer::start();
    let sb = machine("hb-daemon-ok", &ddi);
    let body = fake_binary(NAME, "2.0.0", "hang", 50_000);
    ddi.deploy("41", &format!("[{}]", ddi.chunk(NAME, "2.0.0", &body)));
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_PROBATION_SECS", "4")]);
    wait_for("closed/success", 120, || {
        ddi.action_steps("41")
            .contains(&"closed/success".to_string())
    });
    terminate(&mut agent);
    let log = sb.log();
    assert!(log.contains("Eclipse hawkBit"), "{log}");
    assert!(log.contains("svc-server 2.0.0 activated"), "{log}");
    let s = ddi.action_steps("41");
    assert_eq!(
        s.first().map(String::as_str),
        Some("proceeding/none"),
        "{s:?}"
    );
    assert_eq!(
        &s[s.len() - 2..],
        ["downloaded/none", "closed/success"],
        "{s:?}"
    );
    // `success` came after the probation passed, never before.
    let passed = log.find("passed its probation").expect("probation passed");
    let told = log.find("told the server Success").expect("success logged");
    assert!(passed < told, "{log}");
    // The artifact was fetched with the token, which never reached the log.
    let st = ddi.state.lock().unwrap();
    assert!(st
        .requests
        .iter()
        .any(|(_, p, h)| p.starts_with("/artifacts/")
            && h.iter()
                .any(|(k, v)| k == "authorization" && v == &format!("TargetToken {TOKEN}"))));
    assert!(!log.contains(TOKEN));
    assert_eq!(
        std::fs::read_link(sb.root.join("opt/svc/bin/svc-server"))
            .unwrap()
            .file_name()
            .unwrap(),
        "svc-server-2.0.0"
    );
}

#[test]
fn the_daemon_rolls_back_a_crashing_build_and_reports_what_runs() {
    let ddi = DdiServer::start();
    let sb = machine("hb-daemon-crash", &ddi);
    let body = fake_binary(NAME, "3.0.0", "exit1", 0);
    ddi.deploy("42", &format!("[{}]", ddi.chunk(NAME, "3.0.0", &body)));
    let mut agent = sb.spawn_agent(&[]);
    wait_for("closed/failure", 240, || {
        ddi.action_steps("42")
            .contains(&"closed/failure".to_string())
    });
    wait_for("configData after the failure", 30, || {
        !ddi.state.lock().unwrap().config_data.is_empty()
    });
    terminate(&mut agent);
    let fb = ddi.feedback();
    let (_, last) = fb.iter().rev().find(|(a, _)| a == "42").unwrap();
    let why = last["status"]["details"][0].as_str().unwrap();
    assert!(
        why.contains("3.0.0 was rolled back") && why.contains("svc-server 1.0.0 runs"),
        "{why}"
    );
    assert!(!ddi
        .action_steps("42")
        .contains(&"closed/success".to_string()));
    let data = ddi.state.lock().unwrap().config_data.clone();
    assert_eq!(data.last().unwrap()["data"]["svc_server_version"], "1.0.0");
    assert_eq!(data.last().unwrap()["data"]["sw_version"], "1.0.0");
}

/// The build svc-server's link names (also the gooseBit tests').
pub(crate) fn linked(sb: &Sandbox) -> String {
    std::fs::read_link(sb.root.join("opt/svc/bin/svc-server"))
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn deployment_reads(ddi: &DdiServer) -> usize {
    ddi.state
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|(_, p, _)| p.contains("/deploymentBase/") && !p.ends_with("/feedback"))
        .count()
}

/// Attack: the server's maintenance window closes while the artifact is downloading. The
/// download finishes and is kept, but nothing is activated until the window opens again;
/// then the one gate lets it through and `success` follows the probation.
#[test]
fn a_window_that_closes_mid_download_holds_the_activation() {
    let ddi = DdiServer::start();
    let sb = machine("hb-daemon-window", &ddi);
    let body = fake_binary(NAME, "2.0.0", "hang", 50_000);
    let chunks = format!("[{}]", ddi.chunk(NAME, "2.0.0", &body));
    ddi.state.lock().unwrap().hold_artifacts = true;
    ddi.deploy_with("51", &chunks, "forced", "forced", "available");
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_PROBATION_SECS", "3")]);
    wait_for("the download to start", 60, || {
        let st = ddi.state.lock().unwrap();
        st.requests
            .iter()
            .any(|(_, p, _)| p.starts_with("/artifacts/"))
    });
    let reads = deployment_reads(&ddi);
    ddi.deploy_with("51", &chunks, "forced", "forced", "unavailable");
    wait_for("the closed window to be read", 60, || {
        deployment_reads(&ddi) > reads && sb.log().contains("maintenance window is closed")
    });
    ddi.state.lock().unwrap().hold_artifacts = false;
    wait_for("the activation to wait", 60, || {
        sb.log()
            .contains("svc-server 2.0.0 is ready; waiting: the update server asks to wait")
    });
    // A few more polls: still held.
    let reads = deployment_reads(&ddi);
    wait_for("two more polls", 60, || deployment_reads(&ddi) >= reads + 2);
    assert_eq!(linked(&sb), "svc-server-1.0.0");
    assert!(!sb.log().contains("svc-server 2.0.0 activated"));
    assert_eq!(ddi.action_steps("51"), ["proceeding/none"]);
    ddi.deploy_with("51", &chunks, "forced", "forced", "available");
    wait_for("closed/success", 120, || {
        ddi.action_steps("51")
            .contains(&"closed/success".to_string())
    });
    terminate(&mut agent);
    assert_eq!(linked(&sb), "svc-server-2.0.0");
}

/// `update: skip`: downloaded, verified and kept; not activated; `downloaded` is the report
/// that ends a download-only action.
#[test]
fn update_skip_downloads_and_stages_only() {
    let ddi = DdiServer::start();
    let sb = machine("hb-daemon-dlonly", &ddi);
    let body = fake_binary(NAME, "2.0.0", "hang", 50_000);
    let chunks = format!("[{}]", ddi.chunk(NAME, "2.0.0", &body));
    ddi.deploy_with("52", &chunks, "forced", "skip", "available");
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_PROBATION_SECS", "3")]);
    wait_for("downloaded", 120, || {
        ddi.action_steps("52")
            .contains(&"downloaded/none".to_string())
    });
    let reads = deployment_reads(&ddi);
    wait_for("two more polls", 60, || deployment_reads(&ddi) >= reads + 2);
    terminate(&mut agent);
    assert!(sb.root.join("opt/svc/cache/svc-server-2.0.0").is_file());
    assert_eq!(linked(&sb), "svc-server-1.0.0");
    assert_eq!(
        ddi.action_steps("52"),
        ["proceeding/none", "downloaded/none"]
    );
    assert!(!sb.log().contains("svc-server 2.0.0 activated"));
}
