//! Rollback with real processes: svc-server probation (a new version that crashes is rolled
//! back by the probation rule) and the agent boot guard (a new agent that exits at once, or
//! hangs, gets three starts and is then rolled back; a healthy one ends its probation).
use crate::update_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use svc::paths::Paths;
use svc::update::rollback::{load_boot, AGENT_MAX_STARTS, AGENT_STABLE_LINK};
use svc::update::{
    agent_boot_guard, mark_agent_healthy, probation_verdict, Engine, GuardOutcome, ProbationPolicy,
    ProbationVerdict, VersionRecords,
};
use update_support::*;

fn install_from_file(paths: &Paths, name: &str, version: &str, behavior: &str) -> Vec<u8> {
    let body = fake_binary(name, version, behavior, 0);
    let src = paths.root().join(format!("src-{name}-{version}"));
    std::fs::write(&src, &body).unwrap();
    let a = artifact(name, version, &format!("file://{}", src.display()), &body);
    Engine::new(paths.clone(), test_opts()).install(&a).unwrap();
    body
}

/// Starts `bin/<name> run` the way systemd would and waits for it, killing it after
/// `limit` (systemd's start timeout / watchdog). Returns true when it exited 0.
fn start_once(paths: &Paths, name: &str, starts_file: &Path, limit: Duration) -> bool {
    let mut child = crate::common::spawn::spawn(
        Command::new(paths.bin_link(name))
            .arg("run")
            .env("SVC_FAKE_STARTS", starts_file),
    );
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.success();
        }
        if Instant::now() >= deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn starts_of(file: &Path, who: &str) -> usize {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == who)
        .count()
}

#[test]
fn svc_server_that_crashes_in_probation_is_rolled_back() {
    let paths = sandbox("probation");
    let old = install_from_file(&paths, "svc-server", "1.0.0", "ok");
    install_from_file(&paths, "svc-server", "2.0.0", "exit1");
    let activated = Instant::now();
    let policy = ProbationPolicy {
        window: Duration::from_secs(3600),
        max_crashes: 3,
    };
    let starts = paths.root().join("starts");
    let mut crashes = Vec::new();
    let mut verdict = ProbationVerdict::Watching;
    // The supervisor's view: run, record each crash, ask the rule.
    for _ in 0..10 {
        if !start_once(&paths, "svc-server", &starts, Duration::from_secs(30)) {
            crashes.push(Instant::now());
        }
        verdict = probation_verdict(activated, &crashes, Instant::now(), policy);
        if verdict != ProbationVerdict::Watching {
            break;
        }
    }
    assert_eq!(verdict, ProbationVerdict::RollBack);
    assert_eq!(crashes.len(), 3);
    assert_eq!(starts_of(&starts, "svc-server 2.0.0"), 3);
    svc::update::rollback(&paths, svc::update::Kind::Server).unwrap();
    assert_untouched(&paths, "svc-server", "1.0.0", &old, "no-such");
    let rec = VersionRecords::load(&paths).unwrap();
    assert_eq!(
        rec.get("svc-server").unwrap().bad,
        vec!["2.0.0".to_string()]
    );
    // The old version runs again.
    assert!(start_once(
        &paths,
        "svc-server",
        &starts,
        Duration::from_secs(30)
    ));
    assert_eq!(starts_of(&starts, "svc-server 1.0.0"), 1);
}

/// systemd's loop around the agent: guard (from the stable binary), then start.
fn agent_loop_until_rolled_back(
    paths: &Paths,
    starts: &Path,
    limit: Duration,
) -> Vec<GuardOutcome> {
    let mut outcomes = Vec::new();
    for _ in 0..10 {
        let g = agent_boot_guard(paths).unwrap();
        outcomes.push(g.clone());
        if matches!(g, GuardOutcome::RolledBack { .. }) {
            break;
        }
        start_once(paths, "svc-agent", starts, limit);
    }
    outcomes
}

