//! svc-agent's own process start: its C `main` (src/bin/svc-agent.rs) skips std's runtime
//! start for speed, and `svc::sys::process_start` keeps the part the agent needs. Each test
//! is the outside world doing what std's start used to guard against.
use crate::common::sandbox::{terminate, wait_for, Sandbox};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// An agent started with its stderr closed (an init script's `2>&-`): the first file it
/// opens, the instance lock, would take descriptor 2 and receive every log line after it.
#[test]
fn a_closed_stderr_does_not_send_log_lines_into_the_lock_file() {
    let sb = Sandbox::new("closed-stderr");
    sb.file_app();
    sb.install_fake_server();
    let root = sb.root.to_str().unwrap();
    let mut agent = Command::new("sh")
        .args(["-c", r#"exec "$0" run --root "$1" 2>&-"#])
        .args([env!("CARGO_BIN_EXE_svc-agent"), root])
        .env("SVC_AGENT_FAST_START", "1")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("svc-server's start", 60, || !sb.fake("pids").is_empty());
    // The first status comes after the start-up's log lines ("management app: ...").
    wait_for("the first status", 60, || !sb.status().is_null());
    // A stop logs more lines.
    assert!(terminate(&mut agent).success());
    let lock = std::fs::read_to_string(sb.root.join("opt/svc/agent.lock")).unwrap();
    assert_eq!(
        lock,
        format!("{:<10}\n", agent.id()),
        "the lock file holds the holder's pid and nothing else"
    );
}

/// Standard output a pipe whose reader is gone: the write fails (EPIPE) and the agent says
/// so; SIGPIPE (its default action) would end it without a word, and on the daemon's sockets
/// a peer's close would end the whole agent.
#[test]
fn a_write_to_a_closed_pipe_fails_instead_of_killing_the_agent() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_svc-agent"))
        .arg("help")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), None, "{:?}", out.status);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Broken pipe"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A command line that is not UTF-8 is an unknown command (usage error), not a panic.
#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error() {
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new(env!("CARGO_BIN_EXE_svc-agent"))
        .arg(std::ffi::OsStr::from_bytes(b"r\xffn"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown command \"r\u{fffd}n\""), "{err}");
}
