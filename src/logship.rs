//! Ships queued log records to the management app, at least once and in order.
//!
//! The [`Shipper`] reads a bounded batch from the [`LogQueue`], hands it to a
//! [`LogTransport`] and acknowledges it only after the transport reports success; a crash in
//! between re-sends the batch, and the receiver drops duplicates by record id. While the
//! transport fails, retries back off exponentially with jitter; the first success drains the
//! backlog batch after batch without waiting. [`attach`] feeds every logged line into the queue.
//!
//! With a [`Backlog`] ([`attach_with`], [`Shipper::with_backlog`]) the shipper follows a
//! [`ShipPolicy`] (docs/logs.md, "What is sent, and when"): lines below its level are not
//! queued, urgent lines go within seconds, the rest wait for the next poll cycle, an age or
//! a size limit, and then everything waiting goes in one connection.
use crate::backoff::{Backoff, Jitter, PERMANENT_WAIT};
use crate::logging::{self, Level};
use crate::logqueue::{LogQueue, QueueError, QueuedRecord};
use std::cell::Cell;
use std::fmt;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Why a batch was not delivered.
#[derive(Debug)]
pub enum TransportError {
    /// Worth retrying later: no network, timeout, reset, 3xx, 5xx, 408, 429.
    Unavailable(String),
    /// The receiver refused the batch itself (400, 413, 422): retrying the same bytes will
    /// not help. The shipper halves the batch, then skips a lone refused record, each step
    /// paced by the backoff.
    Rejected(String),
    /// The receiver refuses this machine, not the batch (401/403: a revoked or rotated
    /// key; no credentials yet): retrying soon or skipping records cannot help. The shipper
    /// keeps every record and waits `refused_wait`, or for a nudge (new credentials).
    Refused(String),
    /// Local I/O error (file transport).
    Io(io::Error),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Unavailable(m) => write!(f, "log receiver unavailable: {m}"),
            TransportError::Rejected(m) => write!(f, "log batch rejected: {m}"),
            TransportError::Refused(m) => write!(f, "log upload refused: {m}"),
            TransportError::Io(e) => write!(f, "log transport I/O: {e}"),
        }
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TransportError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Delivers one batch. Must return `Ok` only once the batch is durably accepted.
pub trait LogTransport {
    fn send_batch(&mut self, batch: &[QueuedRecord]) -> Result<(), TransportError>;
}

/// The JSON body of a batch: `{"records":[{"id":..,"ts":..,"level":..,"subsystem":..,"message":..}]}`.
pub fn batch_json(batch: &[QueuedRecord]) -> serde_json::Value {
    serde_json::json!({ "records": batch.iter().map(QueuedRecord::to_json).collect::<Vec<_>>() })
}

/// Appends records as JSON lines (one record object per line) to `<dir>/logs.jsonl`, the log
/// file of a `file://` management directory: the same writer as the agent's `file://`
/// transport ([`crate::fsutil::append_lines`]: one write and `fdatasync` per batch, a torn
/// last line cut off first).
pub struct LogFileSink {
    path: PathBuf,
    buf: Vec<u8>,
}

impl LogFileSink {
    pub fn new(dir: &Path) -> LogFileSink {
        LogFileSink {
            path: dir.join("logs.jsonl"),
            buf: Vec::new(),
        }
    }
}

impl LogTransport for LogFileSink {
    fn send_batch(&mut self, batch: &[QueuedRecord]) -> Result<(), TransportError> {
        self.buf.clear();
        for rec in batch {
            serde_json::to_writer(&mut self.buf, &rec.to_json())
                .map_err(|e| TransportError::Io(io::Error::other(e)))?;
            self.buf.push(b'\n');
        }
        crate::fsutil::append_lines(&self.path, &self.buf).map_err(TransportError::Io)
    }
}

/// Tuning of a [`Shipper`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShipperConfig {
    pub max_batch_records: usize,
    /// Approximate bound of a batch's JSON size.
    pub max_batch_bytes: usize,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// How often an idle shipper looks for new records (a nudge wakes it earlier).
    pub idle_interval: Duration,
    /// While waiting (idle or backing off), how often the queue's flush/fsync policy runs, so
    /// that the last lines of a burst do not sit in the buffer for a whole backoff.
    pub maintain_interval: Duration,
    /// The pause after `TransportError::Refused` (a nudge ends it earlier).
    pub refused_wait: Duration,
}

