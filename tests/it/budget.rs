//! The byte budget through the real agent (issue 44): a download that does not fit waits
//! (nothing requested, the status names the wait and its end) and goes in the next period; a
//! pin is never held; `delta_fallback: "budget"` takes the full artifact only when it fits;
//! the idle protocol traffic moves the count; a corrupt budget file is a fresh count.
//!
//! The time is the real one: a test sets the period of `budget.json` (today's, or
//! yesterday's as the agent finds it after midnight) and what it has spent.
use crate::common;
use crate::ddi_server::{DdiServer, CONTROLLER, TENANT};
use crate::hawkbit::swu_image;
use crate::hawkbit_daemon;
use crate::update_support::fake_binary;
use common::https::{Behavior, Front, HttpsServer};
use common::sandbox::*;
use serde_json::{json, Value};
use sha2::Digest;
use svc::update::budget;

/// Far above any test's traffic, below the config's integer bound.
const LIMIT: u64 = 4_000_000_000;
const FULL: &str = "/artifacts/full";

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn ledger_path(sb: &Sandbox) -> std::path::PathBuf {
    sb.root.join("opt/svc/budget.json")
}

fn ledger(sb: &Sandbox) -> Value {
    std::fs::read(ledger_path(sb))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// `budget.json` as the agent writes it, for the period of `at`, with `spent` bytes spent.
fn set_ledger(sb: &Sandbox, at: u64, spent: u64) {
    let p = budget::period(at);
    std::fs::create_dir_all(sb.root.join("opt/svc")).unwrap();
    let v = json!({"day": p.day, "day_bytes": spent, "month": p.month, "month_bytes": spent});
    std::fs::write(ledger_path(sb), v.to_string()).unwrap();
}

struct App {
    sb: Sandbox,
    srv: HttpsServer,
    new: Vec<u8>,
}

/// An HTTPS app offering the real svc-server over the fake one that runs, under `agent` (the
/// config's `svc-agent` and `svc-server` sections) and with `deltas` offered.
fn app(name: &str, agent: Value, deltas: Value) -> App {
    let sb = Sandbox::new(name);
    let srv = HttpsServer::start_behind(&sb.root.join("tls"), Front::Direct);
    sb.write_credentials(srv.base_url());
    sb.install_fake_server();
    let new = std::fs::read(env!("CARGO_BIN_EXE_svc-server")).unwrap();
    srv.add(FULL, new.clone(), Behavior::Normal);
    srv.set_answer(json!({
        "poll_interval_secs": 1,
        "config": {"agent": agent},
        "targets": {"svc-server": {
            "version": env!("CARGO_PKG_VERSION"), "url": "artifacts/full",
            "sha256": svc::encoding::hex(&sha2::Sha256::digest(&new)), "size": new.len(),
            "deltas": deltas,
        }},
    }));
    App { sb, srv, new }
}

impl App {
    fn spawn(&self) -> std::process::Child {
        self.sb
            .spawn_agent(&[("SSL_CERT_FILE", self.srv.ca.ca_file.to_str().unwrap())])
    }

    /// The status names svc-server's wait, ending at `until`.
    fn wait_held(&self, until: u64) {
        wait_for("the budget's wait in the status", 120, || {
            self.sb.status()["budget"]["waiting"]["svc-server"]["until"] == json!(until)
        });
    }

    /// More polls answered, with the wait going on (a poll is not a new try).
    fn more_polls(&self, n: usize) {
        let seen = self.srv.polls().len();
        wait_for(&format!("{n} more polls"), 60, || {
            self.srv.polls().len() >= seen + n
        });
    }

    fn wait_installed(&self) {
        let want = format!("../cache/svc-server-{}", env!("CARGO_PKG_VERSION"));
        wait_for("the new svc-server linked", 180, || {
            std::fs::read_link(self.sb.root.join("opt/svc/bin/svc-server"))
                .is_ok_and(|p| p.display().to_string() == want)
        });
    }

    fn next_day(&self) {
        next_day(&self.sb);
    }
}

/// What the agent finds after midnight: the ledger's day is yesterday's, spent whole; the
/// rest of it (the wait it noted) as the agent left it.
fn next_day(sb: &Sandbox) {
    let mut l = ledger(sb);
    l["day"] = json!(budget::period(now() - 86_400).day);
    l["day_bytes"] = json!(LIMIT);
    l["month_bytes"] = json!(0);
    std::fs::write(ledger_path(sb), l.to_string()).unwrap();
}

fn day_budget() -> Value {
    json!({"svc-agent": {"updates": {"budget": {"day_bytes": LIMIT}}}})
}

#[test]
fn a_download_over_the_budget_waits_and_the_next_period_resumes_it() {
    let a = app("budget-wait", day_budget(), json!([]));
    // Half the artifact is left today.
    let start = now();
    set_ledger(&a.sb, start, LIMIT - a.new.len() as u64 / 2);
    let mut agent = a.spawn();
    a.wait_held(budget::period(start).next_day);
    a.more_polls(3);
    assert_eq!(a.srv.requests(FULL).len(), 0, "nothing downloaded");
    let log = a.sb.log();
    assert_eq!(
        log.matches("waits for the byte budget").count(),
        1,
        "logged once: {log}"
    );
    assert!(
        !log.contains("update failed"),
        "a wait is no failure: {log}"
    );
    terminate(&mut agent);

    a.next_day();
    let mut agent = a.spawn();
    a.wait_installed();
    assert_eq!(a.srv.requests(FULL).len(), 1);
    wait_for("the wait gone from the status", 60, || {
        a.sb.status()["budget"]["waiting"] == json!({})
    });
    assert!(
        a.sb.log().contains("the byte budget lets it download now"),
        "{}",
        a.sb.log()
    );
    terminate(&mut agent);
}

#[test]
fn a_pin_is_never_held_by_the_budget() {
    let a = app(
        "budget-pin",
        json!({
            "svc-agent": {"updates": {"budget": {"day_bytes": LIMIT}}},
            "svc-server": {"pin_version": env!("CARGO_PKG_VERSION")},
        }),
        json!([]),
    );
    // Nothing left today: only a pin may download.
    set_ledger(&a.sb, now(), LIMIT);
    let mut agent = a.spawn();
    a.wait_installed();
    assert_eq!(a.srv.requests(FULL).len(), 1);
    assert!(
        a.sb.log().contains("downloaded anyway: it is pinned"),
        "{}",
        a.sb.log()
    );
    // Counted all the same.
    wait_for("the pinned download counted", 60, || {
        ledger(&a.sb)["day_bytes"].as_u64().unwrap_or(0) >= LIMIT + a.new.len() as u64
    });
    terminate(&mut agent);
}

#[test]
fn delta_fallback_budget_takes_the_full_artifact_only_when_it_fits() {
    let unusable = json!([{"from": "ab".repeat(32), "url": "artifacts/other", "size": 10,
                           "sha256": "cd".repeat(32)}]);
    let a = app(
        "budget-fallback",
        json!({"svc-agent": {"updates": {"delta_fallback": "budget",
                                          "budget": {"day_bytes": LIMIT}}}}),
        unusable,
    );
    let start = now();
    set_ledger(&a.sb, start, LIMIT - a.new.len() as u64 / 2);
    let mut agent = a.spawn();
    a.wait_held(budget::period(start).next_day);
    assert_eq!(a.srv.requests(FULL).len(), 0, "the full does not fit");
    assert_eq!(a.srv.requests("/artifacts/other").len(), 0);
    assert!(
        a.sb.log().contains("within the byte budget"),
        "{}",
        a.sb.log()
    );
    terminate(&mut agent);

    a.next_day();
    let mut agent = a.spawn();
    a.wait_installed();
    assert_eq!(a.srv.requests(FULL).len(), 1, "the full fits now");
    wait_for("the fall-back in the status", 60, || {
        a.sb.status()["versions"]["svc-server"]["delta"]["outcome"] == "full-download"
    });
    terminate(&mut agent);
}

#[test]
fn idle_polls_move_the_count_and_no_budget_writes_nothing() {
    let sb = Sandbox::new("budget-idle");
    let srv = HttpsServer::start_behind(&sb.root.join("tls"), Front::Direct);
    sb.write_credentials(srv.base_url());
    sb.install_fake_server();
    srv.set_answer(json!({"poll_interval_secs": 1, "config": {"agent": {}}}));
    let mut agent = sb.spawn_agent(&[("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap())]);
    wait_for("3 polls", 60, || srv.polls().len() >= 3);
    assert!(!ledger_path(&sb).exists(), "the budget is off by default");

    srv.set_answer(json!({"poll_interval_secs": 1, "config": {"agent": day_budget()}}));
    wait_for("the count started", 60, || {
        ledger(&sb)["day_bytes"].as_u64().unwrap_or(0) > 0
    });
    let first = ledger(&sb)["day_bytes"].as_u64().unwrap();
    let polls = srv.polls().len();
    wait_for("3 more polls", 60, || srv.polls().len() >= polls + 3);
    // Each poll's request alone (its line and headers) is well over 100 bytes.
    wait_for("the polls counted", 60, || {
        ledger(&sb)["day_bytes"].as_u64().unwrap_or(0) >= first + 300
    });
    assert_eq!(ledger(&sb)["day"], json!(budget::period(now()).day));
    terminate(&mut agent);
}

#[test]
fn a_corrupt_budget_file_is_a_clear_line_and_a_fresh_count() {
    let sb = Sandbox::new("budget-corrupt");
    let srv = HttpsServer::start_behind(&sb.root.join("tls"), Front::Direct);
    sb.write_credentials(srv.base_url());
    sb.install_fake_server();
    srv.set_answer(json!({"poll_interval_secs": 1, "config": {"agent": day_budget()}}));
    std::fs::create_dir_all(sb.root.join("opt/svc")).unwrap();
    std::fs::write(ledger_path(&sb), b"{\"day\": 7, \"day_bytes\": \"lots\"").unwrap();
    let mut agent = sb.spawn_agent(&[("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap())]);
    wait_for("a fresh count", 60, || {
        ledger(&sb)["day_bytes"].as_u64().unwrap_or(0) > 0
    });
    let log = sb.log();
    assert_eq!(
        log.matches("is not a budget record").count(),
        1,
        "one clear line: {log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    assert!(pid_alive(agent.id() as i32));
    terminate(&mut agent);
}

/// The requests the DDI server had whose path contains `part` (feedback posts left out).
fn ddi_requests(ddi: &DdiServer, part: &str) -> usize {
    let st = ddi.state.lock().unwrap();
    st.requests
        .iter()
        .filter(|(_, p, _)| p.contains(part) && !p.ends_with("/feedback"))
        .count()
}

/// A machine on the hawkBit backend of `ddi`, with a day's budget of `LIMIT`.
fn hawkbit_machine(name: &str, ddi: &DdiServer) -> Sandbox {
    let sb = hawkbit_daemon::machine(name, ddi);
    let cfg = json!({"agent": {"svc-agent": {
        "hawkbit": {"server_url": ddi.url(), "tenant": TENANT,
                    "controller_id": CONTROLLER, "auth": "target-token"},
        "updates": {"budget": {"day_bytes": LIMIT}}}}});
    hawkbit_daemon::on_hawkbit(&sb, ddi, &cfg);
    sb
}

/// Attack (issue 44): the hawkBit backend's SWUpdate image was downloaded whole whatever the
/// budget said (its download options carried no gate). Now it waits as a binary does: no
/// request for it, the status's `budget.waiting` names it, the log says it once, the server
/// hears `proceeding` with the wait's end once (never `failure`); the next period downloads
/// it and the action goes on.
#[test]
fn a_swu_image_over_the_budget_waits_and_the_next_period_resumes_it() {
    let ddi = DdiServer::start();
    let sb = hawkbit_machine("budget-swu", &ddi);
    let body = fake_binary("svc-server", "2.0.0", "hang", 50_000);
    let image = swu_image(&[("svc-server", "2.0.0", &body)], &[&body], None, None);
    let chunk = ddi.chunk("image", "2.0.0", &image).replace(
        "\"filename\": \"image-2.0.0\"",
        "\"filename\": \"image-2.0.0.swu\"",
    );
    ddi.deploy("81", &format!("[{chunk}]"));
    let start = now();
    set_ledger(&sb, start, LIMIT - image.len() as u64 / 2);
    let until = budget::period(start).next_day;
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_PROBATION_SECS", "2")]);
    wait_for("the budget's wait in the status", 120, || {
        sb.status()["budget"]["waiting"]["swu"]["until"] == json!(until)
    });
    let waits = |ddi: &DdiServer| -> Vec<String> {
        ddi.feedback()
            .iter()
            .filter(|(id, _)| id == "81")
            .map(|(_, d)| d.to_string())
            .collect()
    };
    wait_for("the server told of the wait", 60, || {
        waits(&ddi)
            .iter()
            .any(|d| d.contains("waiting for the byte budget until"))
    });
    let reads = ddi_requests(&ddi, "/deploymentBase/81");
    wait_for("3 more reads of the deployment", 60, || {
        ddi_requests(&ddi, "/deploymentBase/81") >= reads + 3
    });
    assert_eq!(ddi_requests(&ddi, "/artifacts/"), 0, "nothing downloaded");
    let told = waits(&ddi);
    assert_eq!(told.len(), 1, "the wait told once, as proceeding: {told:?}");
    assert!(told[0].contains("\"proceeding\""), "{told:?}");
    assert!(!told[0].contains("failure"), "{told:?}");
    let log = sb.log();
    assert_eq!(
        log.matches("waits for the byte budget").count(),
        1,
        "logged once: {log}"
    );
    assert!(!log.contains("poll failed"), "a wait is no failure: {log}");
    terminate(&mut agent);

    next_day(&sb);
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_PROBATION_SECS", "2")]);
    wait_for("svc-server 2.0.0 linked", 180, || {
        hawkbit_daemon::linked(&sb) == "svc-server-2.0.0"
    });
    assert!(ddi_requests(&ddi, "/artifacts/") >= 1);
    wait_for("the wait gone from the status", 60, || {
        sb.status()["budget"]["waiting"] == json!({})
    });
    assert!(
        !ddi.feedback_steps().iter().any(|s| s.ends_with("failure")),
        "{:?}",
        ddi.feedback_steps()
    );
    terminate(&mut agent);
}

/// hawkBit's binary chunks go through the engine's own downloads: held the same way, and
/// the action stays `proceeding` (never `failure`) while it waits.
#[test]
fn a_hawkbit_binary_chunk_over_the_budget_waits_and_its_action_is_no_failure() {
    let ddi = DdiServer::start();
    let sb = hawkbit_machine("budget-hb-chunk", &ddi);
    let body = fake_binary("svc-server", "2.0.0", "hang", 50_000);
    ddi.deploy(
        "82",
        &format!("[{}]", ddi.chunk("svc-server", "2.0.0", &body)),
    );
    let start = now();
    set_ledger(&sb, start, LIMIT - body.len() as u64 / 2);
    let mut agent = sb.spawn_agent(&[]);
    wait_for("the budget's wait in the status", 120, || {
        sb.status()["budget"]["waiting"]["svc-server"]["until"]
            == json!(budget::period(start).next_day)
    });
    let polls = ddi_requests(&ddi, "/controller/v1/");
    wait_for("3 more polls", 60, || {
        ddi_requests(&ddi, "/controller/v1/") >= polls + 3
    });
    assert_eq!(ddi_requests(&ddi, "/artifacts/"), 0, "nothing downloaded");
    let steps = ddi.feedback_steps();
    assert!(
        steps.iter().all(|s| s == "proceeding/none"),
        "only proceeding while it waits: {steps:?}"
    );
    terminate(&mut agent);
}
