//! Consent before install (`confirmationBase`) against the DDI test server: nothing is
//! downloaded before consent; the local command decides on the action it names only; a
//! decision is never carried over to another action; `auto_confirm` decides at once; a
//! document that is not the action its link names is refused.
use crate::common;
use crate::ddi_server::{DdiServer, CONTROLLER, TENANT, TOKEN};
use crate::update_support::{fake_binary, install_old, sandbox};
use common::sandbox::*;
use serde_json::json;
use svc::hawkbit::consent;
use svc::hawkbit::HawkbitTransport;
use svc::paths::Paths;
use svc::protocol::{PollOutcome, ProtocolError, Transport};

const NAME: &str = "svc-server";

fn setup(test: &str) -> (Paths, DdiServer) {
    let paths = sandbox(&format!("hawkbit-consent-{test}"));
    install_old(&paths, NAME, "1.0.0");
    svc::fsutil::atomic_write(
        &paths.device("/etc/svc-hawkbit.token"),
        format!("{TOKEN}\n").as_bytes(),
        0o600,
    )
    .unwrap();
    (paths, DdiServer::start())
}

fn transport(paths: &Paths, ddi: &DdiServer, auto_confirm: bool) -> HawkbitTransport {
    let cfg = json!({"agent": {"svc-agent": {"hawkbit": {
        "server_url": ddi.url(), "tenant": TENANT, "controller_id": CONTROLLER,
        "auth": "target-token", "auto_confirm": auto_confirm}}}});
    let (cfg, _) = svc::config::parse_value(&cfg).unwrap();
    HawkbitTransport::connect(paths, cfg.agent.agent.hawkbit.as_ref().unwrap()).unwrap()
}

fn poll(paths: &Paths, ddi: &DdiServer, auto: bool) -> Result<PollOutcome, ProtocolError> {
    transport(paths, ddi, auto).poll(&serde_json::Value::Null, None)
}

fn decisions(ddi: &DdiServer) -> Vec<(String, String)> {
    ddi.state
        .lock()
        .unwrap()
        .confirm_feedback
        .iter()
        .map(|(id, d)| (id.clone(), d["confirmation"].as_str().unwrap_or("?").into()))
        .collect()
}

fn offered(o: PollOutcome) -> bool {
    matches!(o, PollOutcome::Changed { answer, .. } if answer.targets.server.is_some())
}

#[test]
fn nothing_is_installed_before_consent_and_a_decision_is_for_its_action_only() {
    let (paths, ddi) = setup("local");
    let body = fake_binary(NAME, "2.0.0", "ok", 1000);
    ddi.ask_consent(
        "65",
        "65",
        &format!("[{}]", ddi.chunk(NAME, "2.0.0", &body)),
    );
    assert!(!offered(poll(&paths, &ddi, false).unwrap()));
    let c = consent::load(&paths).expect("the action waits for consent");
    assert_eq!((c.action.as_str(), c.decision), ("65", None));
    assert_eq!(c.targets, [(NAME.to_string(), "2.0.0".to_string())]);
    poll(&paths, &ddi, false).unwrap();
    assert!(decisions(&ddi).is_empty(), "no consent, nothing said");
    // The command refuses to decide on an action that does not wait.
    let e = consent::decide(&paths, Some("66"), consent::Decision::Confirmed)
        .unwrap_err()
        .to_string();
    assert!(e.contains("action 66 does not wait"), "{e}");
    consent::decide(&paths, Some("65"), consent::Decision::Confirmed).unwrap();
    // Attack: before the agent polls, the server swaps in another action for consent.
    ddi.ask_consent(
        "66",
        "66",
        &format!("[{}]", ddi.chunk(NAME, "2.0.0", &body)),
    );
    assert!(!offered(poll(&paths, &ddi, false).unwrap()));
    assert!(decisions(&ddi).is_empty(), "65's yes is not 66's");
    let c = consent::load(&paths).unwrap();
    assert_eq!((c.action.as_str(), c.decision), ("66", None));
    // Declined: said once; the server keeps the action waiting and nothing is fetched.
    consent::decide(&paths, None, consent::Decision::Denied).unwrap();
    assert!(!offered(poll(&paths, &ddi, false).unwrap()));
    assert!(!offered(poll(&paths, &ddi, false).unwrap()));
    assert_eq!(decisions(&ddi), [("66".to_string(), "denied".to_string())]);
    // Changed mind: confirmed; the action becomes a deployment, offered to the engine.
    consent::decide(&paths, Some("66"), consent::Decision::Confirmed).unwrap();
    poll(&paths, &ddi, false).unwrap();
    assert_eq!(
        decisions(&ddi)[1],
        ("66".to_string(), "confirmed".to_string())
    );
    assert!(offered(poll(&paths, &ddi, false).unwrap()));
    let st = ddi.state.lock().unwrap();
    assert!(!st
        .requests
        .iter()
        .any(|(_, p, _)| p.starts_with("/artifacts/")));
}