/// What is shipped, and when (docs/logs.md). The agent's default is the spec's list: info
/// and above (svc-server stopped and started, the agent's status, warnings, errors), debug
/// never; errors within seconds, the rest with the next poll cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShipPolicy {
    /// Lines less severe than this are not queued (they still reach stderr and the journal).
    pub level: Level,
    /// Lines at least this severe make the backlog due at the next check (about 2 s).
    pub urgent_level: Level,
    /// The longest a line waits for a poll cycle; zero: every line goes at once.
    pub max_wait: Duration,
    /// The backlog is due once about this many bytes of JSON wait.
    pub max_bytes: usize,
}

impl Default for ShipPolicy {
    fn default() -> Self {
        ShipPolicy {
            level: Level::Info,
            urgent_level: Level::Error,
            max_wait: Duration::from_secs(1800),
            max_bytes: 64 * 1024,
        }
    }
}

/// The lines waiting to be shipped, as the sink saw them go in, and the policy that says
/// when they go. Shared by the sink ([`attach_with`]), the shipper and the agent (which
/// sets the policy from the config and reports poll cycles). Changed only while the
/// queue's lock is held (sink: append; shipper: the empty read), so a line appended as the
/// queue drains is never forgotten.
#[derive(Debug)]
pub struct Backlog {
    state: Mutex<BacklogState>,
}

#[derive(Debug, Clone, Copy)]
struct BacklogState {
    policy: ShipPolicy,
    /// When the oldest unshipped line went in; `None`: nothing waits.
    since: Option<Instant>,
    urgent: bool,
    bytes: usize,
    /// A poll cycle came while lines waited: they ride it.
    cycle: bool,
}

impl Backlog {
    pub fn new(policy: ShipPolicy) -> Arc<Backlog> {
        Arc::new(Backlog {
            state: Mutex::new(BacklogState {
                policy,
                since: None,
                urgent: false,
                bytes: 0,
                cycle: false,
            }),
        })
    }

    fn with<R>(&self, f: impl FnOnce(&mut BacklogState) -> R) -> Option<R> {
        self.state.lock().ok().map(|mut s| f(&mut s))
    }

    pub fn policy(&self) -> ShipPolicy {
        self.with(|s| s.policy).unwrap_or_default()
    }

    /// A new policy (a changed config) applies to the lines already waiting too.
    pub fn set_policy(&self, policy: ShipPolicy) {
        self.with(|s| s.policy = policy);
    }

    /// A poll cycle began: what waits goes now.
    pub fn poll_cycle(&self) {
        self.with(|s| s.cycle = s.since.is_some());
    }

    /// Lines are waiting from before this start (the queue was not empty on open).
    pub(crate) fn note_earlier(&self) {
        self.with(|s| s.since = s.since.or(Some(Instant::now())));
    }

    fn note(&self, level: Level, bytes: usize) {
        self.with(|s| {
            s.since = s.since.or(Some(Instant::now()));
            s.urgent |= level <= s.policy.urgent_level;
            s.bytes = s.bytes.saturating_add(bytes);
        });
    }

    fn clear(&self) {
        self.with(|s| {
            s.since = None;
            s.urgent = false;
            s.bytes = 0;
            s.cycle = false;
        });
    }

    /// Whether what waits should go now.
    pub fn due(&self, now: Instant) -> bool {
        self.with(|s| s.due(now)).unwrap_or(true)
    }
}

impl BacklogState {
    fn due(&self, now: Instant) -> bool {
        let Some(since) = self.since else {
            return false;
        };
        self.urgent
            || self.cycle
            || self.bytes >= self.policy.max_bytes
            || now.saturating_duration_since(since) >= self.policy.max_wait
    }
}

impl Default for ShipperConfig {
    fn default() -> Self {
        ShipperConfig {
            max_batch_records: 500,
            max_batch_bytes: 256 * 1024,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            idle_interval: Duration::from_secs(2),
            maintain_interval: Duration::from_secs(1),
            refused_wait: PERMANENT_WAIT,
        }
    }
}

/// What one [`Shipper::ship_once`] did.
#[derive(Debug)]
pub enum ShipOutcome {
    /// A batch was delivered and acknowledged.
    Sent { records: usize, last_id: u64 },
    /// Nothing to send.
    Empty,
    /// The receiver refused a lone record; it was acknowledged without delivery.
    Skipped { id: u64, reason: String },
    /// Not delivered; try again after `retry_in`.
    Failed {
        error: TransportError,
        retry_in: Duration,
    },
}

/// The queue failed under the shipper.
#[derive(Debug)]
pub enum ShipError {
    Queue(QueueError),
    /// A thread panicked while holding the queue.
    Poisoned,
}

impl fmt::Display for ShipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShipError::Queue(e) => write!(f, "{e}"),
            ShipError::Poisoned => write!(f, "log queue lock poisoned"),
        }
    }
}

