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

/// SIGTERM/SIGINT ask the loop to stop; SIGHUP to re-read local files; each of them and
/// SIGCHLD also wake the loop.
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
