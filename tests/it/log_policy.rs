//! The log shipping policy (issue 47, docs/logs.md "What is sent, and when"), end to end:
//! the real agent, a stand-in svc-server that logs a debug line five times a second (as the
//! real one logs "registry check done") and info or error lines on demand, and an app that
//! holds polls. Debug lines are never shipped by default; an info line waits for the next
//! poll cycle; an error goes within seconds, taking what waited with it; the config turns
//! debug shipping on.
use crate::common;
use common::https::{app_sandbox as setup, Front, HttpsServer};
use common::sandbox::*;
use serde_json::json;

/// Debug chatter on stderr (`<7>`, as svc-server writes its levels under the agent), and a
/// line at the level a file asks for: `say` holds `<N>TEXT`.
const CHATTY_SERVER: &str = r#"#!/bin/sh
out="$SVC_HOME/../fake-server"
mkdir -p "$out"
echo $$ >> "$out/pids"
trap 'echo hup >> "$out/events"' HUP
trap 'echo term >> "$out/events"; exit 0' TERM
while :; do
    echo "<7>[svc-server] registry check done" >&2
    if [ -f "$out/say" ]; then
        cat "$out/say" >&2
        echo >&2
        rm -f "$out/say"
    fi
    sleep 0.2
done
"#;

fn answer(logs: serde_json::Value) -> serde_json::Value {
    json!({"config": {"modules": [], "agent": {"svc-agent": {"logs": logs}}}})
}

/// Makes the stand-in log `line` (`<N>TEXT`) and waits until the agent has relayed it.
fn say(sb: &Sandbox, line: &str) {
    let dir = sb.root.join("opt/svc/fake-server");
    std::fs::write(dir.join(".say.tmp"), line).unwrap();
    std::fs::rename(dir.join(".say.tmp"), dir.join("say")).unwrap();
    let text = line.split_once('>').unwrap().1;
    wait_for(&format!("the agent to relay {text:?}"), 60, || {
        sb.log().contains(text)
    });
}

/// The index of the first log batch holding `text`.
fn batch_with(srv: &HttpsServer, text: &str) -> Option<usize> {
    srv.logs().iter().position(|b| b.contains(text))
}

fn debug_chatter_of(sb: &Sandbox) -> usize {
    sb.log().matches("registry check done").count()
}

#[test]
fn debug_is_never_shipped_info_rides_the_poll_cycle_errors_go_at_once() {
    let (sb, srv) = setup("log-policy", Front::Direct);
    let bin = sb.root.join("opt/svc/bin/svc-server");
    std::fs::write(&bin, CHATTY_SERVER).unwrap();
    srv.set_answer(answer(json!({})));
    srv.hold_polls();
    let mut agent = sb.spawn_agent(&[
        ("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap()),
        ("SVC_AGENT_HTTP_TIMEOUT_SECS", "5"),
        ("SVC_AGENT_POLL_HOLD_SECS", "3600"),
    ]);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    wait_for("a held poll", 60, || srv.holding() == 1);
    // The first answer's cycle has taken the start-up lines (the shipper says so on stderr).
    wait_for("the start-up lines shipped", 60, || {
        sb.log().contains("backlog shipped")
    });

    // An info line while the poll is held: it waits, however long the chatter goes on. The
    // window is counted in relayed lines, not seconds: 150 of them, 30 s at the stand-in's
    // pace (longer on a busy machine), three of the agent's 10 s idle shipper wake-ups and
    // fifteen of its 2 s maintenance ticks (src/agent/logs.rs). The deadline is only for a
    // stand-in that stopped: a loaded machine (load 35) took more than 120 s for 300 lines.
    say(&sb, "<6>INFO-MARK-1 svc-server started");
    let chatter = debug_chatter_of(&sb);
    wait_for("150 more debug lines relayed", 600, || {
        debug_chatter_of(&sb) >= chatter + 150
    });
    assert_eq!(
        batch_with(&srv, "INFO-MARK-1"),
        None,
        "an info line was shipped on its own, not with a poll cycle"
    );

    // An error goes within seconds, and what waited goes with it, in one connection.
    say(&sb, "<3>ERROR-MARK-1 disk failing");
    wait_for("the error shipped", 30, || {
        batch_with(&srv, "ERROR-MARK-1").is_some()
    });
    assert_eq!(
        batch_with(&srv, "INFO-MARK-1"),
        batch_with(&srv, "ERROR-MARK-1"),
        "the waiting info line did not ride with the error"
    );

    // The next poll cycle (a change answers the held poll) takes what waits.
    say(&sb, "<6>INFO-MARK-2 svc-server stopped");
    srv.set_answer(answer(json!({"max_wait_secs": 1800})));
    wait_for("the info line shipped with the poll cycle", 60, || {
        batch_with(&srv, "INFO-MARK-2").is_some()
    });
    assert!(
        !srv.logs().iter().any(|b| b.contains("registry check done")),
        "debug lines were shipped by default"
    );

    // The operator turns debug on from the app: it ships, at once.
    srv.set_answer(answer(json!({"level": "debug", "max_wait_secs": 0})));
    wait_for("debug lines shipped once asked for", 60, || {
        batch_with(&srv, "registry check done").is_some()
    });
    terminate(&mut agent);
}