impl std::error::Error for ShipError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ShipError::Queue(e) => Some(e),
            ShipError::Poisoned => None,
        }
    }
}

impl From<QueueError> for ShipError {
    fn from(e: QueueError) -> Self {
        ShipError::Queue(e)
    }
}

/// The uploader's wait after a failed batch, one pure rule: a refusal of the machine
/// pauses for `refused_wait` (nothing is skipped or halved: the records wait for the app to
/// take the machine back, or for new credentials, which nudge); everything else waits out
/// the backoff the poller uses.
pub(crate) fn retry_wait(
    error: &TransportError,
    backoff: &mut Backoff,
    jitter: &mut Jitter,
    refused_wait: Duration,
) -> Duration {
    match error {
        TransportError::Refused(_) => refused_wait,
        TransportError::Rejected(_) | TransportError::Unavailable(_) | TransportError::Io(_) => {
            backoff.next_delay(jitter)
        }
    }
}

/// Wakes or stops a running [`Shipper::run`] loop from another thread.
#[derive(Debug, Default)]
pub struct ShipSignal {
    state: Mutex<SignalState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct SignalState {
    stopped: bool,
    nudged: bool,
    /// A poll cycle began: wakes an idle shipper only, never one pausing after a failure.
    cycled: bool,
    /// How many waits the loop has begun: a waiting shipper has decided what to send now.
    waits: u64,
}

impl ShipSignal {
    pub fn new() -> Arc<ShipSignal> {
        Arc::new(ShipSignal::default())
    }

    /// Try now (e.g. the network came back): skips the current backoff wait.
    pub fn nudge(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.nudged = true;
            self.cv.notify_all();
        }
    }

    /// A poll cycle began: an idle shipper looks whether its backlog is due now. A shipper
    /// backing off or paused after a refusal is not woken (a poll a second must not make a
    /// refused uploader retry a second).
    pub fn poll_cycle(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.cycled = true;
            self.cv.notify_all();
        }
    }

    pub fn stop(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.stopped = true;
            self.cv.notify_all();
        }
    }

    /// How many waits the loop has begun. Once it has begun one after a batch, that batch's
    /// outcome is decided: a test reads "nothing more was sent" from this count, not a clock.
    pub fn waits(&self) -> u64 {
        self.state.lock().map(|s| s.waits).unwrap_or(0)
    }

    /// Waits up to `timeout` for a nudge or stop.
    fn wait(&self, timeout: Duration) -> Wake {
        self.wait_for(timeout, false)
    }

    /// Waits up to `timeout` for a nudge or stop, and with `cycles` for a poll cycle.
    fn wait_for(&self, timeout: Duration, cycles: bool) -> Wake {
        let Ok(mut guard) = self.state.lock() else {
            return Wake::Stop;
        };
        guard.waits += 1;
        let Ok((mut guard, _)) = self.cv.wait_timeout_while(guard, timeout, |s| {
            !(s.stopped || s.nudged || (cycles && s.cycled))
        }) else {
            return Wake::Stop;
        };
        if guard.stopped {
            Wake::Stop
        } else if std::mem::take(&mut guard.nudged) {
            Wake::Nudge
        } else {
            if cycles {
                guard.cycled = false;
            }
            Wake::Timeout
        }
    }

    fn stopped(&self) -> bool {
        self.state.lock().map(|s| s.stopped).unwrap_or(true)
    }
}

enum Wake {
    Stop,
    Nudge,
    Timeout,
}

/// Moves records from the queue to a transport.
pub struct Shipper<T: LogTransport> {
    queue: Arc<Mutex<LogQueue>>,
    transport: T,
    cfg: ShipperConfig,
    /// The one backoff rule of the agent (`backoff`), as the poller uses it.
    backoff: Backoff,
    jitter: Jitter,
    /// Shrinks while the receiver rejects batches, to isolate a refused record.
    batch_limit: usize,
    /// With a backlog, shipping waits until it is due; without, every line goes at once.
    backlog: Option<Arc<Backlog>>,
}

impl<T: LogTransport> Shipper<T> {
    pub fn new(queue: Arc<Mutex<LogQueue>>, transport: T, cfg: ShipperConfig) -> Shipper<T> {
        let backoff = Backoff::new(cfg.backoff_initial, cfg.backoff_max);
        let batch_limit = cfg.max_batch_records.max(1);
        Shipper {
            queue,
            transport,
            cfg,
            backoff,
            jitter: Jitter::from_entropy(),
            batch_limit,
            backlog: None,
        }
    }