#[test]
fn auto_confirm_consents_at_once() {
    let (paths, ddi) = setup("auto");
    let body = fake_binary(NAME, "2.0.0", "ok", 1000);
    ddi.ask_consent(
        "67",
        "67",
        &format!("[{}]", ddi.chunk(NAME, "2.0.0", &body)),
    );
    poll(&paths, &ddi, true).unwrap();
    assert_eq!(
        decisions(&ddi),
        [("67".to_string(), "confirmed".to_string())]
    );
    let doc = ddi.state.lock().unwrap().confirm_feedback[0].1.clone();
    assert!(doc["details"][0].as_str().unwrap().contains("auto_confirm"));
    assert!(offered(poll(&paths, &ddi, true).unwrap()));
    assert_eq!(decisions(&ddi).len(), 1, "said once");
}

#[test]
fn a_confirmation_document_for_another_action_is_refused() {
    let (paths, ddi) = setup("hostile");
    let body = fake_binary(NAME, "2.0.0", "ok", 1000);
    ddi.ask_consent(
        "68",
        "69",
        &format!("[{}]", ddi.chunk(NAME, "2.0.0", &body)),
    );
    let e = poll(&paths, &ddi, true).unwrap_err();
    assert!(
        matches!(&e, ProtocolError::BadAnswer(m) if m.contains("names action 68 but its document is action 69")),
        "{e}"
    );
    assert!(decisions(&ddi).is_empty());
    assert!(consent::load(&paths).is_none());
    // A hostile chunk in a confirmation is refused like one in a deployment.
    let bad = ddi
        .chunk(NAME, "2.0.0", &body)
        .replace("\"name\": \"svc-server\"", "\"name\": \"kernel\"");
    ddi.ask_consent("70", "70", &format!("[{bad}]"));
    let e = poll(&paths, &ddi, true).unwrap_err();
    assert!(
        matches!(&e, ProtocolError::BadAnswer(m) if m.contains("unknown chunk")),
        "{e}"
    );
    assert!(decisions(&ddi).is_empty());
}

/// The real daemon and the real command: the status names the action waiting; `svc-agent
/// hawkbit confirm` with another action's id is refused; `confirm` lets it install.
#[test]
fn the_daemon_waits_for_the_command_and_shows_the_action_in_its_status() {
    let ddi = DdiServer::start();
    let sb = crate::hawkbit_daemon::machine("hb-consent-daemon", &ddi);
    let body = fake_binary(NAME, "2.0.0", "hang", 1000);
    ddi.ask_consent(
        "71",
        "71",
        &format!("[{}]", ddi.chunk(NAME, "2.0.0", &body)),
    );
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_PROBATION_SECS", "3")]);
    wait_for("the status to name the action", 60, || {
        sb.status()["subsystems"]["hawkbit"]["state"] == "waiting for consent"
    });
    let reason = sb.status()["subsystems"]["hawkbit"]["reason"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        reason.contains("action 71 would install svc-server 2.0.0"),
        "{reason}"
    );
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_svc-agent"))
            .args(args)
            .args(["--root", sb.root.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let human = cli(&["status"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("hawkbit: waiting for consent"));
    let wrong = cli(&["hawkbit", "confirm", "--action", "72"]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("action 72 does not wait"));
    let ok = cli(&["hawkbit", "confirm", "--action", "71"]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    wait_for("closed/success", 120, || {
        ddi.feedback_steps().contains(&"closed/success".to_string())
    });
    terminate(&mut agent);
    assert_eq!(
        decisions(&ddi),
        [("71".to_string(), "confirmed".to_string())]
    );
}
