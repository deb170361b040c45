//! The real `svc-agent run` against a real HTTPS management app on loopback with a test CA:
//! first contact, conditional polls, config change, and every kind of server failure.
use crate::common;
use common::https::{app_sandbox as setup, Behavior, Front, HttpsServer, LOGS};
use common::sandbox::*;
use serde_json::json;
use std::time::Duration;

fn answer(mode: &str) -> serde_json::Value {
    json!({
        "poll_interval_secs": 1,
        "config": {"modules": [{"type": "local", "name": "tool", "module_id": "lab:tool",
                                "executable_path": "/bin/true", "env": {"MODE": mode}}]}
    })
}

fn spawn(sb: &Sandbox, srv: &HttpsServer) -> std::process::Child {
    sb.spawn_agent(&[
        ("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap()),
        ("SVC_AGENT_HTTP_TIMEOUT_SECS", "3"),
    ])
}

fn first_contact_conditional_polls_and_config_change(front: Front) {
    let (sb, srv) = setup("https-first", front);
    srv.set_answer(answer("one"));
    let mut agent = spawn(&sb, &srv);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    assert!(std::fs::read_to_string(sb.root.join("opt/svc/config.json"))
        .unwrap()
        .contains("\"one\""));
    wait_for("a 304", 30, || {
        srv.polls().iter().any(|p| p.status_sent == 304)
    });
    let polls = srv.polls();
    let first = &polls[0];
    // Credentials travel in headers, never in the URL.
    assert_eq!(first.path, "/api/v1/agent/poll");
    assert_eq!(first.header("x-svc-part-id"), Some("part-1"));
    assert_eq!(
        first.header("authorization"),
        Some("Secret sandbox-secret-123")
    );
    let report: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
    assert_eq!(report["agent"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(report["host"]["arch"].is_string());
    let not_modified = polls.iter().find(|p| p.status_sent == 304).unwrap();
    assert!(not_modified.header("if-none-match").is_some());
    srv.set_answer(answer("two"));
    wait_for("the new config", 30, || sb.fake("events").contains("hup"));
    assert!(std::fs::read_to_string(sb.root.join("opt/svc/config.json"))
        .unwrap()
        .contains("\"two\""));
    // Logs arrive at the app's log endpoint, authenticated like polls.
    wait_for("a log batch", 60, || !srv.logs().is_empty());
    let batch: serde_json::Value = serde_json::from_str(&srv.logs()[0]).unwrap();
    assert!(batch["records"][0]["id"].is_u64(), "{batch}");
    assert!(srv
        .log_posts()
        .iter()
        .all(|s| s.header("authorization") == Some("Secret sandbox-secret-123")));
    // The secret never reaches the log.
    assert!(!sb.log().contains("sandbox-secret-123"));
    assert!(!srv.logs().iter().any(|l| l.contains("sandbox-secret-123")));
    terminate(&mut agent);
}

fn server_errors_back_off_and_recover(front: Front) {
    let (sb, srv) = setup("https-errors", front);
    srv.set_answer(answer("ok"));
    srv.script(Behavior::Status(500, vec![], "boom".into()));
    srv.script(Behavior::garbage());
    srv.script(Behavior::Reset);
    srv.script(Behavior::Slow(Duration::from_secs(6)));
    srv.script(Behavior::Status(
        429,
        vec![("Retry-After".into(), "2".into())],
        String::new(),
    ));
    let mut agent = spawn(&sb, &srv);
    wait_for("recovery after the failures", 120, || {
        std::fs::read_to_string(sb.root.join("opt/svc/config.json"))
            .is_ok_and(|c| c.contains("\"ok\""))
    });
    let log = sb.log();
    for expected in [
        "HTTP 500: boom",
        "not a poll answer",
        "poll failed",
        "timeout",
        "HTTP 429",
        "reachable again",
    ] {
        assert!(log.contains(expected), "log lacks {expected:?}:\n{log}");
    }
    // Retry-After is a floor over the backoff, never a shortcut past it.
    let after_429: u64 = log
        .lines()
        .find(|l| l.contains("HTTP 429"))
        .and_then(|l| l.rsplit("next try in ").next())
        .and_then(|t| t.trim_end_matches('s').parse().ok())
        .unwrap_or_else(|| panic!("no wait after the 429:\n{log}"));
    assert!(after_429 >= 2, "Retry-After: 2 cut short:\n{log}");
    // svc-server started anyway once the bounded first-contact wait ran out.
    assert!(!sb.fake("pids").is_empty());
    terminate(&mut agent);
}

fn a_rejected_key_is_not_retried_in_a_loop(front: Front) {
    let (sb, srv) = setup("https-401", front);
    srv.set_answer(answer("never"));
    for _ in 0..50 {
        srv.script(Behavior::Status(401, vec![], "key revoked".into()));
    }
    let mut agent = spawn(&sb, &srv);
    wait_for("the 401 logged", 30, || sb.log().contains("HTTP 401"));
    // The same credentials written again (a tool that rewrites the file) do not cut the
    // hour short. The agent says when it has seen the rewrite (within its longest sleep).
    sb.write_credentials(srv.base_url());
    wait_for("the rewrite noticed", 60, || {
        sb.log()
            .contains("credentials file was rewritten unchanged")
    });
    assert!(sb.log().contains("next try in 3600s"), "{}", sb.log());
    // New credentials do: the agent polls with them at once, no SIGHUP. Polls are made one
    // after another on one thread, so a retry caused by the rewrite would stand between the
    // first poll and this one.
    srv.script_clear();
    sb.write_credentials_with(srv.base_url(), "new-key-789");
    wait_for("a poll with the new credentials", 60, || {
        srv.polls()
            .iter()
            .any(|p| p.header("authorization") == Some("Secret new-key-789"))
    });
    let auth: Vec<_> = srv
        .polls()
        .iter()
        .map(|p| p.header("authorization").unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        auth[..2],
        ["Secret sandbox-secret-123", "Secret new-key-789"],
        "a 401 was retried:\n{}",
        sb.log()
    );
    terminate(&mut agent);
}

/// Issue 15 item 3: a poll answered `307 Location: http://...` was followed with the
/// Authorization secret and the body resent in plaintext. The agent follows no redirect of
/// its management requests: a 3xx is an answer (an error to retry later), and nothing
/// reaches the redirect's target.
fn a_redirected_poll_is_not_followed_and_the_secret_stays_home(front: Front) {
    let (sb, srv) = setup("https-redirect", front);
    // Where the redirect points: plain HTTP on loopback, recording whatever arrives.
    let plain = HttpsServer::start_plain();
    // Every poll is redirected: on a machine so busy that a request outlives the test's 3 s
    // request timeout (the whole request's deadline), a poll whose 307 was sent can still
    // end as a timeout; the next one is redirected too, so the 307 is read in the end.
    for _ in 0..20 {
        srv.script(Behavior::Status(
            307,
            vec![("Location".into(), plain.url("/api/v1/agent/poll"))],
            String::new(),
        ));
    }
    let mut agent = spawn(&sb, &srv);
    wait_for("the redirect answered", 60, || {
        srv.polls().iter().any(|p| p.status_sent == 307)
    });
    // The poll's error is logged when its request is over: a redirect followed would have
    // reached the plain server (and been answered) before that.
    wait_for("the redirect reported as the poll's answer", 180, || {
        sb.log().contains("HTTP 307")
    });
    terminate(&mut agent);
    assert_eq!(
        plain.connections(),
        0,
        "the agent followed the redirect to plain http: {:?}",
        plain.all_requests()
    );
    assert!(!sb.log().contains("sandbox-secret-123"));
}

fn spawn_with(sb: &Sandbox, srv: &HttpsServer, env: &[(&str, &str)]) -> std::process::Child {
    let mut all = vec![
        ("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap()),
        ("SVC_AGENT_HTTP_TIMEOUT_SECS", "3"),
    ];
    all.extend_from_slice(env);
    sb.spawn_agent(&all)
}

/// Issue 16 item 2: during the first-contact wait a 401 was polled every 5 s. The wait
/// follows the same rule as every other state: after a 401 the next poll is an hour away,
/// so the wait ends at once (nothing more can come before its deadline) and svc-server
/// starts; the app sees one poll.
fn first_contact_a_401_is_not_polled_again_before_the_hour(front: Front) {
    let (sb, srv) = setup("https-fc-401", front);
    srv.set_answer(answer("never"));
    for _ in 0..50 {
        srv.script(Behavior::Status(401, vec![], "key revoked".into()));
    }
    let mut agent = spawn_with(&sb, &srv, &[("SVC_AGENT_FIRST_CONTACT_SECS", "20")]);
    // The window: from the start to svc-server's start, which ends the first-contact wait
    // (at the latest after 20 s, when the old code had polled 4 or 5 times).
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    assert_eq!(srv.polls().len(), 1, "polled again:\n{}", sb.log());
    assert!(sb.log().contains("next try in 3600s"), "{}", sb.log());
    terminate(&mut agent);
}

/// Issue 16 item 2: a 429 during the first-contact wait was retried after 5 s whatever its
/// Retry-After said.
fn first_contact_honours_retry_after(front: Front) {
    let (sb, srv) = setup("https-fc-429", front);
    srv.set_answer(answer("later"));
    for _ in 0..50 {
        srv.script(Behavior::Status(
            429,
            vec![("Retry-After".into(), "40".into())],
            String::new(),
        ));
    }
    let mut agent = spawn_with(&sb, &srv, &[("SVC_AGENT_FIRST_CONTACT_SECS", "20")]);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    assert_eq!(srv.polls().len(), 1, "polled again:\n{}", sb.log());
    assert!(sb.log().contains("next try in 40s"), "{}", sb.log());
    terminate(&mut agent);
}

/// The ids of every record the app took, in arrival order.
fn shipped_ids(srv: &HttpsServer) -> Vec<u64> {
    srv.logs()
        .iter()
        .flat_map(|b| {
            let v: serde_json::Value = serde_json::from_str(b).unwrap();
            v["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_u64().unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// No record lost: the ids taken cover 1..=max without a gap (duplicates are allowed).
fn assert_no_gap(ids: &[u64]) {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let expected: Vec<u64> = (1..=*sorted.last().unwrap()).collect();
    assert_eq!(sorted, expected, "records were lost");
}

/// Issue 16 items 3 and 4: a 401 to log batches made a storm (refused line skipped, the
/// skip logged, that line refused ...: hundreds of POSTs a minute, each one record lost).
/// Shipping pauses instead, keeping the records; a rotated credentials file is noticed
/// without SIGHUP, and the uploader resumes at once with the new secret and loses nothing.
fn a_refused_log_batch_pauses_shipping_keeps_records_and_resumes_on_new_credentials(front: Front) {
    let (sb, srv) = setup("https-logs-401", front);
    srv.set_answer(answer("ok"));
    let mut agent = spawn(&sb, &srv);
    wait_for("a first log batch taken", 60, || {
        !shipped_ids(&srv).is_empty()
    });
    srv.set_behavior(LOGS, Behavior::Status(401, vec![], String::new()));
    // New lines to ship: a changed config logs them. Polls go on, one a second, without an
    // error (no reconnect nudges the uploader).
    let mut changed = answer("changed");
    changed["config"]["modules"].as_array_mut().unwrap().push(
        json!({"type": "local", "name": "tool2", "module_id": "lab:tool2",
                     "executable_path": "/bin/true"}),
    );
    srv.set_answer(changed);
    wait_for("a log batch refused", 60, || {
        srv.log_posts().iter().any(|p| p.status_sent == 401)
    });
    // The window: five more polls after the first refusal, at least 4 s by the agent's own
    // poll interval (the old code sent ~80 batches in 5 s; a refusal now pauses an hour).
    let polls = srv.polls().len();
    wait_for("five more polls", 60, || srv.polls().len() >= polls + 5);
    let refused = srv
        .log_posts()
        .iter()
        .filter(|p| p.status_sent == 401)
        .count();
    eprintln!("refused log batches over five polls: {refused}");
    assert!(
        refused <= 1,
        "{refused} refused batches over five polls: a storm"
    );
    assert!(
        !sb.log().contains("skipped"),
        "records were skipped:\n{}",
        sb.log()
    );
    // Rotation: a new secret, accepted; no SIGHUP.
    srv.set_behavior(LOGS, Behavior::Normal);
    sb.write_credentials_with(srv.base_url(), "rotated-secret-456");
    wait_for("a batch with the new secret taken", 60, || {
        srv.log_posts().iter().any(|p| {
            p.status_sent == 200 && p.header("authorization") == Some("Secret rotated-secret-456")
        })
    });
    wait_for("the poller on the new secret", 30, || {
        srv.polls()
            .iter()
            .any(|p| p.header("authorization") == Some("Secret rotated-secret-456"))
    });
    assert_no_gap(&shipped_ids(&srv));
    // Every line the refusal held back arrived (the config change's among them).
    let taken = srv.logs().join("\n");
    assert!(
        taken.contains("config applied: 0 components, 2 modules"),
        "{taken}"
    );
    assert!(!sb.log().contains("rotated-secret-456"));
    terminate(&mut agent);
}

/// The uploader's 5xx cell: a batch answered 503 stays queued and is retried by the
/// backoff; once the app takes batches again every record arrives, none skipped.
fn log_batches_answered_503_are_retried_and_nothing_is_lost(front: Front) {
    let (sb, srv) = setup("https-logs-503", front);
    srv.set_answer(answer("ok"));
    let mut agent = spawn(&sb, &srv);
    // Everything the start logged is taken first, so no batch is pending when the app
    // starts answering 503.
    wait_for("the start's lines taken", 60, || {
        srv.logs().iter().any(|b| b.contains("fake svc-server up"))
    });
    srv.set_behavior(LOGS, Behavior::Status(503, vec![], String::new()));
    // A changed config: its info line rides the next poll cycle (one a second here), so a
    // batch is due whatever the first one took. (A failed poll's warning is not: it waits
    // for a cycle, and a 404 stops polling for an hour.)
    let applied = |srv: &HttpsServer| {
        srv.logs()
            .iter()
            .map(|b| b.matches("config applied").count())
            .sum::<usize>()
    };
    let before = applied(&srv);
    srv.set_answer(answer("changed"));
    wait_for("a log batch answered 503", 60, || {
        srv.log_posts().iter().any(|p| p.status_sent == 503)
    });
    srv.set_behavior(LOGS, Behavior::Normal);
    wait_for("the held-back line taken", 60, || applied(&srv) > before);
    assert_no_gap(&shipped_ids(&srv));
    assert!(!sb.log().contains("skipped"), "{}", sb.log());
    terminate(&mut agent);
}

/// Issue 16 item 4: with no credentials at start, neither polls nor log shipping began
/// until a SIGHUP or a restart. A credentials file that appears is noticed by the loop, and
/// the lines queued meanwhile are shipped, the first one included.
fn credentials_that_arrive_after_start_start_polls_and_log_shipping(front: Front) {
    let sb = Sandbox::new(&format!("https-late-creds-{front:?}"));
    let srv = HttpsServer::start_behind(&sb.root.join("tls"), front);
    sb.install_fake_server();
    srv.set_answer(answer("late"));
    let mut agent = spawn(&sb, &srv);
    wait_for("the agent running without credentials", 60, || {
        sb.log().contains("running with the cached config only")
    });
    sb.write_credentials(srv.base_url());
    wait_for("a poll", 60, || !srv.polls().is_empty());
    wait_for("the first queued line shipped", 60, || {
        shipped_ids(&srv).contains(&1)
    });
    assert_no_gap(&shipped_ids(&srv));
    terminate(&mut agent);
}

both_fronts!(first_contact_conditional_polls_and_config_change);
both_fronts!(server_errors_back_off_and_recover);
both_fronts!(a_rejected_key_is_not_retried_in_a_loop);
both_fronts!(first_contact_a_401_is_not_polled_again_before_the_hour);
both_fronts!(first_contact_honours_retry_after);
both_fronts!(a_refused_log_batch_pauses_shipping_keeps_records_and_resumes_on_new_credentials);
both_fronts!(credentials_that_arrive_after_start_start_polls_and_log_shipping);
both_fronts!(a_redirected_poll_is_not_followed_and_the_secret_stays_home);
both_fronts!(log_batches_answered_503_are_retried_and_nothing_is_lost);