    /// Ships by `backlog`'s policy (the one [`attach_with`] fills) instead of at once.
    pub fn with_backlog(mut self, backlog: Arc<Backlog>) -> Shipper<T> {
        self.backlog = Some(backlog);
        self
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    fn with_queue<R>(
        &self,
        f: impl FnOnce(&mut LogQueue) -> Result<R, QueueError>,
    ) -> Result<R, ShipError> {
        let mut q = self.queue.lock().map_err(|_| ShipError::Poisoned)?;
        Ok(f(&mut q)?)
    }

    /// Sends at most one batch. The queue lock is not held while the transport runs.
    pub fn ship_once(&mut self) -> Result<ShipOutcome, ShipError> {
        let (limit, max_bytes) = (self.batch_limit, self.cfg.max_batch_bytes);
        let backlog = self.backlog.as_deref();
        let batch = self.with_queue(|q| {
            q.take_drop_report()?;
            let batch = q.read_batch(limit, max_bytes)?;
            if batch.is_empty() {
                // Under the queue's lock: no line can go in between the read and this.
                if let Some(b) = backlog {
                    b.clear();
                }
            }
            Ok(batch)
        })?;
        let Some(last) = batch.last() else {
            self.with_queue(|q| q.maintain())?;
            return Ok(ShipOutcome::Empty);
        };
        let last_id = last.id;
        match self.transport.send_batch(&batch) {
            Ok(()) => {
                self.with_queue(|q| q.ack(last_id))?;
                self.backoff.reset();
                self.batch_limit = self.cfg.max_batch_records.max(1);
                Ok(ShipOutcome::Sent {
                    records: batch.len(),
                    last_id,
                })
            }
            Err(TransportError::Rejected(reason)) if batch.len() == 1 => {
                // A record the receiver will never take must not block all later ones.
                self.with_queue(|q| q.ack(last_id))?;
                self.batch_limit = self.cfg.max_batch_records.max(1);
                logging::log(
                    Level::Warn,
                    "logship",
                    &format!("log record {last_id} refused by the receiver, skipped: {reason}"),
                );
                Ok(ShipOutcome::Skipped {
                    id: last_id,
                    reason,
                })
            }
            Err(error) => {
                if matches!(error, TransportError::Rejected(_)) {
                    self.batch_limit = (batch.len() / 2).max(1);
                }
                let retry_in = retry_wait(
                    &error,
                    &mut self.backoff,
                    &mut self.jitter,
                    self.cfg.refused_wait,
                );
                Ok(ShipOutcome::Failed { error, retry_in })
            }
        }
    }

    /// The shipping loop, for a dedicated thread. Returns when `signal` is stopped; the queue
    /// is synced on the way out.
    pub fn run(mut self, signal: Arc<ShipSignal>) -> Result<(), ShipError> {
        let mut failures_reported = 0u32;
        let mut queue_failing = false;
        // With a backlog: idle until it is due (or a nudge), then drain the queue whole.
        let mut draining = self.backlog.is_none();
        let mut drained = 0usize;
        while !signal.stopped() {
            if !draining {
                draining = match &self.backlog {
                    None => true,
                    Some(b) => b.due(Instant::now()),
                };
            }
            if !draining {
                // A poll cycle wakes this wait (as a timeout does) to look at the backlog.
                match signal.wait_for(self.cfg.maintain_interval, true) {
                    Wake::Stop => break,
                    Wake::Nudge => draining = true,
                    // A failure here shows again in the next ship_once, which handles it.
                    Wake::Timeout => {
                        let _ = self.with_queue(|q| q.maintain());
                    }
                }
                continue;
            }
            let outcome = match self.ship_once() {
                Ok(o) => {
                    queue_failing = false;
                    o
                }
                Err(ShipError::Poisoned) => return Err(ShipError::Poisoned),
                Err(e) => {
                    // The queue's disk is full or failing: never give up, the space may
                    // come back (a batch delivered but not acknowledged is sent again).
                    if !queue_failing {
                        logging::log(
                            Level::Error,
                            "logship",
                            &format!("log queue: {e}; retrying with backoff"),
                        );
                        queue_failing = true;
                    }
                    let wait = self.backoff.next_delay(&mut self.jitter);
                    if let Wake::Stop = signal.wait(wait) {
                        break;
                    }
                    continue;
                }
            };
            let wait = match outcome {
                ShipOutcome::Sent { records, .. } => {
                    drained += records;
                    if failures_reported > 0 {
                        logging::log(Level::Info, "logship", "log receiver reachable again");
                        failures_reported = 0;
                    }
                    // Backlog: keep going without waiting.
                    continue;
                }
                // A skip is paced by the backoff like a failure: a receiver that refuses
                // every record (and the warn line each skip logs) must not be a storm.
                ShipOutcome::Skipped { .. } => self.backoff.next_delay(&mut self.jitter),
                ShipOutcome::Empty if self.backlog.is_some() => {
                    if drained > 0 {
                        // Below every default level: it reaches the journal, not the queue.
                        logging::log(
                            Level::Debug,
                            "logship",
                            &format!("backlog shipped: {drained} lines"),
                        );
                    }
                    (draining, drained) = (false, 0);
                    continue;
                }
                ShipOutcome::Empty => self.cfg.idle_interval,
                ShipOutcome::Failed { error, retry_in } => {
                    // One line per outage, not one per retry: each would itself be queued.
                    if failures_reported == 0 {
                        let then = match error {
                            TransportError::Refused(_) => format!(
                                "shipping paused, every line kept, for {}s or until new credentials",
                                retry_in.as_secs()
                            ),
                            _ => "retrying with backoff".into(),
                        };
                        logging::log(Level::Warn, "logship", &format!("{error}; {then}"));
                    }
                    failures_reported += 1;
                    retry_in
                }
            };
            let deadline = Instant::now() + wait;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match signal.wait(left.min(self.cfg.maintain_interval)) {
                    Wake::Stop => return self.with_queue(|q| q.sync()),
                    Wake::Nudge => break,
                    // A failure here shows again in the next ship_once, which handles it.
                    Wake::Timeout => {
                        let _ = self.with_queue(|q| q.maintain());
                    }
                }
            }
        }
        self.with_queue(|q| q.sync())
    }
}

