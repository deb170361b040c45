//! Exponential backoff with full jitter, the jittered poll interval, and the one retry rule
//! of the poller and the log uploader (`wait_after`), in every state of the agent.
use std::time::Duration;

/// How the loop reacts to an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Back off exponentially and try again.
    Backoff,
    /// The server named a delay (408/429/5xx with Retry-After): at least that long, and
    /// at least the backoff (`wait_after`).
    After(u64),
    /// Retrying the same request cannot help (401, 403, 404, ...): wait long, or for a change
    /// of credentials or a SIGHUP.
    Permanent,
}

/// How long a permanent error (a revoked key, a deleted part, a 4xx) silences requests of
/// its kind, unless the credentials change first.
pub(crate) const PERMANENT_WAIT: Duration = Duration::from_secs(3600);
/// The longest `Retry-After` honoured: a server cannot silence a machine for a day.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// The wait after a failed request of class `retry`: the same rule at first contact, in
/// steady state and in backoff. A `Retry-After` is a floor, never a shortcut past the
/// backoff, so a server that keeps answering `429, Retry-After: 0` still sees the requests
/// thin out to one every `cap`. Each call but `Permanent` counts one more failure.
pub(crate) fn wait_after(retry: Retry, backoff: &mut Backoff, jitter: &mut Jitter) -> Duration {
    match retry {
        Retry::Backoff => backoff.next_delay(jitter),
        Retry::After(secs) => {
            let asked = Duration::from_secs(secs).min(MAX_RETRY_AFTER);
            asked.max(backoff.next_delay(jitter))
        }
        Retry::Permanent => PERMANENT_WAIT,
    }
}

/// A small xorshift generator: jitter needs spread, not cryptographic quality, and this
/// keeps a dependency out.
#[derive(Debug, Clone)]
pub(crate) struct Jitter(u64);

impl Jitter {
    pub(crate) fn from_entropy() -> Jitter {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Jitter::seeded(t ^ (u64::from(std::process::id()) << 32))
    }
    pub(crate) fn seeded(seed: u64) -> Jitter {
        Jitter(seed.max(1))
    }
    /// A number in [0, 1).
    pub(crate) fn next_unit(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Delay before retry `n` (0-based): uniformly random in [base, min(cap, base * 2^n)].
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    pub base: Duration,
    pub cap: Duration,
    attempts: u32,
}

impl Backoff {
    pub(crate) fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff {
            base,
            cap,
            attempts: 0,
        }
    }
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }
    pub(crate) fn reset(&mut self) {
        self.attempts = 0;
    }
    /// The next delay; each call counts one more failure.
    pub(crate) fn next_delay(&mut self, jitter: &mut Jitter) -> Duration {
        let d = delay(self.base, self.cap, self.attempts, jitter.next_unit());
        self.attempts = self.attempts.saturating_add(1);
        d
    }
}

/// The rule itself, for callers that count failures their own way (downloads): the delay
/// before retry `n` (0-based) is `base + unit × (min(cap, base·2^n) − base)`, `unit` in
/// [0, 1) drawn from a [`Jitter`].
pub(crate) fn delay(base: Duration, cap: Duration, n: u32, unit: f64) -> Duration {
    let exp = base.saturating_mul(1u32 << n.min(20));
    let ceiling = exp.min(cap).max(base);
    base + ceiling.saturating_sub(base).mul_f64(unit.clamp(0.0, 1.0))
}

/// The poller's whole schedule, one pure function: after contact (`Ok(interval)`: a 2xx or
/// a 304) the backoff resets and the next poll comes after the interval ±10% (at least
/// 1 s); after an error, `wait_after` its class. The same in every state: first contact,
/// steady, backoff, after a permanent error.
pub(crate) fn next_poll(
    outcome: Result<Duration, Retry>,
    backoff: &mut Backoff,
    jitter: &mut Jitter,
) -> Duration {
    match outcome {
        Ok(interval) => {
            backoff.reset();
            jittered(
                interval.clamp(Duration::from_secs(1), MAX_POLL_INTERVAL),
                jitter,
            )
        }
        Err(retry) => wait_after(retry, backoff, jitter),
    }
}

/// The longest poll interval an answer may ask for (`poll_interval_secs` beyond it is cut to
/// it): a server's number must neither overflow the schedule's arithmetic nor silence a
/// machine for longer than a day.
pub(crate) const MAX_POLL_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// The poll interval with ±10% jitter, so that a fleet does not poll in lockstep.
pub(crate) fn jittered(interval: Duration, jitter: &mut Jitter) -> Duration {
    interval.mul_f64(0.9 + 0.2 * jitter.next_unit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_poll_interval_is_cut_to_a_day_not_a_panic() {
        let (mut b, mut j) = (
            Backoff::new(Duration::from_secs(1), Duration::from_secs(60)),
            Jitter::seeded(7),
        );
        for secs in [u64::MAX, u64::MAX / 2, 1 << 40, 86_400 * 365] {
            let d = next_poll(Ok(Duration::from_secs(secs)), &mut b, &mut j);
            assert!(d <= MAX_POLL_INTERVAL.mul_f64(1.1), "{secs}: {d:?}");
            let _ = std::time::Instant::now() + d;
        }
    }

    #[test]
    fn grows_to_the_cap_and_resets() {
        let mut j = Jitter::seeded(42);
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let mut max_seen = Duration::ZERO;
        for n in 0..12 {
            let d = b.next_delay(&mut j);
            let ceiling = Duration::from_secs(1 << n.min(6)).min(Duration::from_secs(60));
            assert!(
                d >= Duration::from_secs(1) && d <= ceiling,
                "attempt {n}: {d:?}"
            );
            max_seen = max_seen.max(d);
        }
        assert!(
            max_seen > Duration::from_secs(20),
            "jitter never reached high: {max_seen:?}"
        );
        b.reset();
        assert!(b.next_delay(&mut j) <= Duration::from_secs(1));
    }

    #[test]
    fn jitter_spreads_the_interval() {
        let mut j = Jitter::seeded(7);
        let v: Vec<Duration> = (0..200)
            .map(|_| jittered(Duration::from_secs(100), &mut j))
            .collect();
        assert!(v
            .iter()
            .all(|d| *d >= Duration::from_secs(90) && *d <= Duration::from_secs(110)));
        assert!(
            v.iter().any(|d| *d < Duration::from_secs(95))
                && v.iter().any(|d| *d > Duration::from_secs(105))
        );
    }
}