fn check_agent_guard(behavior: &str, limit: Duration) {
    let paths = sandbox(&format!("guard-{behavior}"));
    let old = install_from_file(&paths, "svc-agent", "1.0.0", "ok");
    mark_agent_healthy(&paths, "1.0.0").unwrap();
    let stable = paths.bin_link(AGENT_STABLE_LINK);
    assert!(std::fs::read_link(&stable)
        .unwrap()
        .ends_with("svc-agent-1.0.0"));
    // Steady state: the guard does nothing.
    assert_eq!(agent_boot_guard(&paths).unwrap(), GuardOutcome::Stable);

    install_from_file(&paths, "svc-agent", "2.0.0", behavior);
    assert_eq!(load_boot(&paths).unwrap().starts, 0);
    let starts = paths.root().join("starts");
    let outcomes = agent_loop_until_rolled_back(&paths, &starts, limit);
    let expected: Vec<GuardOutcome> = (1..=AGENT_MAX_STARTS)
        .map(|n| GuardOutcome::Probation {
            version: "2.0.0".into(),
            start: n,
        })
        .chain([GuardOutcome::RolledBack {
            from: "2.0.0".into(),
            to: "1.0.0".into(),
        }])
        .collect();
    assert_eq!(outcomes, expected);
    // The new agent really ran exactly that many times, then never again.
    assert_eq!(
        starts_of(&starts, "svc-agent 2.0.0"),
        AGENT_MAX_STARTS as usize
    );
    assert_untouched(&paths, "svc-agent", "1.0.0", &old, "no-such");
    assert!(load_boot(&paths).is_none(), "boot record left");
    assert!(std::fs::read_link(&stable)
        .unwrap()
        .ends_with("svc-agent-1.0.0"));
    let rec = VersionRecords::load(&paths).unwrap();
    assert_eq!(rec.get("svc-agent").unwrap().bad, vec!["2.0.0".to_string()]);
    assert_eq!(agent_boot_guard(&paths).unwrap(), GuardOutcome::Stable);
    assert!(start_once(
        &paths,
        "svc-agent",
        &starts,
        Duration::from_secs(30)
    ));
    assert_eq!(starts_of(&starts, "svc-agent 1.0.0"), 1);
}

#[test]
fn agent_guard_rolls_back_an_agent_that_exits_at_once() {
    check_agent_guard("exit1", Duration::from_secs(30));
}

#[test]
fn agent_guard_rolls_back_an_agent_that_hangs() {
    // The hanging agent is killed after 300 ms here, as systemd's start timeout or watchdog
    // would; what matters is that the guard counts starts.
    check_agent_guard("hang", Duration::from_millis(300));
}

#[test]
fn a_healthy_agent_ends_its_probation() {
    let paths = sandbox("guard-healthy");
    install_from_file(&paths, "svc-agent", "1.0.0", "ok");
    mark_agent_healthy(&paths, "1.0.0").unwrap();
    install_from_file(&paths, "svc-agent", "2.0.0", "ok");
    let starts = paths.root().join("starts");
    assert_eq!(
        agent_boot_guard(&paths).unwrap(),
        GuardOutcome::Probation {
            version: "2.0.0".into(),
            start: 1
        }
    );
    assert!(start_once(
        &paths,
        "svc-agent",
        &starts,
        Duration::from_secs(30)
    ));
    // What the new agent does after its first good loop.
    mark_agent_healthy(&paths, "2.0.0").unwrap();
    assert!(load_boot(&paths).is_none());
    assert!(std::fs::read_link(paths.bin_link(AGENT_STABLE_LINK))
        .unwrap()
        .ends_with("svc-agent-2.0.0"));
    assert_eq!(agent_boot_guard(&paths).unwrap(), GuardOutcome::Stable);
    assert_eq!(active(&paths, "svc-agent").0, "2.0.0");
}

#[test]
fn a_first_install_with_nothing_to_fall_back_to_stops_counting() {
    let paths = sandbox("guard-first-install");
    install_from_file(&paths, "svc-agent", "1.0.0", "exit1");
    let starts = paths.root().join("starts");
    let outcomes = agent_loop_until_rolled_back(&paths, &starts, Duration::from_secs(30));
    // Three counted starts, then the guard gives up counting (no previous) and lets it run.
    assert_eq!(outcomes.len(), 10);
    assert_eq!(
        outcomes[AGENT_MAX_STARTS as usize..],
        vec![GuardOutcome::Stable; 10 - AGENT_MAX_STARTS as usize][..]
    );
    assert!(load_boot(&paths).is_none());
    assert_eq!(active(&paths, "svc-agent").0, "1.0.0");
}
