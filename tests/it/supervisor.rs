//! Supervision with real processes: crash and backoff, crash loop, a child that ignores
//! SIGTERM, grandchildren, and output capture.
use crate::common::sandbox::{pid_alive as alive, wait_for};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svc::supervisor::{ChildEvent, ChildSpec, ChildState, Env, Policy, Supervisor};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("svc-sup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sh(name: &str, cwd: &std::path::Path, script: &str) -> ChildSpec {
    ChildSpec {
        name: name.into(),
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: cwd.to_path_buf(),
        env: Env::Exactly(vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("MARK".into(), "m1".into()),
        ]),
    }
}

fn fast_policy() -> Policy {
    Policy {
        first_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(400),
        stable_after: Duration::from_secs(60),
        crash_window: Duration::from_secs(60),
        crash_limit: 4,
    }
}

/// Ticks until `cond` holds or the generous bound passes.
fn drive(
    s: &mut Supervisor,
    secs: u64,
    mut cond: impl FnMut(&Supervisor, &[ChildEvent]) -> bool,
) -> Vec<ChildEvent> {
    let mut all = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        all.extend(s.tick(Instant::now()));
        if cond(s, &all) {
            return all;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("condition not reached; events: {all:?}");
}

#[test]
fn crashes_restart_with_growing_backoff_then_a_crash_loop_is_reported() {
    let d = dir("crash");
    let mut s =
        Supervisor::with_policy(sh("crasher", &d, "echo $$ >> pids; exit 3"), fast_policy());
    assert!(matches!(s.start(), ChildEvent::Started { .. }));
    let events = drive(&mut s, 30, |s, _| {
        matches!(s.state(), ChildState::CrashLoop { .. })
    });
    let exits: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, ChildEvent::Exited { .. }))
        .collect();
    assert_eq!(exits.len(), 4, "{events:?}");
    assert!(matches!(exits[0], ChildEvent::Exited { status, .. } if status == "exit code 3"));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, ChildEvent::CrashLoop { .. }))
            .count(),
        1
    );
    assert_eq!(
        std::fs::read_to_string(d.join("pids"))
            .unwrap()
            .lines()
            .count(),
        4
    );
    assert_eq!(s.restarts(), 3);
    // In a crash loop the next start waits the longest delay (max_delay): no spinning. The
    // supervisor reads no clock of its own, so the instants given to `tick` are the window.
    let before = s.restarts();
    let ChildState::CrashLoop { until } = s.state() else {
        panic!("not in a crash loop: {:?}", s.state());
    };
    let entered = until - fast_policy().max_delay;
    s.tick(entered + fast_policy().max_delay / 2);
    s.tick(until - Duration::from_millis(1));
    assert_eq!(
        s.restarts(),
        before,
        "restarted before the crash-loop delay"
    );
    s.tick(until);
    assert_eq!(
        s.restarts(),
        before + 1,
        "no restart at the crash-loop delay"
    );
    s.stop(Duration::from_secs(5));
}

#[test]
fn environment_and_working_directory_are_exactly_the_spec() {
    let d = dir("env");
    let mut s = Supervisor::new(sh(
        "envy",
        &d,
        // Written whole, then renamed: pwd.txt appears last, complete, after env.txt.
        "env | sort > env.tmp; pwd > pwd.tmp; mv env.tmp env.txt; mv pwd.tmp pwd.txt; sleep 30",
    ));
    s.start();
    wait_for("the child's pwd.txt", 20, || d.join("pwd.txt").exists());
    let env = std::fs::read_to_string(d.join("env.txt")).unwrap();
    assert!(env.contains("MARK=m1\n"), "{env}");
    assert!(
        !env.contains("HOME="),
        "the parent's environment leaked: {env}"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("pwd.txt")).unwrap().trim(),
        d.to_str().unwrap()
    );
    s.stop(Duration::from_secs(5));
    assert_eq!(s.state(), ChildState::Stopped);
}

