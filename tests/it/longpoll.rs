//! The long poll (docs/protocol.md, issue 19): an app that holds polls gets them held and a
//! change reaches the machine on the held request, not at the next interval; an app that
//! does not hold polls is polled by its interval with the usual short deadline; a held
//! connection that goes silent (no answer, no FIN, no RST) is given up and replaced. Each
//! directly and through nginx. No timings are asserted: the interval here is an hour, so
//! only the held request can bring the change.
use crate::common;
use common::https::{app_sandbox as setup, Behavior, Front, HttpsServer};
use common::sandbox::*;
use serde_json::json;

fn answer(mode: &str, interval: u64) -> serde_json::Value {
    json!({
        "poll_interval_secs": interval,
        "config": {"modules": [{"type": "local", "name": "tool", "module_id": "lab:tool",
                                "executable_path": "/bin/true", "env": {"MODE": mode}}]}
    })
}

fn spawn(sb: &Sandbox, srv: &HttpsServer, hold: &str) -> std::process::Child {
    sb.spawn_agent(&[
        ("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap()),
        ("SVC_AGENT_HTTP_TIMEOUT_SECS", "3"),
        ("SVC_AGENT_POLL_HOLD_SECS", hold),
    ])
}

fn waits(srv: &HttpsServer) -> Vec<Option<String>> {
    srv.polls()
        .iter()
        .map(|p| p.header("prefer").map(str::to_string))
        .collect()
}

fn held_poll_brings_a_change(front: Front) {
    let (sb, srv) = setup("longpoll-change", front);
    srv.hold_polls();
    srv.set_answer(answer("one", 3600));
    let mut agent = spawn(&sb, &srv, "600");
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    wait_for("a held poll", 60, || srv.holding() == 1);
    srv.set_answer(answer("two", 3600));
    wait_for("the change on the held poll", 60, || {
        sb.fake("events").contains("hup")
    });
    assert!(std::fs::read_to_string(sb.root.join("opt/svc/config.json"))
        .unwrap()
        .contains("\"two\""));
    // The agent asks again at once, and that poll is held too; once the status has settled
    // (svc-server reloaded), a held poll carries none (released here by more changes).
    for n in 3..8 {
        wait_for("the next held poll", 60, || srv.holding() == 1);
        if srv
            .polls()
            .iter()
            .any(|p| p.header("x-svc-status") == Some("unchanged"))
        {
            break;
        }
        srv.set_answer(answer(&format!("mode-{n}"), 3600));
        wait_for("a held poll answered", 60, || srv.holding() == 0);
    }
    terminate(&mut agent);
    let w = waits(&srv);
    assert_eq!(w[0].as_deref(), Some("wait=0"), "first contact: {w:?}");
    assert!(w.iter().any(|p| p.as_deref() == Some("wait=600")), "{w:?}");
    // A held poll whose status the app has already answered does not send it again.
    let polls = srv.polls();
    let unchanged: Vec<_> = polls
        .iter()
        .filter(|p| p.header("x-svc-status") == Some("unchanged"))
        .collect();
    assert!(!unchanged.is_empty(), "{polls:?}");
    assert!(unchanged
        .iter()
        .all(|p| p.body.is_empty() && p.header("prefer") == Some("wait=600")));
    assert!(polls[0].header("x-svc-status").is_none() && !polls[0].body.is_empty());
}
both_fronts!(held_poll_brings_a_change);

fn plain_app_is_polled_by_its_interval(front: Front) {
    // (and always gets the status: `X-Svc-Status: unchanged` is for apps that hold polls)
    let (sb, srv) = setup("longpoll-plain", front);
    srv.set_answer(answer("one", 1));
    let mut agent = spawn(&sb, &srv, "600");
    wait_for("three 304s", 60, || {
        srv.polls().iter().filter(|p| p.status_sent == 304).count() >= 3
    });
    terminate(&mut agent);
    // An app that never said it holds polls is never asked to: a hung one is given up
    // after the usual deadline, not after a hold.
    let w = waits(&srv);
    assert!(w.iter().all(|p| p.as_deref() == Some("wait=0")), "{w:?}");
    assert_eq!(srv.holding(), 0);
    assert!(srv
        .polls()
        .iter()
        .all(|p| p.header("x-svc-status").is_none() && !p.body.is_empty()));
}
both_fronts!(plain_app_is_polled_by_its_interval);

fn silent_held_connection_is_replaced(front: Front) {
    let (sb, srv) = setup("longpoll-silent", front);
    srv.hold_polls();
    srv.set_answer(answer("one", 3600));
    let mut agent = spawn(&sb, &srv, "2");
    wait_for("a held poll answered", 60, || {
        srv.polls()
            .iter()
            .any(|p| p.header("prefer") == Some("wait=2") && p.status_sent == 304)
    });
    // The next poll is read and then nothing: no answer, no close, as when a NAT forgot the
    // connection. The agent gives it up after hold + deadline and polls again.
    srv.script(Behavior::Silent);
    wait_for("the silent poll", 60, || {
        srv.polls().iter().any(|p| p.status_sent == 0)
    });
    let silent = srv.polls().iter().position(|p| p.status_sent == 0).unwrap();
    wait_for("a new poll after the silent one", 60, || {
        srv.polls()
            .iter()
            .skip(silent + 1)
            .any(|p| p.status_sent == 304)
    });
    srv.set_answer(answer("two", 3600));
    wait_for("the change after the silent connection", 60, || {
        sb.fake("events").contains("hup")
    });
    terminate(&mut agent);
}
both_fronts!(silent_held_connection_is_replaced);
