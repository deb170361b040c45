//! The machine config as a hawkBit chunk (`svc-config`, one artifact: the config JSON),
//! validated by the one config validator like a config from the management app: applied by
//! the real daemon and reported `closed` + `success` once applied; a bad, malformed, huge or
//! mismatching one is refused whole with a failure naming the JSON pointer, and nothing of
//! its action (a binary beside it included) is applied.
use crate::common;
use crate::ddi_server::{DdiServer, CONTROLLER, TENANT, TOKEN};
use crate::update_support::{fake_binary, install_old, sandbox};
use common::sandbox::*;
use serde_json::json;
use svc::hawkbit::HawkbitTransport;
use svc::paths::Paths;
use svc::protocol::{PollOutcome, ProtocolError, Transport};

fn hawkbit_section(ddi: &DdiServer) -> serde_json::Value {
    json!({"server_url": ddi.url(), "tenant": TENANT, "controller_id": CONTROLLER, "auth": "target-token"})
}

fn setup(test: &str) -> (Paths, DdiServer) {
    let paths = sandbox(&format!("hawkbit-config-{test}"));
    install_old(&paths, "svc-server", "1.0.0");
    svc::fsutil::atomic_write(
        &paths.device("/etc/svc-hawkbit.token"),
        format!("{TOKEN}\n").as_bytes(),
        0o600,
    )
    .unwrap();
    (paths, DdiServer::start())
}

fn poll(paths: &Paths, ddi: &DdiServer) -> Result<PollOutcome, ProtocolError> {
    let cfg = json!({"agent": {"svc-agent": {"hawkbit": hawkbit_section(ddi)}}});
    let (cfg, _) = svc::config::parse_value(&cfg).unwrap();
    HawkbitTransport::connect(paths, cfg.agent.agent.hawkbit.as_ref().unwrap())
        .unwrap()
        .poll(&serde_json::Value::Null, None)
}

#[test]
fn a_bad_malformed_huge_or_mismatching_config_is_refused_whole_naming_where() {
    let (paths, ddi) = setup("bad");
    let server = fake_binary("svc-server", "2.0.0", "ok", 1000);
    let bad = json!({"agent": {"svc-server": {"disable_subsystem": "yes"}}}).to_string();
    let good = json!({"agent": {}}).to_string();
    let huge_chunk = ddi.chunk("svc-config", "c4", good.as_bytes()).replacen(
        &format!("\"size\": {}", good.len()),
        "\"size\": 9000000000",
        1,
    );
    let mismatch = ddi.chunk("svc-config", "c5", good.as_bytes()).replace(
        &format!("\"size\": {}", good.len()),
        &format!("\"size\": {}", good.len() + 1),
    );
    let cases = [
        (
            "81",
            ddi.chunk("svc-config", "c1", bad.as_bytes()),
            "/agent/svc-server/disable_subsystem",
        ),
        (
            "82",
            ddi.chunk("svc-config", "c2", b"{\"agent\": {"),
            "rejected",
        ),
        (
            "83",
            ddi.chunk("svc-config", "c3", &[b'{'; 300]),
            "rejected",
        ),
        ("84", huge_chunk, "larger than"),
        ("85", mismatch, "bytes, the deployment says"),
    ];
    for (i, (id, chunk, why)) in cases.iter().enumerate() {
        let chunks = format!("[{}, {chunk}]", ddi.chunk("svc-server", "2.0.0", &server));
        ddi.deploy(id, &chunks);
        // Told to the server, a refusal is a poll that worked (issue 46).
        let first = poll(&paths, &ddi);
        // Offered again (a server not caught up, Force update): still refused, told again.
        ddi.deploy(id, &chunks);
        let again = poll(&paths, &ddi);
        for got in [first, again] {
            assert!(
                matches!(&got, Ok(PollOutcome::Changed { answer, .. }) if answer.config.is_none() && answer.targets.server.is_none()),
                "{id}: {got:?}"
            );
        }
        // (A `proceeding` may come first: the action was taken before its config was read.)
        let fb: Vec<_> = ddi
            .feedback()
            .into_iter()
            .filter(|(_, d)| d["status"]["execution"] == "closed")
            .collect();
        assert_eq!(fb.len(), 2 * (i + 1), "{id}: {:?}", ddi.feedback_steps());
        for fb in &fb[2 * i..] {
            assert_eq!(fb.1["status"]["result"]["finished"], "failure");
            let details = fb.1["status"]["details"][0].as_str().unwrap();
            assert!(details.contains(why), "{id}: {details}");
        }
    }
    let st = ddi.state.lock().unwrap();
    assert!(
        !st.requests
            .iter()
            .any(|(_, p, _)| p.starts_with("/artifacts/svc-server")),
        "nothing of a refused action is downloaded"
    );
    assert!(
        !paths.state_dir().join("config.json").exists(),
        "no config applied"
    );
}

#[test]
fn the_daemon_applies_a_config_chunk_and_reports_success_once_applied() {
    let ddi = DdiServer::start();
    let sb = Sandbox::new("hb-config-daemon");
    sb.install_fake_server();
    let first = json!({"agent": {"svc-agent": {"hawkbit": hawkbit_section(&ddi)}}});
    crate::hawkbit_daemon::on_hawkbit(&sb, &ddi, &first);
    // The new config keeps the hawkBit section (without it the agent would go back to its
    // management app) and adds a module.
    let new = json!({
        "agent": {"svc-agent": {"hawkbit": hawkbit_section(&ddi)}},
        "modules": [{"type": "local", "name": "tool", "module_id": "lab:tool",
                     "executable_path": "/bin/true", "env": {"MODE": "from-hawkbit"}}]
    });
    let text = serde_json::to_string_pretty(&new).unwrap();
    ddi.deploy(
        "86",
        &format!(
            "[{}]",
            ddi.chunk("svc-config", "2026.11.24", text.as_bytes())
        ),
    );
    let mut agent = sb.spawn_agent(&[]);
    wait_for("closed/success", 120, || {
        ddi.feedback_steps().contains(&"closed/success".to_string())
    });
    terminate(&mut agent);
    let kept = std::fs::read_to_string(sb.root.join("opt/svc/config.json")).unwrap();
    assert!(kept.contains("from-hawkbit"), "{kept}");
    assert!(sb.log().contains("config applied"));
}