#[test]
fn a_child_ignoring_sigterm_is_killed_after_the_bounded_wait() {
    let d = dir("stubborn");
    let mut s = Supervisor::new(sh(
        "stubborn",
        &d,
        "trap '' TERM; echo ready > ready; while :; do sleep 0.05; done",
    ));
    s.start();
    let pid = s.pid().unwrap() as i32;
    // `ready` is written after the trap is set: its existence is the state needed.
    wait_for("the child's ready file", 20, || d.join("ready").exists());
    let t = Instant::now();
    s.stop(Duration::from_millis(500));
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "stop returned before the bounded wait"
    );
    assert!(!alive(pid), "the TERM-ignoring child survived");
    assert_eq!(s.last_exit(), Some("signal 9"));
}

#[test]
fn grandchildren_are_gone_after_stop_even_when_they_ignore_sigterm() {
    let d = dir("family");
    // Each pid file is written whole and then renamed: its existence means its content.
    let script = "trap '' TERM; (trap '' TERM; echo $$ >/dev/null; sh -c 'echo $$ > g1.tmp; mv g1.tmp g1; trap \"\" TERM; while :; do sleep 0.05; done') & \
                  sh -c 'echo $$ > g2.tmp; mv g2.tmp g2; exec sleep 1000' & wait";
    let mut s = Supervisor::new(sh("family", &d, script));
    s.start();
    wait_for("the grandchildren's pid files g1 and g2", 20, || {
        d.join("g1").exists() && d.join("g2").exists()
    });
    let g: Vec<i32> = ["g1", "g2"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(d.join(f))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(g.iter().all(|p| alive(*p)));
    s.stop(Duration::from_millis(300));
    for p in g {
        assert!(!alive(p), "grandchild {p} survived the stop");
    }
}

#[test]
fn a_crashed_childs_grandchildren_do_not_linger() {
    let d = dir("orphans");
    let mut s = Supervisor::with_policy(
        sh(
            "orphaner",
            &d,
            // The child crashes only once its grandchild's pid is on disk (written whole).
            "sh -c 'echo $$ > g.tmp; mv g.tmp g; exec sleep 1000' & while [ ! -e g ]; do sleep 0.01; done; exit 1",
        ),
        fast_policy(),
    );
    s.start();
    drive(&mut s, 20, |_, ev| {
        ev.iter().any(|e| matches!(e, ChildEvent::Exited { .. }))
    });
    let g: i32 = std::fs::read_to_string(d.join("g"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    while alive(g) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(g), "the crashed child's grandchild {g} lingers");
    s.stop(Duration::from_secs(2));
}

#[test]
fn output_lines_reach_the_log_tagged_with_the_child() {
    let seen: Arc<Mutex<Vec<(String, String, svc::logging::Level)>>> = Arc::default();
    let sink = Arc::clone(&seen);
    svc::logging::set_sink(Box::new(move |r| {
        sink.lock()
            .unwrap()
            .push((r.subsystem.clone(), r.message.clone(), r.level));
    }));
    let d = dir("output");
    let mut s = Supervisor::new(sh(
        "talker",
        &d,
        "echo hello out; echo oops err >&2; printf 'no newline'; sleep 30",
    ));
    s.start();
    let end = Instant::now() + Duration::from_secs(20);
    let has = |m: &str| {
        seen.lock()
            .unwrap()
            .iter()
            .any(|(sub, msg, _)| sub == "talker" && msg == m)
    };
    while !(has("hello out") && has("oops err")) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    s.stop(Duration::from_secs(5));
    let got = seen.lock().unwrap().clone();
    assert!(
        got.iter()
            .any(|(s, m, l)| s == "talker" && m == "hello out" && *l == svc::logging::Level::Info),
        "{got:?}"
    );
    assert!(got
        .iter()
        .any(|(s, m, l)| s == "talker" && m == "oops err" && *l == svc::logging::Level::Warn));
    assert!(
        got.iter().any(|(_, m, _)| m == "no newline"),
        "a last line without newline was lost: {got:?}"
    );
}

#[test]
fn a_missing_program_is_a_spawn_failure_with_backoff() {
    let d = dir("missing");
    let mut spec = sh("ghost", &d, "");
    spec.program = d.join("no-such-program");
    let mut s = Supervisor::with_policy(spec, fast_policy());
    assert!(matches!(s.start(), ChildEvent::SpawnFailed(ref e) if e.contains("no-such-program")));
    assert!(matches!(s.state(), ChildState::Backoff { .. }));
}
