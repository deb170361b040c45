//! Whether the daemon's loop is alive: what systemd's watchdog is fed on. The feeding is
//! `systemd::start_watchdog`'s thread, which no wait of the loop can hold; it pings while
//! [`alive`] says so, so a hung loop still gets the agent restarted.
//!
//! The loop is alive until its *due* time, which only the loop's own thread moves:
//! - [`beat`] on every pass of the loop, and [`progress`] from work that advances without
//!   waiting (a chunk of a file hashed or copied): alive for another `grace`;
//! - a bounded wait on the loop's thread (an HTTP request and its body, a backoff sleep, a
//!   child process, svc-server's stop) declares its bound with [`waiting`]: alive until the
//!   bound plus `grace`, and for `grace` again from when the wait ends.
//!
//! So a wait that keeps its deadline never starves the watchdog, and anything that does not
//! (a wait without a deadline, a loop that spins) stops the pings `grace` after its last
//! report. Off the loop's thread (update workers, the held poll, svc-server) every call here
//! is a no-op: their waits never make a hung loop look alive. Margins: docs/agent.md
//! "systemd".
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The due time (ms since [`epoch`]) and the grace of one loop; `due == 0`: not started.
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    due_ms: AtomicU64,
    grace_ms: AtomicU64,
}

impl Liveness {
    pub(crate) const fn new() -> Liveness {
        Liveness {
            due_ms: AtomicU64::new(0),
            grace_ms: AtomicU64::new(0),
        }
    }

    fn start(&self, now_ms: u64, grace: Duration) {
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX / 4);
        self.grace_ms.store(grace_ms, Ordering::SeqCst);
        self.due_ms
            .store(now_ms.saturating_add(grace_ms).max(1), Ordering::SeqCst);
    }

    fn started(&self) -> bool {
        self.due_ms.load(Ordering::SeqCst) != 0
    }

    /// Alive for another grace from `now_ms` (never shortens a wait in progress).
    fn progress(&self, now_ms: u64) {
        if self.started() {
            let g = self.grace_ms.load(Ordering::SeqCst);
            self.due_ms
                .fetch_max(now_ms.saturating_add(g), Ordering::SeqCst);
        }
    }

    /// A wait of at most `bound` begins at `now_ms`; returns the due time before it, which
    /// [`Liveness::end_wait`] restores (an outer wait still in progress keeps its bound).
    fn begin_wait(&self, now_ms: u64, bound: Duration) -> u64 {
        let before = self.due_ms.load(Ordering::SeqCst);
        if before != 0 {
            let g = self.grace_ms.load(Ordering::SeqCst);
            let b = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX / 4);
            self.due_ms
                .fetch_max(now_ms.saturating_add(b).saturating_add(g), Ordering::SeqCst);
        }
        before
    }

    /// The wait that began with due time `before` ended at `now_ms`: its bound no longer
    /// counts, the loop is alive for a grace from now.
    fn end_wait(&self, now_ms: u64, before: u64) {
        if before != 0 {
            let g = self.grace_ms.load(Ordering::SeqCst);
            self.due_ms
                .store(before.max(now_ms.saturating_add(g)), Ordering::SeqCst);
        }
    }

    /// Whether the loop is alive at `now_ms`; `None` when never started.
    fn alive(&self, now_ms: u64) -> Option<bool> {
        let due = self.due_ms.load(Ordering::SeqCst);
        (due != 0).then_some(now_ms <= due)
    }
}

static LOOP: Liveness = Liveness::new();

thread_local! {
    /// Set on the loop's thread by [`start`].
    static ON_LOOP: Cell<bool> = const { Cell::new(false) };
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX / 4)
}

fn on_loop() -> bool {
    ON_LOOP.with(Cell::get)
}

/// Makes the calling thread the loop whose liveness is watched, alive for `grace` from now.
pub(crate) fn start(grace: Duration) {
    ON_LOOP.with(|c| c.set(true));
    LOOP.start(now_ms(), grace);
}

/// A pass of the loop.
pub(crate) fn beat() {
    progress();
}

/// Work on the loop's thread advanced (a chunk hashed, copied or written).
pub(crate) fn progress() {
    if on_loop() {
        LOOP.progress(now_ms());
    }
}

/// Declares a wait of at most `bound` on the calling thread, until the returned guard is
/// dropped. Only the loop's thread counts; on any other it does nothing.
pub(crate) fn waiting(bound: Duration) -> Wait {
    let before = if on_loop() {
        Some(LOOP.begin_wait(now_ms(), bound))
    } else {
        None
    };
    Wait { before }
}

/// A bounded wait in progress (see [`waiting`]).
#[derive(Debug)]
#[must_use = "the wait counts only while the guard lives"]
pub(crate) struct Wait {
    before: Option<u64>,
}

impl Drop for Wait {
    fn drop(&mut self) {
        if let Some(before) = self.before {
            LOOP.end_wait(now_ms(), before);
        }
    }
}

/// Whether the loop is alive now; `None` before [`start`].
pub(crate) fn alive() -> Option<bool> {
    LOOP.alive(now_ms())
}

/// Test hook: while the file `SVC_TEST_HANG_IF` names exists, the loop stands still here, in
/// no bounded wait: a hung loop. Only in builds with the `test-hooks` feature (the tests).
pub(crate) fn test_hang_point() {
    if !cfg!(feature = "test-hooks") {
        return;
    }
    if let Some(p) = std::env::var_os("SVC_TEST_HANG_IF") {
        while std::path::Path::new(&p).exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Duration = Duration::from_secs(30);

    #[test]
    fn a_loop_that_stops_beating_is_dead_a_grace_later() {
        let l = Liveness::new();
        assert_eq!(l.alive(0), None, "not started: nothing to say");
        l.start(1_000, G);
        assert_eq!(l.alive(31_000), Some(true));
        assert_eq!(l.alive(31_001), Some(false));
        l.progress(20_000);
        assert_eq!(l.alive(50_000), Some(true));
        assert_eq!(l.alive(50_001), Some(false));
    }

    #[test]
    fn a_bounded_wait_keeps_the_loop_alive_until_its_bound_and_no_longer() {
        let l = Liveness::new();
        l.start(0, G);
        // A 300 s download request from t = 10 s: alive until its deadline plus a grace.
        let before = l.begin_wait(10_000, Duration::from_secs(300));
        assert_eq!(l.alive(340_000), Some(true));
        assert_eq!(
            l.alive(340_001),
            Some(false),
            "a wait past its bound is a hang"
        );
        // It ended at 12 s: the bound no longer counts, a grace from its end does.
        l.end_wait(12_000, before);
        assert_eq!(l.alive(42_000), Some(true));
        assert_eq!(l.alive(42_001), Some(false));
    }

    #[test]
    fn an_inner_wait_ending_keeps_the_outer_waits_bound() {
        let l = Liveness::new();
        l.start(0, G);
        let outer = l.begin_wait(0, Duration::from_secs(180));
        let inner = l.begin_wait(1_000, Duration::from_secs(30));
        l.end_wait(2_000, inner);
        assert_eq!(l.alive(210_000), Some(true));
        l.end_wait(3_000, outer);
        assert_eq!(l.alive(33_001), Some(false));
    }

    #[test]
    fn waits_off_the_loops_thread_count_for_nothing() {
        // This test's thread never called `start`: its calls change nothing global.
        let before = LOOP.due_ms.load(Ordering::SeqCst);
        {
            let _w = waiting(Duration::from_secs(3600));
            progress();
            beat();
        }
        assert_eq!(LOOP.due_ms.load(Ordering::SeqCst), before);
    }
}
