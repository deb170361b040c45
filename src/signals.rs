//! Signals both daemons (svc-agent and svc-server) react to, and the wait of their loops:
//! a loop sleeps until its next deadline or until a signal arrives (SIGCHLD included, so a
//! child's exit is seen at once), and wakes for nothing else. An idle daemon costs no CPU
//! between deadlines. One set per process: signal-hook's flags and self-pipe.
use std::io::Read;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

struct Flags {
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    wake: OnceLock<UnixStream>,
    waker: OnceLock<UnixStream>,
}

fn flags() -> &'static Flags {
    static F: OnceLock<Flags> = OnceLock::new();
    F.get_or_init(|| Flags {
        stop: Arc::new(AtomicBool::new(false)),
        reload: Arc::new(AtomicBool::new(false)),
        wake: OnceLock::new(),
        waker: OnceLock::new(),
    })
}

/// Catches SIGTERM, SIGINT and SIGHUP from the start of svc-agent until `install` (which
/// takes in what came meanwhile): with fast start the handlers are installed only after
/// svc-server's start (BENCHMARKS.md, fast start, fifth pass: ~20 system calls, a socket
/// pair and signal-hook's allocations off its path), and a stop request in between must
/// neither end the agent by its default action, leaving svc-server behind, nor be lost. A
/// plain handler that notes the signal: 3 system calls. Nothing is blocked (svc-server
/// would inherit a blocked mask). SIGCHLD needs nothing: the loop's first tick looks at
/// svc-server before it first sleeps.
pub(crate) fn catch_early() -> std::io::Result<()> {
    crate::sys::catch_early(&EARLY)
}

/// The signals `catch_early` notes and `install` takes in.
const EARLY: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// Test hook: `SVC_TEST_SIGNAL_AT=<point>` makes the process send itself SIGTERM when it
/// reaches `point` (the tests use it for a stop request at a moment of the start-up).
/// Only in builds with the `test-hooks` feature (the tests); a no-op in every shipped build.
pub(crate) fn test_signal_point(point: &str) {
    if !cfg!(feature = "test-hooks") {
        return;
    }
    if std::env::var_os("SVC_TEST_SIGNAL_AT").is_some_and(|v| v == point) {
        crate::sys::kill(std::process::id() as i32, libc::SIGTERM);
    }
}

/// SIGTERM/SIGINT ask the loop to stop; SIGHUP to re-read local files; each of them and
/// SIGCHLD also wake the loop. A signal `catch_early` caught before counts as if it came now.
pub(crate) fn install() -> std::io::Result<()> {
    use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
    let f = flags();
    signal_hook::flag::register(SIGTERM, Arc::clone(&f.stop))?;
    signal_hook::flag::register(SIGINT, Arc::clone(&f.stop))?;
    signal_hook::flag::register(SIGHUP, Arc::clone(&f.reload))?;
    let (read, write) = UnixStream::pair()?;
    read.set_nonblocking(true)?;
    write.set_nonblocking(true)?;
    // One write end for all four, kept open for the process's life in `waker` (a set
    // `OnceLock` is never dropped), so the handlers may hold its raw fd: no dup per signal
    // (eight system calls before svc-server's start, BENCHMARKS.md, fast start).
    let write = f.waker.get_or_init(|| write);
    for sig in [SIGTERM, SIGINT, SIGHUP, SIGCHLD] {
        signal_hook::low_level::pipe::register_raw(sig, write.as_raw_fd())?;
    }
    let _ = f.wake.set(read);
    // Taken after the handlers are in place: a signal from now on reaches them; one before
    // was noted by `catch_early`'s handler (and one in between by both: the same request).
    let early = crate::sys::take_early(EARLY.iter().fold(0, |m, &sig| m | 1 << sig));
    if early & (1 << libc::SIGTERM | 1 << libc::SIGINT) != 0 {
        f.stop.store(true, Ordering::Relaxed);
    }
    if early & (1 << libc::SIGHUP) != 0 {
        f.reload.store(true, Ordering::Relaxed);
    }
    if early != 0 {
        wake();
    }
    Ok(())
}

pub(crate) fn stop_requested() -> bool {
    flags().stop.load(Ordering::Relaxed)
}

pub(crate) fn take_reload() -> bool {
    flags().reload.swap(false, Ordering::Relaxed)
}

/// A SIGHUP not yet taken (a loop checks before it sleeps).
pub(crate) fn reload_pending() -> bool {
    flags().reload.load(Ordering::Relaxed)
}

/// The stop flag itself, for work that polls it on another thread (svc-server's registry
/// downloads abandon when it is set).
pub(crate) fn stop_flag() -> Arc<AtomicBool> {
    Arc::clone(&flags().stop)
}

/// Sleeps up to `timeout`, returning early when a signal arrives.
pub(crate) fn wait(timeout: Duration) {
    let Some(read) = flags().wake.get() else {
        std::thread::sleep(timeout);
        return;
    };
    crate::sys::poll_readable(read.as_raw_fd(), timeout);
    let mut buf = [0u8; 64];
    while matches!((&*read).read(&mut buf), Ok(n) if n > 0) {}
}

/// Wakes the loop from another thread (a finished download).
pub(crate) fn wake() {
    use std::io::Write;
    if let Some(w) = flags().waker.get() {
        let _ = (&*w).write(&[1]);
    }
}
