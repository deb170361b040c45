//! The agent's end of log shipping: every log line at or above the policy's level goes into
//! the persistent queue under `/opt/svc/logqueue`, and a shipper thread sends it to the
//! management app in batches through the same transport as the polls: urgent lines within
//! seconds, the rest with the next poll cycle (`svc-agent.logs`, docs/logs.md).
use crate::config::LogSettings;
use crate::credentials::Credentials;
use crate::logging::Level;
use crate::logqueue::{LogQueue, QueueConfig, QueuedRecord};
use crate::logship::{
    self, Backlog, LogTransport, ShipPolicy, ShipSignal, Shipper, ShipperConfig, TransportError,
};
use crate::paths::Paths;
use crate::protocol::{self, ProtocolError, Retry, Transport};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The credentials the uploader should use, with a generation that counts changes.
type SharedCredentials = Arc<Mutex<(u64, Option<Credentials>)>>;

/// Log batches over the management protocol (HTTPS or `file://`). The transport is rebuilt
/// whenever the agent re-reads the credentials, so a rotated secret is used at once.
pub(crate) struct AppLogs {
    credentials: SharedCredentials,
    generation: Option<u64>,
    transport: Option<Box<dyn Transport>>,
}

impl AppLogs {
    #[cfg(test)]
    pub(crate) fn without_credentials() -> AppLogs {
        AppLogs {
            credentials: Arc::new(Mutex::new((0, None))),
            generation: None,
            transport: None,
        }
    }

    fn current(&mut self) -> Option<&mut Box<dyn Transport>> {
        let (generation, creds) = match self.credentials.lock() {
            Ok(c) => (c.0, c.1.clone()),
            Err(_) => return None,
        };
        if self.generation != Some(generation) {
            self.generation = Some(generation);
            self.transport = creds.and_then(|c| protocol::connect(&c).ok());
        }
        self.transport.as_mut()
    }
}

/// How the uploader treats a failed batch (docs/protocol.md, the state table).
pub(crate) fn classify(e: &ProtocolError) -> TransportError {
    match e {
        // The batch itself is at fault (malformed, too large, unprocessable): the shipper
        // halves it to isolate the record, paced by the backoff.
        ProtocolError::Http {
            status: 400 | 413 | 422,
            ..
        } => TransportError::Rejected(e.to_string()),
        // 401/403 (and any other 4xx: no such endpoint, gone...): the app refuses this
        // machine, not these records. Keep everything, wait long or for new credentials.
        _ => match e.retry() {
            Retry::Permanent => TransportError::Refused(e.to_string()),
            Retry::Backoff | Retry::After(_) => TransportError::Unavailable(e.to_string()),
        },
    }
}

impl LogTransport for AppLogs {
    fn send_batch(&mut self, batch: &[QueuedRecord]) -> Result<(), TransportError> {
        let Some(t) = self.current() else {
            return Err(TransportError::Refused(
                "no usable credentials: the lines wait on disk".into(),
            ));
        };
        let body = serde_json::to_vec(&logship::batch_json(batch)).unwrap_or_default();
        t.send_logs(&body).map_err(|e| classify(&e))
    }
}

/// The running pipeline; dropping it without `stop` leaves the queue on disk, intact.
pub(crate) struct LogPipeline {
    signal: Arc<ShipSignal>,
    thread: Option<JoinHandle<()>>,
    credentials: SharedCredentials,
    backlog: Arc<Backlog>,
}

/// The shipping policy a config's `svc-agent.logs` asks for (the default without one).
pub(crate) fn policy_of(settings: Option<&LogSettings>) -> ShipPolicy {
    let default = ShipPolicy::default();
    let Some(s) = settings else {
        return default;
    };
    ShipPolicy {
        level: Level::from_name(&s.level).unwrap_or(default.level),
        urgent_level: Level::from_name(&s.urgent_level).unwrap_or(default.urgent_level),
        max_wait: Duration::from_secs(s.max_wait_secs),
        ..default
    }
}

impl LogPipeline {
    /// Opens the queue and attaches it to the logger, and starts shipping. Without
    /// credentials the shipper waits (lines stay on disk) until `set_credentials`.
    pub(crate) fn start(paths: &Paths, credentials: Option<Credentials>) -> Option<LogPipeline> {
        let queue = match LogQueue::open(paths.state_dir().join("logqueue"), QueueConfig::default())
        {
            Ok(q) => Arc::new(Mutex::new(q)),
            Err(e) => {
                crate::error!(
                    "logs",
                    "cannot open the log queue, logs go to the journal only: {e}"
                );
                return None;
            }
        };
        let backlog = Backlog::new(ShipPolicy::default());
        if queue.lock().is_ok_and(|q| !q.is_empty()) {
            backlog.note_earlier();
        }
        logship::attach_with(Arc::clone(&queue), Some(Arc::clone(&backlog)));
        let signal = ShipSignal::new();
        let credentials = Arc::new(Mutex::new((0, credentials)));
        let cfg = ShipperConfig {
            // An idle agent wakes rarely; a reconnect nudges the shipper at once.
            idle_interval: Duration::from_secs(10),
            maintain_interval: Duration::from_secs(2),
            ..ShipperConfig::default()
        };
        let transport = AppLogs {
            credentials: Arc::clone(&credentials),
            generation: None,
            transport: None,
        };
        let shipper = Shipper::new(queue, transport, cfg).with_backlog(Arc::clone(&backlog));
        let sig = Arc::clone(&signal);
        let thread = crate::sys::thread("logship")
            .stack_size(256 * 1024)
            .spawn(move || {
                if let Err(e) = shipper.run(sig) {
                    crate::error!("logs", "log shipping stopped: {e}");
                }
            })
            .ok();
        Some(LogPipeline {
            signal,
            thread,
            credentials,
            backlog,
        })
    }

    /// New credentials (re-read after a SIGHUP or a changed file, or none): the next batch
    /// goes out with them, now.
    pub(crate) fn set_credentials(&self, credentials: Option<Credentials>) {
        if let Ok(mut c) = self.credentials.lock() {
            *c = (c.0 + 1, credentials);
        }
        self.signal.nudge();
    }

    /// The config's policy (`None`: no config yet, the default).
    pub(crate) fn set_policy(&self, settings: Option<&LogSettings>) {
        self.backlog.set_policy(policy_of(settings));
    }

    /// A poll was answered: the lines that wait ride this cycle.
    pub(crate) fn poll_cycle(&self) {
        self.backlog.poll_cycle();
        self.signal.poll_cycle();
    }

    /// The app is reachable again: ship what waited.
    pub(crate) fn nudge(&self) {
        self.signal.nudge();
    }

    /// Flushes the queue to disk and ends the shipper.
    pub(crate) fn stop(mut self) {
        self.signal.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
