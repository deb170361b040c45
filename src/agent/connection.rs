//! The daemon's connection to its backend: the credentials in use (and the stamp of their
//! file), the backend the config names, its transport and the update engine that downloads
//! with its identity, built in one place ([`Connection::connect`]); and the poll schedule
//! (backoff, jitter, the next poll, the last error) and the held poll running on its own
//! thread.
use super::status::StatusReport;
use super::updater::DaemonUpdater;
use super::updates::Updater;
use crate::backoff::{next_poll, Backoff, Jitter};
use crate::config::MachineConfig;
use crate::credentials::Credentials;
use crate::paths::Paths;
use crate::protocol::{self, PollOutcome, ProtocolError, Transport};
use crate::{debug, error, info, warn};
use serde_json::Value;
use std::time::{Duration, Instant};

/// What a poll brings back to the loop, plain or held: the answer and whether the app
/// holds polls.
pub(super) type PollResult = Result<(PollOutcome, bool), ProtocolError>;

/// What identifies one version of a file without reading it: a rename over it changes the
/// inode, a rewrite in place the mtime or size. One `stat` per loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileStamp {
    pub(super) fn of(path: &std::path::Path) -> Option<FileStamp> {
        std::fs::metadata(path).ok().map(|m| FileStamp::from(&m))
    }

    fn from(m: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }
}

/// The credentials file as read, and the file's stamp, taken first (a change while reading
/// is seen at the next loop) by the same `stat` that makes a file others may read 0600.
pub(super) struct LoadedCredentials {
    pub(super) creds: Option<Credentials>,
    pub(super) stamp: Option<FileStamp>,
    /// Why there are none.
    problem: Option<String>,
}

impl LoadedCredentials {
    pub(super) fn read(paths: &Paths) -> LoadedCredentials {
        let stamp =
            crate::credentials::tighten_mode(&paths.credentials()).map(|m| FileStamp::from(&m));
        let (creds, problem) = match Credentials::load(paths) {
            Ok(creds) => (Some(creds), None),
            Err(e) => (None, Some(e.to_string())),
        };
        LoadedCredentials {
            creds,
            stamp,
            problem,
        }
    }
}

/// Which backend the loop speaks, chosen from the cached config: hawkBit's DDI API when
/// the config has `agent.svc-agent.hawkbit` and its token file reads (docs/hawkbit.md);
/// otherwise the management app of the credentials, as without the section.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Backend {
    App,
    Hawkbit(crate::config::model::HawkbitSettings),
}

pub(super) fn backend_of(config: Option<&MachineConfig>) -> Backend {
    match config.and_then(|c| c.agent.agent.hawkbit.clone()) {
        Some(h) => Backend::Hawkbit(h),
        None => Backend::App,
    }
}

/// A poll running on its own thread while the loop goes on.
struct HeldPoll {
    answer: std::sync::mpsc::Receiver<PollResult>,
    /// The status it reported (uptimes zeroed): a change is reported by a plain poll at once.
    status: StatusReport,
    /// The same, kept as sent: acknowledged by the answer.
    sent: StatusReport,
}

pub(super) struct Connection {
    /// The credentials in use (the log uploader gets them too), and the identity of the
    /// file they came from: a change is noticed by the loop without a SIGHUP.
    credentials: Option<Credentials>,
    stamp: Option<FileStamp>,
    /// The backend in use (`Backend::App` also when hawkBit is configured but unusable).
    backend: Backend,
    transport: Option<Box<dyn Transport>>,
    /// The update engine; `None` leaves versions as they are.
    pub(super) updater: Option<Box<dyn Updater>>,
    /// hawkBit's server URL and token header while hawkBit is the backend: the OS engine's
    /// download origin and identity (`Agent::step_os`), as the binaries' engine has them.
    hawkbit_origin: Option<(String, crate::http::Identity)>,
    backoff: Backoff,
    jitter: Jitter,
    next_poll: Instant,
    pub(super) last_error: Option<String>,
    /// The poll in flight on its own thread, if any (HTTPS only).
    held: Option<HeldPoll>,
    hold_secs: u64,
    /// The app's last answer said it holds polls: the next poll is held.
    app_holds: bool,
    /// The status (uptimes zeroed) the app last answered: a held poll with the same status
    /// sends none (`X-Svc-Status: unchanged`), a third of an idle connection's bytes.
    reported: Option<StatusReport>,
    /// When a status change last cut a held poll short with a plain poll.
    status_poll_at: Option<Instant>,
}