thread_local! {
    static IN_SINK: Cell<bool> = const { Cell::new(false) };
}

/// Installs the queue as the logging sink: every logged (already scrubbed) line is appended.
pub fn attach(queue: Arc<Mutex<LogQueue>>) {
    attach_with(queue, None);
}

/// [`attach`], and with a backlog: only lines at or above its policy's level are appended,
/// and each is noted there for the shipper's policy.
pub fn attach_with(queue: Arc<Mutex<LogQueue>>, backlog: Option<Arc<Backlog>>) {
    logging::set_sink(Box::new(move |r| {
        if backlog.as_ref().is_some_and(|b| r.level > b.policy().level) {
            return;
        }
        // A line logged while appending (none today) must not re-enter and deadlock.
        if IN_SINK.with(|c| c.replace(true)) {
            return;
        }
        // A line that cannot be queued (a full disk) has still reached stderr and the journal.
        if let Ok(mut q) = queue.lock() {
            if q.append(r.level, &r.subsystem, &r.message).is_ok() {
                if let Some(b) = &backlog {
                    // About the record's JSON: its text and the members around it.
                    b.note(r.level, r.message.len() + r.subsystem.len() + 80);
                }
            }
        }
        IN_SINK.with(|c| c.set(false));
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_is_due_for_an_urgent_line_a_cycle_an_age_or_a_size() {
        let t0 = Instant::now();
        let policy = ShipPolicy::default();
        let b = Backlog::new(policy);
        assert!(!b.due(t0), "nothing waits");
        b.poll_cycle();
        b.note(Level::Info, 100);
        assert!(
            !b.due(t0 + Duration::from_secs(60)),
            "a cycle before the line"
        );
        assert!(b.due(t0 + policy.max_wait + Duration::from_secs(60)), "age");
        b.poll_cycle();
        assert!(b.due(t0), "a cycle with a line waiting");
        b.clear();
        b.note(Level::Warn, policy.max_bytes - 1);
        assert!(!b.due(t0), "a warning is not urgent by default");
        b.note(Level::Info, 1);
        assert!(b.due(t0), "size");
        b.clear();
        b.note(Level::Error, 10);
        assert!(b.due(t0), "an error");
        b.clear();
        b.set_policy(ShipPolicy {
            max_wait: Duration::ZERO,
            ..policy
        });
        b.note(Level::Info, 10);
        assert!(b.due(Instant::now()), "max_wait 0: at once");
    }

    #[test]
    fn batch_json_shape() {
        let rec = QueuedRecord {
            id: 42,
            ts_ms: 0,
            level: Level::Warn,
            subsystem: "agent".into(),
            message: "disk \"low\"".into(),
        };
        assert_eq!(
            batch_json(&[rec]).to_string(),
            r#"{"records":[{"id":42,"ts":"1970-01-01T00:00:00.000Z","level":"warn","subsystem":"agent","message":"disk \"low\""}]}"#
        );
    }
}
