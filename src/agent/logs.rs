//! The agent's end of log shipping: every log line goes into the persistent queue under
//! `/opt/svc/logqueue`, and a shipper thread sends it to the management app in batches
//! through the same transport as the polls.
use crate::logqueue::{LogQueue, QueueConfig, QueuedRecord};
use crate::logship::{self, LogTransport, ShipSignal, Shipper, ShipperConfig, TransportError};
use crate::paths::Paths;
use crate::protocol::{Retry, Transport};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Log batches over the management protocol (HTTPS or `file://`).
pub struct AppLogs(pub Box<dyn Transport>);

impl LogTransport for AppLogs {
    fn send_batch(&mut self, batch: &[QueuedRecord]) -> Result<(), TransportError> {
        let body = serde_json::to_vec(&logship::batch_json(batch)).unwrap_or_default();
        self.0.send_logs(&body).map_err(|e| match e.retry() {
            Retry::Permanent => TransportError::Rejected(e.to_string()),
            Retry::Backoff | Retry::After(_) => TransportError::Unavailable(e.to_string()),
        })
    }
}

/// The running pipeline; dropping it without `stop` leaves the queue on disk, intact.
pub struct LogPipeline {
    signal: Arc<ShipSignal>,
    thread: Option<JoinHandle<()>>,
}

impl LogPipeline {
    /// Opens the queue and attaches it to the logger; starts shipping when a transport is
    /// given (without one, lines wait on disk for credentials).
    pub fn start(paths: &Paths, transport: Option<Box<dyn Transport>>) -> Option<LogPipeline> {
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
        logship::attach(Arc::clone(&queue));
        let signal = ShipSignal::new();
        let thread = transport.and_then(|t| {
            let cfg = ShipperConfig {
                // An idle agent wakes rarely; a reconnect nudges the shipper at once.
                idle_interval: Duration::from_secs(10),
                maintain_interval: Duration::from_secs(2),
                ..ShipperConfig::default()
            };
            let shipper = Shipper::new(queue, AppLogs(t), cfg);
            let sig = Arc::clone(&signal);
            std::thread::Builder::new()
                .name("logship".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    if let Err(e) = shipper.run(sig) {
                        crate::error!("logs", "log shipping stopped: {e}");
                    }
                })
                .ok()
        });
        Some(LogPipeline { signal, thread })
    }

    /// The app is reachable again: ship what waited.
    pub fn nudge(&self) {
        self.signal.nudge();
    }

    /// Flushes the queue to disk and ends the shipper.
    pub fn stop(mut self) {
        self.signal.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