impl Connection {
    /// Not connected yet: the credentials file's stamp only (`Agent::new`).
    pub(super) fn unconnected(stamp: Option<FileStamp>, hold_secs: u64) -> Connection {
        Connection {
            credentials: None,
            stamp,
            backend: Backend::App,
            transport: None,
            updater: None,
            hawkbit_origin: None,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(300)),
            jitter: Jitter::from_entropy(),
            next_poll: Instant::now(),
            last_error: None,
            held: None,
            hold_secs,
            app_holds: false,
            reported: None,
            status_poll_at: None,
        }
    }

    /// Takes `loaded` into use (said in the log): the management app of its credentials,
    /// then the backend `config` names if that is hawkBit. True when hawkBit was taken.
    pub(super) fn take_credentials(
        &mut self,
        paths: &Paths,
        loaded: LoadedCredentials,
        config: Option<&MachineConfig>,
    ) -> bool {
        let wanted = backend_of(config);
        if let (None, Some(e)) = (&loaded.creds, &loaded.problem) {
            if wanted == Backend::App {
                warn!("agent", "{e}; running with the cached config only");
            } else {
                // hawkBit only: no credentials are no fault to warn of.
                debug!("agent", "hawkBit only: the credentials file is not used");
            }
        }
        self.credentials = loaded.creds;
        self.stamp = loaded.stamp;
        self.backoff.reset();
        self.last_error = None;
        self.connect(paths, Backend::App);
        wanted != Backend::App && self.connect(paths, wanted)
    }

    /// The one place the transport and the update engine are built: hawkBit's (its
    /// transport, and the engine downloading with its token, to its origin only) when
    /// `wanted` names it and its token file reads, else the management app of the
    /// credentials (relative artifact URLs relative to its address, requests to it with the
    /// machine's identity). The poll state of the old transport goes (a poll in flight ends
    /// on its own; its answer is dropped). False when nothing changed: hawkBit wanted but
    /// unusable while the app is in use already.
    pub(super) fn connect(&mut self, paths: &Paths, wanted: Backend) -> bool {
        let hawkbit = match &wanted {
            Backend::Hawkbit(h) => hawkbit_backend(paths, h),
            Backend::App => None,
        };
        match hawkbit {
            Some((transport, updater, origin)) => {
                self.transport = Some(transport);
                self.updater = Some(updater);
                self.hawkbit_origin = Some(origin);
                self.backend = wanted;
            }
            // hawkBit wanted but unusable, the app already in use: keep it.
            None if wanted != Backend::App && self.backend == Backend::App => return false,
            None => {
                let app = self.credentials.as_ref().and_then(|c| {
                    info!("agent", "management app: {}", c.app_address);
                    match protocol::connect(c) {
                        Ok(t) => Some((t, app_updater(paths, c))),
                        Err(e) => {
                            error!("agent", "{e}");
                            None
                        }
                    }
                });
                (self.transport, self.updater) = app.unzip();
                self.hawkbit_origin = None;
                self.backend = Backend::App;
            }
        }
        self.held = None;
        self.app_holds = false;
        self.reported = None;
        self.next_poll = Instant::now();
        true
    }

    /// The byte budget for the transport's own downloads (hawkBit's `.swu` images).
    pub(super) fn set_budget(&mut self, budget: Option<crate::config::model::BudgetSettings>) {
        if let Some(t) = self.transport.as_mut() {
            t.set_budget(budget);
        }
    }

    pub(super) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// `url` as the transport in use resolves it (relative to the app's address); as it is
    /// while none is connected.
    pub(super) fn resolve_url(&self, url: &str) -> String {
        self.transport
            .as_ref()
            .map_or_else(|| url.to_string(), |t| t.resolve_url(url))
    }

    /// hawkBit's server URL and token header while hawkBit is the backend.
    pub(super) fn hawkbit_origin(&self) -> Option<&(String, crate::http::Identity)> {
        self.hawkbit_origin.as_ref()
    }

    pub(super) fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// Whether the credentials file changed since it was read (one `stat`).
    pub(super) fn file_changed(&self, paths: &Paths) -> bool {
        FileStamp::of(&paths.credentials()) != self.stamp
    }

    /// The file was rewritten with the same credentials: only its stamp is new.
    pub(super) fn restamp(&mut self, stamp: Option<FileStamp>) {
        self.stamp = stamp;
    }

    pub(super) fn connected(&self) -> bool {
        self.transport.is_some()
    }

    /// A plain poll is due: connected, no poll held, the time has come.
    pub(super) fn due(&self, now: Instant) -> bool {
        self.transport.is_some() && self.held.is_none() && now >= self.next_poll
    }

    /// When the loop must wake for the next poll, if it polls plainly.
    pub(super) fn next_poll(&self) -> Option<Instant> {
        (self.transport.is_some() && self.held.is_none()).then_some(self.next_poll)
    }

    /// Whether the next poll is held: the app said it holds polls and there is an answer
    /// (its ETag) to hold against.
    pub(super) fn holds(&self, etag: Option<&str>) -> bool {
        self.hold_secs > 0 && self.app_holds && etag.is_some()
    }

    /// A poll is held now.
    pub(super) fn holding(&self) -> bool {
        self.held.is_some()
    }

    /// Starts a held poll on its own thread (when it [`holds`](Self::holds)); `sent` is the
    /// status as compared (without uptimes), `status` the whole one. False: poll the plain
    /// way.
    pub(super) fn start_held(
        &mut self,
        etag: Option<&str>,
        sent: StatusReport,
        status: impl FnOnce() -> Value,
    ) -> bool {
        if !self.holds(etag) {
            return false;
        }
        let Some(mut t) = self.transport.as_ref().and_then(|t| t.detach()) else {
            return false;
        };
        let status = (self.reported.as_ref() != Some(&sent)).then(status);
        let etag = etag.map(str::to_string);
        let hold = self.hold_secs;
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = crate::sys::thread("poll").spawn(move || {
            let _ = tx.send(t.poll_held(status.as_ref(), etag.as_deref(), hold));
            crate::signals::wake();
        });
        if let Err(e) = spawned {
            warn!("agent", "cannot start a held poll ({e}); polling plainly");
            return false;
        }
        self.held = Some(HeldPoll {
            answer: rx,
            status: sent.clone(),
            sent,
        });
        true
    }

    /// The held poll's answer and the status it sent, when it has come.
    pub(super) fn take_held(&mut self) -> Option<(PollResult, StatusReport)> {
        let h = self.held.as_ref()?;
        let result = match h.answer.try_recv() {
            Ok(r) => r,
            Err(std::sync::mpsc::TryRecvError::Empty) => return None,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(ProtocolError::Network(
                "the poll thread ended without an answer".into(),
            )),
        };
        self.held.take().map(|h| (result, h.sent))
    }

    /// While a poll is held, whether `now` (the status without uptimes) is a change to
    /// report by a plain poll at once: at most one every `every`.
    pub(super) fn status_changed(&mut self, now: StatusReport, every: Duration) -> bool {
        let Some(h) = self.held.as_mut() else {
            return false;
        };
        if self.status_poll_at.is_some_and(|t| t.elapsed() < every) || now == h.status {
            return false;
        }
        self.status_poll_at = Some(Instant::now());
        h.status = now;
        true
    }

    /// A plain poll reporting `status`.
    pub(super) fn poll(&mut self, status: &Value, etag: Option<&str>) -> Option<PollResult> {
        let t = self.transport.as_mut()?;
        Some(t.poll_held(Some(status), etag, 0))
    }

    /// Contact: the app answered the status `sent`. True when it comes back after a failure.
    pub(super) fn contact(&mut self, holds: bool, sent: StatusReport) -> bool {
        self.app_holds = holds && self.hold_secs > 0;
        self.reported = Some(sent);
        self.last_error.take().is_some()
    }

    /// After contact: the next poll at `interval` (the app's, or the default), at once (1 s,
    /// the floor of `next_poll`) after a held poll, where the app has waited already, which
    /// is how a change reaches the machine in seconds.
    pub(super) fn schedule_after_contact(&mut self, interval: Duration) {
        let interval = if self.app_holds {
            Duration::ZERO
        } else {
            interval
        };
        self.next_poll =
            Instant::now() + next_poll(Ok(interval), &mut self.backoff, &mut self.jitter);
    }

    /// The next poll no later than `within` from now (the OS gate waits for the app); a
    /// sooner one stays.
    pub(super) fn poll_within(&mut self, within: Duration) {
        self.next_poll = self.next_poll.min(Instant::now() + within);
    }

    /// A failed poll: backoff, said in the log when the error is new.
    pub(super) fn failed(&mut self, e: &ProtocolError) {
        let wait = next_poll(Err(e.retry()), &mut self.backoff, &mut self.jitter);
        let text = e.to_string();
        if self.last_error.as_deref() != Some(text.as_str()) || self.backoff.attempts() <= 1 {
            warn!(
                "agent",
                "poll failed: {text}; next try in {}s",
                wait.as_secs()
            );
        }
        self.last_error = Some(text);
        self.next_poll = Instant::now() + wait;
    }
}

