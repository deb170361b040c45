//! Finding 8 of issue 40: a state or credentials directory that another user owns (or can
//! write) is never trusted. `svc-agent run` refuses to start (svc-server never runs from
//! it), `svc-agent check-dirs` (the data-partition drop-in's step before the first binary
//! of the state directory runs) fails, and `doctor` fails; each names the path, its owner
//! and its mode. Directories root owns with group/other write are fixed at start.
use crate::common;
use common::sandbox::*;
use serde_json::json;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A uid no account uses.
const STRANGER: u32 = 12345;

fn chown_tree(p: &Path, uid: u32) {
    chown(p, Some(uid), Some(uid)).unwrap();
    if p.is_dir() && !p.is_symlink() {
        for e in std::fs::read_dir(p).unwrap() {
            chown_tree(&e.unwrap().path(), uid);
        }
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn agent(args: &[&str], root: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_svc-agent"));
    c.args(args).args(["--root", root.to_str().unwrap()]);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn needs_root() -> bool {
    if unsafe_free_euid() == 0 {
        return true;
    }
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "this test needs root under CI (chown to another uid)"
    );
    eprintln!("skipped: needs root to chown to another uid");
    false
}

fn unsafe_free_euid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(u32::MAX)
}

fn sandbox_with_server(name: &str) -> Sandbox {
    let sb = Sandbox::new(name);
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"config": {"modules": [], "agent": {"svc-server": {"release_channel": "stable"}}}, "poll_interval_secs": 1}));
    sb
}

/// Runs the agent until it exits or svc-server starts (whichever first, bounded).
fn run_until_exit_or_server(sb: &Sandbox) -> Option<std::process::ExitStatus> {
    let mut child = sb.spawn_agent(&[]);
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if !sb.fake("pids").is_empty() || Instant::now() > end {
            terminate(&mut child);
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn svc_server_never_runs_from_a_state_directory_another_user_owns() {
    if !needs_root() {
        return;
    }
    let sb = sandbox_with_server("state-dir-stranger");
    let state = sb.root.join("opt/svc");
    chown_tree(&state, STRANGER);
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();

    let want = format!("{} is owned by uid {STRANGER}", state.display());
    // run: refuses to start; svc-server never runs from there.
    let st = run_until_exit_or_server(&sb);
    assert!(
        sb.fake("pids").is_empty(),
        "svc-server ran as root from a directory uid {STRANGER} owns:\n{}",
        sb.log()
    );
    let st = st.expect("the agent exited");
    assert_eq!(st.code(), Some(1), "{}", sb.log());
    assert!(sb.log().contains(&want), "{}", sb.log());
    // doctor: fails and names the directory, its owner and mode; changes nothing.
    let out = agent(&["doctor", "--json"], &sb.root, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "doctor must fail: {text}");
    assert!(text.contains(&want), "doctor must name the owner: {text}");
    assert_eq!(mode(&state), 0o755, "doctor changes nothing");

    // check-dirs (the data-partition drop-in's step): fails the same way.
    let out = agent(&["check-dirs"], &sb.root, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "check-dirs must fail: {err}");
    assert!(err.contains(&want) && err.contains("mode 0755"), "{err}");

    assert_eq!(
        std::fs::metadata(&state).unwrap().uid_of(),
        STRANGER,
        "not taken over either"
    );
}

#[test]
fn a_credentials_directory_or_a_parent_another_user_can_write_is_refused() {
    if !needs_root() {
        return;
    }
    // The credentials directory owned by another user.
    let sb = sandbox_with_server("creds-dir-stranger");
    let etc = sb.root.join("etc");
    chown(&etc, Some(STRANGER), None).unwrap();
    let st = run_until_exit_or_server(&sb);
    assert!(sb.fake("pids").is_empty(), "started:\n{}", sb.log());
    assert_eq!(st.and_then(|s| s.code()), Some(1), "{}", sb.log());
    let want = format!("{} is owned by uid {STRANGER}", etc.display());
    assert!(sb.log().contains(&want), "{}", sb.log());
    drop(sb);

    // A parent of the state directory that others may write (no sticky bit): they could
    // rename the directory away and put their own in its place.
    let sb = sandbox_with_server("state-parent-writable");
    let opt = sb.root.join("opt");
    std::fs::set_permissions(&opt, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = agent(&["check-dirs"], &sb.root, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{} ", opt.display())) && err.contains("mode 0777"),
        "{err}"
    );
    let st = run_until_exit_or_server(&sb);
    assert!(sb.fake("pids").is_empty(), "started:\n{}", sb.log());
    assert_eq!(st.and_then(|s| s.code()), Some(1), "{}", sb.log());
}

#[test]
fn the_agents_own_directories_get_their_mode_fixed_and_missing_ones_are_made_0700() {
    // Root owns it (the agent made it, or an old install did) but others may write it: the
    // agent removes group and other write and goes on.
    let sb = sandbox_with_server("state-dir-mode");
    let state = sb.root.join("opt/svc");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = agent(&["doctor", "--json"], &sb.root, &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(mode(&state), 0o777, "doctor changes nothing");
    let mut child = sb.spawn_agent(&[]);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    terminate(&mut child);
    assert_eq!(mode(&state), 0o755, "group and other write removed");
    assert!(
        sb.log().contains("group or others could write"),
        "{}",
        sb.log()
    );

    // A data partition's empty directories: made 0700 by check-dirs.
    let root = sb.root.join("dp");
    std::fs::create_dir_all(&root).unwrap();
    let env = [
        ("SVC_STATE_DIR", "/data/svc"),
        ("SVC_CREDENTIALS_DIR", "/data/etc"),
    ];
    let out = agent(&["check-dirs"], &root, &env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode(&root.join("data/svc")), 0o700);
    assert_eq!(mode(&root.join("data/etc")), 0o700);
}

trait UidOf {
    fn uid_of(&self) -> u32;
}
impl UidOf for std::fs::Metadata {
    fn uid_of(&self) -> u32 {
        std::os::unix::fs::MetadataExt::uid(self)
    }
}
