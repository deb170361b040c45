//! The one way the agent runs a short-lived program (systemctl, tar, nmcli, apt, a new
//! binary's `version --json`, iw): argv, never a shell; stdin closed; its own process group,
//! killed whole when the deadline passes; stdout and stderr read on threads (a chatty child
//! never blocks on a full pipe) and capped, so a program can cost neither unbounded time
//! nor unbounded memory. Long-running children (svc-server, modules) are the supervisor's.
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Bytes kept of each of stdout and stderr; the rest is read and dropped.
pub(crate) const OUTPUT_CAP: usize = 64 * 1024;

/// How long the output of a finished program is waited for: a grandchild that left the
/// process group may hold the pipes open forever.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What a finished program did.
#[derive(Debug)]
pub(crate) struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    pub(crate) fn success(&self) -> bool {
        self.status.success()
    }

    /// stderr as trimmed text, for error messages.
    pub(crate) fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_string()
    }
}

#[derive(Debug)]
pub(crate) enum RunError {
    /// The program could not be started.
    Spawn(std::io::Error),
    /// It ran past its deadline and was killed with its process group.
    TimedOut(Duration),
    /// Waiting for it failed.
    Wait(std::io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "cannot start: {e}"),
            RunError::TimedOut(t) => write!(f, "did not finish within {}s; killed", t.as_secs()),
            RunError::Wait(e) => write!(f, "waiting for it failed: {e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// Runs `cmd` (its program, args, env and cwd as the caller set them) to completion or
/// until `timeout`. A text file busy error at start (a concurrent fork still held the new
/// file's write descriptor for an instant) is retried briefly.
pub(crate) fn run(mut cmd: Command, timeout: Duration) -> Result<Output, RunError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut tries = 0;
    let mut child = loop {
        match cmd.spawn() {
            Ok(c) => break c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 20 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(RunError::Spawn(e)),
        }
    };
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    // A bounded wait for systemd's watchdog (`watchdog`) when this is the daemon's loop.
    let _wait = crate::watchdog::waiting(timeout);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() >= deadline => {
                kill_group(child.id());
                let _ = child.wait();
                return Err(RunError::TimedOut(timeout));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                kill_group(child.id());
                let _ = child.wait();
                return Err(RunError::Wait(e));
            }
        }
    };
    Ok(Output {
        status,
        stdout: stdout.recv_timeout(DRAIN_GRACE).unwrap_or_default(),
        stderr: stderr.recv_timeout(DRAIN_GRACE).unwrap_or_default(),
    })
}

/// Reads a pipe to its end on a thread, keeping the first [`OUTPUT_CAP`] bytes.
fn drain(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    // Not started (no threads left): the sender is dropped with the closure, the receiver
    // sees it at once and the output reads as empty.
    let _ = crate::sys::thread("drain").spawn(move || {
        let mut kept = Vec::new();
        if let Some(mut p) = pipe {
            let mut buf = [0u8; 8192];
            loop {
                match p.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = OUTPUT_CAP.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                }
            }
        }
        let _ = tx.send(kept);
    });
    rx
}

/// Whether a process with this pid exists (signal 0 checks without sending anything).
pub(crate) fn alive(pid: i32) -> bool {
    pid > 0 && crate::sys::kill(pid, 0)
}

fn kill_group(pid: u32) {
    // The negative pid names the group the child leads (process_group(0) above).
    if let Ok(pid) = i32::try_from(pid) {
        crate::sys::kill(-pid, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn output_and_status_come_back() {
        let out = run(
            sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr_text(), "err");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn a_hanging_program_and_its_children_are_killed_at_the_deadline() {
        let dir = std::env::temp_dir().join(format!("svc-process-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pidfile = dir.join("grandchild");
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let err = run(sh(&script), Duration::from_millis(500)).unwrap_err();
        assert!(matches!(err, RunError::TimedOut(_)), "{err}");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild was in the group: it is gone (or a zombie of init, not running).
        let gone = (0..200).any(|_| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let done = stat.is_empty() || stat.contains(") Z ");
            if !done {
                std::thread::sleep(Duration::from_millis(10));
            }
            done
        });
        assert!(gone, "grandchild {pid} survived");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn output_is_capped_and_a_chatty_program_never_blocks() {
        let out = run(sh("head -c 1000000 /dev/zero"), Duration::from_secs(60)).unwrap();
        assert!(out.success());
        assert_eq!(out.stdout.len(), OUTPUT_CAP);
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let err = run(
            Command::new("/nonexistent/svc-test-program"),
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(matches!(err, RunError::Spawn(_)), "{err}");
    }
}