/// The update engine for an app: relative artifact URLs are relative to its address, and
/// requests to it carry the machine's identity.
fn app_updater(paths: &Paths, creds: &Credentials) -> Box<dyn Updater> {
    Box::new(
        DaemonUpdater::new(paths.clone(), Some(creds.app_address.clone())).with_identity(creds),
    )
}

/// hawkBit's transport, its engine, and its origin (server URL and token header).
type HawkbitBackend = (
    Box<dyn Transport>,
    Box<dyn Updater>,
    (String, crate::http::Identity),
);

/// The hawkBit transport and the engine that downloads with its token (to the server's
/// origin only); `None` when the token file cannot be used (said in the log: the machine
/// then keeps its management app, if it has one, so it stays reachable).
fn hawkbit_backend(
    paths: &Paths,
    settings: &crate::config::model::HawkbitSettings,
) -> Option<HawkbitBackend> {
    match crate::hawkbit::HawkbitTransport::connect(paths, settings) {
        Ok(t) => {
            info!(
                "agent",
                "update server: Eclipse hawkBit at {} (tenant {}, controller {})",
                settings.server_url,
                settings.tenant,
                settings.controller_id
            );
            let updater = DaemonUpdater::new(paths.clone(), Some(t.server_url()))
                .with_origin_identity(t.identity());
            let origin = (t.server_url(), t.identity());
            Some((Box::new(t), Box::new(updater), origin))
        }
        Err(e) => {
            error!(
                "agent",
                "the hawkBit backend is configured but cannot start: {e}; keeping the management app"
            );
            None
        }
    }
}
