//! The daemon: `svc-agent run`. One thread drives everything through `Agent::tick`:
//! signals, svc-server supervision, polls of the management app, config and commands,
//! updates and log shipping. A held poll (the long poll) waits on a thread of its own and
//! hands its answer back through a channel; systemd's watchdog is fed by a thread of its own
//! while this loop reports (`watchdog`). Decisions live in
//! `policy`; effects sit in the modules this one calls.
pub(crate) mod cache;
pub(crate) mod logs;
mod medium;
pub(crate) mod os;
pub(crate) mod policy;
pub(crate) mod provisioning;
#[cfg(test)]
mod state_table;
pub(crate) mod status;
pub(crate) mod svc_server;
pub(crate) mod updater;
pub(crate) mod updates;

use crate::config::{Diagnostic, MachineConfig};
use crate::credentials::Credentials;
use crate::paths::Paths;
use crate::protocol::backoff::{next_poll, Backoff, Jitter};
use crate::protocol::{self, CommandKind, PollOutcome, Transport};
use crate::signals;
use crate::{debug, error, info, warn};
use serde_json::Value;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const DEFAULT_POLL: Duration = Duration::from_secs(60);
/// Without fast start: how long the agent waits for the network and one update check
/// before it starts svc-server from what it has (`SVC_AGENT_FIRST_CONTACT_SECS` overrides).
const FIRST_CONTACT_WAIT: Duration = Duration::from_secs(60);
/// The longest sleep of the loop; signals (SIGCHLD included) wake it earlier. It bounds
/// how late a new or changed credentials file is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(10);
/// How long the app may hold a poll (the long poll, docs/protocol.md); an app that does not
/// hold polls is polled every `poll_interval_secs` as before. `SVC_AGENT_POLL_HOLD_SECS`
/// overrides it (0: plain polls only). Chosen by the traffic budget (BENCHMARKS.md): one
/// resumed TLS connection per hold. A silently dropped connection is replaced at most this
/// plus the request deadline (30 s) after its poll was sent.
const DEFAULT_HOLD_SECS: u64 = 1500;

fn hold_secs() -> u64 {
    std::env::var("SVC_AGENT_POLL_HOLD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_HOLD_SECS)
}

/// What a held poll brings back to the loop: the transport copy's result.
type HeldResult = Result<(PollOutcome, bool), protocol::ProtocolError>;

/// A poll running on its own thread while the loop goes on.
struct HeldPoll {
    answer: std::sync::mpsc::Receiver<HeldResult>,
    /// The status it reported (uptimes zeroed): a change is reported by a plain poll at once.
    status: status::StatusReport,
    /// The same, kept as sent: acknowledged by the answer.
    sent: status::StatusReport,
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// SIGTERM/SIGINT: stop svc-server and exit 0.
    Stop,
    /// The app asked for an agent restart: stop svc-server, exit so systemd restarts us.
    Restart,
}

pub(crate) struct Agent {
    paths: Paths,
    transport: Option<Box<dyn Transport>>,
    /// The credentials in use (the log uploader gets them too), and the identity of the
    /// file they came from: a change is noticed by the loop without a SIGHUP.
    credentials: Option<Credentials>,
    credentials_stamp: Option<FileStamp>,
    /// Set when the credentials were re-read; the log uploader is handed the new ones.
    pub(crate) credentials_changed: bool,
    config: Option<MachineConfig>,
    config_errors: Vec<Diagnostic>,
    cached: cache::CachedAnswer,
    server: svc_server::ServerManager,
    jitter: Jitter,
    backoff: Backoff,
    next_poll: Instant,
    /// The poll in flight on its own thread, if any (HTTPS only).
    held: Option<HeldPoll>,
    hold_secs: u64,
    /// The app's last answer said it holds polls: the next poll is held.
    app_holds: bool,
    /// The status (uptimes zeroed) the app last answered: a held poll with the same status
    /// sends none (`X-Svc-Status: unchanged`), a third of an idle connection's bytes.
    reported: Option<status::StatusReport>,
    /// When a status change last cut a held poll short with a plain poll (at most one a
    /// `DEFAULT_POLL`).
    status_poll_at: Option<Instant>,
    last_error: Option<String>,
    started: Instant,
    started_unix: u64,
    fast_start: bool,
    restart_server_requested: bool,
    exit: Option<Exit>,
    host: status::HostInfo,
    last_status: Option<status::StatusReport>,
    /// Set when contact comes back after a failure; the log shipper is nudged.
    pub reconnected: bool,
    /// The subsystems' last reported states, for the status report.
    subsystems: serde_json::Map<String, Value>,
    /// The update engine; `None` leaves versions as they are.
    updater: Option<Box<dyn updates::Updater>>,
    /// The backend in use (`Backend::App` also when hawkBit is configured but unusable).
    backend: Backend,
    server_update: updates::Track,
    agent_update: updates::Track,
    /// The OS image's update (`osimage`).
    os: os::OsTrack,
    provisioning: provisioning::Runner,
    /// The credentials file as read by `new`, until `load_rest` takes it into use.
    pending: Option<LoadedCredentials>,
}

/// What identifies one version of a file without reading it: a rename over it changes the
/// inode, a rewrite in place the mtime or size. One `stat` per loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileStamp {
    fn of(path: &std::path::Path) -> Option<FileStamp> {
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

/// The credentials file as read: the credentials and the transport for their app address
/// (or why there are none), and the file's stamp, taken first (a change while reading is
/// seen at the next loop) by the same `stat` that makes a file others may read 0600.
struct LoadedCredentials {
    creds: Option<Credentials>,
    transport: Option<Box<dyn Transport>>,
    stamp: Option<FileStamp>,
    problem: Option<(bool, String)>,
}

impl LoadedCredentials {
    fn read(paths: &Paths) -> LoadedCredentials {
        let stamp =
            crate::credentials::tighten_mode(&paths.credentials()).map(|m| FileStamp::from(&m));
        let (creds, transport, problem) = match Credentials::load(paths) {
            Ok(creds) => match protocol::connect(&creds) {
                Ok(t) => (Some(creds), Some(t), None),
                Err(e) => (None, None, Some((true, e.to_string()))),
            },
            Err(e) => (None, None, Some((false, e.to_string()))),
        };
        LoadedCredentials {
            creds,
            transport,
            stamp,
            problem,
        }
    }

    /// Says what is used (logged when the credentials are taken into use, not on every read).
    fn log(&self) {
        match (&self.creds, &self.problem) {
            (Some(c), _) => info!("agent", "management app: {}", c.app_address),
            (None, Some((true, e))) => error!("agent", "{e}"),
            (None, Some((false, e))) => {
                warn!("agent", "{e}; running with the cached config only")
            }
            (None, None) => {}
        }
    }
}

/// The update engine for an app: relative artifact URLs are relative to its address, and
/// requests to it carry the machine's identity.
fn make_updater(paths: &Paths, creds: &Credentials) -> Box<dyn updates::Updater> {
    Box::new(
        updater::DaemonUpdater::new(paths.clone(), Some(creds.app_address.clone()))
            .with_identity(creds),
    )
}

/// Which backend the loop speaks, chosen from the cached config: hawkBit's DDI API when
/// the config has `agent.svc-agent.hawkbit` and its token file reads (docs/hawkbit.md);
/// otherwise the management app of the credentials, as without the section.
#[derive(Debug, Clone, PartialEq)]
enum Backend {
    App,
    Hawkbit(crate::config::model::HawkbitSettings),
}

fn backend_of(config: Option<&MachineConfig>) -> Backend {
    match config.and_then(|c| c.agent.agent.hawkbit.clone()) {
        Some(h) => Backend::Hawkbit(h),
        None => Backend::App,
    }
}

/// The hawkBit transport and the engine that downloads with its token (to the server's
/// origin only); `None` when the token file cannot be used (said in the log: the machine
/// then keeps its management app, if it has one, so it stays reachable).
fn hawkbit_backend(
    paths: &Paths,
    settings: &crate::config::model::HawkbitSettings,
) -> Option<(Box<dyn Transport>, Box<dyn updates::Updater>)> {
    match crate::hawkbit::HawkbitTransport::connect(paths, settings) {
        Ok(t) => {
            info!(
                "agent",
                "update server: Eclipse hawkBit at {} (tenant {}, controller {})",
                settings.server_url,
                settings.tenant,
                settings.controller_id
            );
            let updater = updater::DaemonUpdater::new(paths.clone(), Some(t.server_url()))
                .with_origin_identity(t.identity());
            Some((Box::new(t), Box::new(updater)))
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

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Agent {
    /// What svc-server's start needs, and no more (BENCHMARKS.md, fast start): the
    /// credentials (the app's address names svc-server's module registry) and the cached
    /// config (fast start's own switch and `disable_subsystem` live in it). The rest (the
    /// update engine, the backend the config names, the cached answer, the host's details,
    /// the log line naming the app) is `load_rest`'s, which runs right after svc-server's
    /// start with fast start and before everything else without. Nothing here needs the
    /// network.
    pub(crate) fn new(paths: Paths) -> Agent {
        let loaded = LoadedCredentials::read(&paths);
        let config = cache::load_config(&paths).map(|(cfg, _)| cfg);
        let fast_start = policy::fast_start(
            config
                .as_ref()
                .is_some_and(|c| c.agent.server.attributes.fast_start),
            std::env::var("SVC_AGENT_FAST_START").ok().as_deref(),
        );
        let server = svc_server::ServerManager::new(&paths)
            .with_app(loaded.creds.as_ref().map(|c| c.app_address.as_str()));
        Agent {
            paths,
            transport: None,
            credentials: None,
            credentials_stamp: loaded.stamp,
            credentials_changed: false,
            config,
            config_errors: Vec::new(),
            cached: cache::CachedAnswer::default(),
            server,
            jitter: Jitter::from_entropy(),
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(300)),
            next_poll: Instant::now(),
            held: None,
            hold_secs: hold_secs(),
            app_holds: false,
            reported: None,
            status_poll_at: None,
            last_error: None,
            started: Instant::now(),
            started_unix: unix_now(),
            fast_start,
            restart_server_requested: false,
            exit: None,
            host: status::HostInfo::default(),
            last_status: None,
            reconnected: false,
            subsystems: serde_json::Map::new(),
            updater: None,
            backend: Backend::App,
            server_update: updates::Track::default(),
            os: os::OsTrack::default(),
            agent_update: updates::Track::default(),
            provisioning: provisioning::Runner::default(),
            pending: Some(loaded),
        }
    }

    /// The rest of the start-up state (see `new`); once.
    pub(crate) fn load_rest(&mut self) {
        let Some(loaded) = self.pending.take() else {
            return;
        };
        loaded.log();
        self.updater = loaded.creds.as_ref().map(|c| make_updater(&self.paths, c));
        self.transport = loaded.transport;
        self.credentials = loaded.creds;
        self.cached = cache::load_answer(&self.paths);
        self.host = status::HostInfo::detect(&self.paths);
        self.choose_backend();
    }

    /// Switches to the backend the config names, when it is not the one in use: hawkBit
    /// (transport and engine with its token), or back to the management app of the
    /// credentials. The answer cache's ETag belongs to the old backend and is dropped.
    fn choose_backend(&mut self) {
        let wanted = backend_of(self.config.as_ref());
        if wanted == self.backend {
            return;
        }
        let chosen = match &wanted {
            Backend::Hawkbit(h) => hawkbit_backend(&self.paths, h),
            Backend::App => None,
        };
        let was_hawkbit = self.backend != Backend::App;
        match chosen {
            Some((transport, updater)) => {
                self.transport = Some(transport);
                self.updater = Some(updater);
                self.backend = wanted;
            }
            None if was_hawkbit || wanted == Backend::App => {
                let loaded = LoadedCredentials::read(&self.paths);
                loaded.log();
                self.updater = loaded.creds.as_ref().map(|c| make_updater(&self.paths, c));
                self.transport = loaded.transport;
                self.backend = Backend::App;
            }
            // hawkBit wanted but unusable, the app already in use: keep it.
            None => return,
        }
        self.held = None;
        self.app_holds = false;
        self.reported = None;
        // What the old backend offered is not the new one's to install.
        self.cached.etag = None;
        self.cached.targets = protocol::Targets::default();
        self.cached.hold = None;
        self.next_poll = Instant::now();
    }

    /// One step of both updates; restarts svc-server when a new version is active.
    fn step_updates(&mut self) {
        let Some(updater) = self.updater.as_deref_mut() else {
            return;
        };
        let Some(cfg) = self.config.as_ref() else {
            return;
        };
        let agent = &cfg.agent;
        let targets = &self.cached.targets;
        let clock = updates::Clock::read();
        updates::step_agent(
            &mut self.agent_update,
            updater,
            &agent.agent.version,
            targets.agent.as_ref(),
            self.cached.hold.is_some(),
            clock,
        );
        if agent.server.disable_subsystem {
            return;
        }
        let crashes = self.server.crashes();
        let step = updates::step_server(
            &mut self.server_update,
            updater,
            &agent.server.version,
            targets.server.as_ref(),
            agent.server.attributes.maintenance_window.as_ref(),
            self.server.busy(),
            self.cached.hold.is_some(),
            crashes,
            clock,
        );
        if step != updates::Step::Nothing {
            self.server.restart();
        }
    }

    fn server_managed(&self) -> bool {
        !self
            .config
            .as_ref()
            .is_some_and(|c| c.agent.server.disable_subsystem)
    }

    /// The start-up sequence of spec §3: with fast start, svc-server first; otherwise one
    /// bounded attempt at contact and updates first. `after_server` runs right after
    /// svc-server's start (`run`'s signal handlers and deferred housekeeping); its error
    /// ends the start-up there and is returned (svc-server is running: the caller stops it).
    pub(crate) fn start(
        &mut self,
        after_server: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        if self.fast_start {
            self.start_server();
            // Said after svc-server's start: on a device the line goes to journald's socket,
            // whose wake-up would otherwise come before svc-server's exec.
            self.log_starting();
            after_server()?;
            self.load_rest();
            self.apply_syscfg();
            self.apply_provisioning(false);
            return Ok(());
        }
        self.log_starting();
        self.load_rest();
        let wait = std::env::var("SVC_AGENT_FIRST_CONTACT_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_secs)
            .unwrap_or(FIRST_CONTACT_WAIT);
        let deadline = Instant::now() + wait;
        while self.transport.is_some() && self.exit.is_none() {
            if self.poll_once() {
                break;
            }
            let Some(wait) = policy::first_contact_wait(Instant::now(), self.next_poll, deadline)
            else {
                break;
            };
            signals::wait(wait);
            self.exit = signals::stop_requested()
                .then_some(Exit::Stop)
                .or(self.exit);
        }
        self.start_server();
        after_server()?;
        self.apply_syscfg();
        self.apply_provisioning(false);
        Ok(())
    }

    fn log_starting(&self) {
        info!(
            "agent",
            "svc-agent {} starting (pid {}, fast start {})",
            env!("SVC_VERSION"),
            std::process::id(),
            if self.fast_start { "on" } else { "off" }
        );
    }

    fn start_server(&mut self) {
        if self.server_managed() {
            self.server.start();
        } else {
            info!(
                "svc-server",
                "management of svc-server is disabled (disable_subsystem)"
            );
        }
    }

    /// One pass of the loop; returns when the agent should next wake.
    pub(crate) fn tick(&mut self) -> Duration {
        if signals::stop_requested() {
            self.exit = Some(Exit::Stop);
            return Duration::ZERO;
        }
        if signals::take_reload() {
            info!("agent", "SIGHUP: re-reading credentials and cached config");
            self.reload(true);
        } else if FileStamp::of(&self.paths.credentials()) != self.credentials_stamp {
            self.reload(false);
        }
        self.server.tick();
        self.take_held_answer();
        let due =
            self.transport.is_some() && self.held.is_none() && Instant::now() >= self.next_poll;
        if due && !self.start_held_poll() {
            self.poll_once();
        }
        self.report_status_change();
        self.step_updates();
        self.step_os();
        if self.restart_server_requested {
            self.restart_server_requested = false;
            if self.server_managed() {
                info!(
                    "svc-server",
                    "restarting svc-server as the management app asked"
                );
                self.server.restart();
            }
        }
        self.write_status();
        let now = Instant::now();
        let mut next = now + MAX_SLEEP;
        if self.transport.is_some() && self.held.is_none() {
            next = next.min(self.next_poll);
        }
        if let Some(t) = self.server.next_deadline() {
            next = next.min(t);
        }
        next.saturating_duration_since(now)
    }

    /// Re-reads credentials and the cached config and polls at once (a SIGHUP: `always`; a
    /// changed credentials file: only when the credentials differ, so a tool that rewrites
    /// the same file cannot cut a backoff or a 401's hour short). svc-server, provisioning,
    /// the update tracks and the subsystems' states are kept: only what comes from the two
    /// files changes.
    fn reload(&mut self, always: bool) {
        let loaded = LoadedCredentials::read(&self.paths);
        if !always && loaded.creds == self.credentials {
            self.credentials_stamp = loaded.stamp;
            debug!(
                "agent",
                "the credentials file was rewritten unchanged: nothing to do"
            );
            return;
        }
        if !always {
            info!("agent", "the credentials file changed: re-read");
        }
        loaded.log();
        let (app, transport, stamp) = (loaded.creds, loaded.transport, loaded.stamp);
        self.updater = app.as_ref().map(|c| make_updater(&self.paths, c));
        self.transport = transport;
        // A poll in flight with the old credentials ends on its own; its answer is dropped.
        self.held = None;
        self.app_holds = false;
        self.reported = None;
        self.credentials = app;
        self.credentials_stamp = stamp;
        if let Some((cfg, _)) = cache::load_config(&self.paths) {
            self.config = Some(cfg);
        }
        self.cached = cache::load_answer(&self.paths);
        self.backoff.reset();
        self.last_error = None;
        self.next_poll = Instant::now();
        self.credentials_changed = true;
        // The credentials' transport was just taken; hawkBit, if configured, replaces it.
        self.backend = Backend::App;
        self.choose_backend();
    }

    /// The credentials in use, if any.
    pub(crate) fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// The status report as compared for changes: without the uptimes and the time of the
    /// last contact (the app knows when it answered).
    fn status_without_uptimes(&self) -> status::StatusReport {
        let mut report = self.status();
        report.agent.uptime_secs = 0;
        report.svc_server.uptime_secs = None;
        report.last_contact = None;
        report
    }

    /// Starts a held poll on its own thread when the app said it holds polls and there is
    /// an answer (with its ETag) to hold against. False: poll the plain way.
    fn start_held_poll(&mut self) -> bool {
        if self.hold_secs == 0 || !self.app_holds || self.cached.etag.is_none() {
            return false;
        }
        let Some(mut t) = self.transport.as_ref().and_then(|t| t.detach()) else {
            return false;
        };
        let sent = self.status_without_uptimes();
        let status = (self.reported.as_ref() != Some(&sent))
            .then(|| serde_json::to_value(self.status()).unwrap_or(Value::Null));
        let etag = self.cached.etag.clone();
        let hold = self.hold_secs;
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("poll".into())
            .spawn(move || {
                let _ = tx.send(t.poll_held(status.as_ref(), etag.as_deref(), hold));
                signals::wake();
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

    /// Takes the answer of the held poll, when it has come.
    fn take_held_answer(&mut self) {
        let Some(h) = self.held.as_ref() else {
            return;
        };
        let result = match h.answer.try_recv() {
            Ok(r) => r,
            Err(std::sync::mpsc::TryRecvError::Empty) => return,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(
                protocol::ProtocolError::Network("the poll thread ended without an answer".into()),
            ),
        };
        if let Some(h) = self.held.take() {
            self.on_poll_result(result, h.sent);
        }
    }

    /// While a poll is held, a change of the status (svc-server stopped, a config error, a
    /// command done) is reported by a plain poll at once, at most one a `DEFAULT_POLL`.
    fn report_status_change(&mut self) {
        let Some(h) = self.held.as_ref() else {
            return;
        };
        if self
            .status_poll_at
            .is_some_and(|t| t.elapsed() < DEFAULT_POLL)
        {
            return;
        }
        let now = self.status_without_uptimes();
        if now == h.status {
            return;
        }
        self.status_poll_at = Some(Instant::now());
        if let Some(h) = self.held.as_mut() {
            h.status = now;
        }
        debug!(
            "agent",
            "the status changed during a held poll: reporting it"
        );
        self.poll_once();
    }

    /// Polls once; true on contact (an answer or 304).
    fn poll_once(&mut self) -> bool {
        let status = serde_json::to_value(self.status()).unwrap_or(Value::Null);
        let sent = self.status_without_uptimes();
        let Some(t) = self.transport.as_mut() else {
            return false;
        };
        let result = t.poll_held(Some(&status), self.cached.etag.as_deref(), 0);
        self.on_poll_result(result, sent)
    }

    /// What a poll's answer does, plain or held; true on contact. `sent`: the status it
    /// reported.
    fn on_poll_result(&mut self, result: HeldResult, sent: status::StatusReport) -> bool {
        match result {
            Ok((outcome, holds)) => {
                self.app_holds = holds && self.hold_secs > 0;
                self.reported = Some(sent);
                self.provisioning
                    .app_reachable
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                if self.last_error.take().is_some() {
                    info!("agent", "management app reachable again");
                    self.reconnected = true;
                }
                self.cached.last_contact = Some(unix_now());
                if let PollOutcome::Changed { answer, etag } = outcome {
                    self.apply_answer(*answer, etag);
                }
                // After a held poll the app has waited already: poll again at once (1 s,
                // the floor of `next_poll`), which is how a change reaches the machine in
                // seconds. An app that answers at once sets the pace by its interval.
                let interval = if self.app_holds {
                    Duration::ZERO
                } else {
                    self.cached
                        .poll_interval_secs
                        .map(Duration::from_secs)
                        .unwrap_or(DEFAULT_POLL)
                };
                self.next_poll =
                    Instant::now() + next_poll(Ok(interval), &mut self.backoff, &mut self.jitter);
                true
            }
            Err(e) => {
                self.provisioning
                    .app_reachable
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                let wait = next_poll(Err(e.retry()), &mut self.backoff, &mut self.jitter);
                let text = e.to_string();
                if self.last_error.as_deref() != Some(text.as_str()) || self.backoff.attempts() <= 1
                {
                    warn!(
                        "agent",
                        "poll failed: {text}; next try in {}s",
                        wait.as_secs()
                    );
                }
                self.last_error = Some(text);
                self.next_poll = Instant::now() + wait;
                false
            }
        }
    }

    fn apply_answer(&mut self, answer: protocol::PollAnswer, etag: Option<String>) {
        let config = match answer.medium_config {
            Some(offered) => self.config_from_medium(offered),
            None => answer.config,
        };
        if let Some(raw) = config {
            self.apply_config(raw);
        }
        self.cached.etag = etag;
        self.cached.targets = answer.targets;
        self.cached.hold = answer.hold;
        self.cached.poll_interval_secs = answer.poll_interval_secs;
        for c in &answer.commands {
            if self.cached.done_commands.contains(&c.id) {
                continue;
            }
            match c.kind {
                CommandKind::RestartSvcServer => self.restart_server_requested = true,
                CommandKind::RestartAgent => {
                    info!("agent", "restarting the agent as the management app asked");
                    self.exit = Some(Exit::Restart);
                }
                CommandKind::Unknown => {
                    warn!("agent", "ignoring command {} of an unknown kind", c.id)
                }
            }
            self.cached.done_commands.push(c.id.clone());
        }
        // Ids the app no longer sends are acknowledged; forget them.
        let live: Vec<&str> = answer.commands.iter().map(|c| c.id.as_str()).collect();
        self.cached
            .done_commands
            .retain(|id| live.contains(&id.as_str()));
        if let Err(e) = cache::save_answer(&self.paths, &self.cached) {
            warn!("agent", "cannot save the answer cache: {e}");
        }
    }

    /// The config a management directory offers, when this device may take it
    /// (`medium::accept`); a refusal is reported like a rejected config and the last good
    /// one stays.
    fn config_from_medium(&mut self, offered: protocol::MediumConfig) -> Option<Value> {
        let dir = self
            .credentials
            .as_ref()
            .and_then(|c| c.app_address.strip_prefix("file://"))
            .unwrap_or_default()
            .to_string();
        match medium::accept(&self.paths, std::path::Path::new(&dir), offered) {
            Ok(config) => config,
            Err(refusal) => {
                error!(
                    "config",
                    "config refused, keeping the last good one: {refusal}"
                );
                self.config_errors = vec![refusal];
                None
            }
        }
    }

    fn apply_config(&mut self, raw: Value) {
        match crate::config::parse_value(&raw) {
            Ok((cfg, report)) => {
                for w in &report.warnings {
                    warn!("config", "{w}");
                }
                if self.config.as_ref() == Some(&cfg) {
                    return;
                }
                if let Err(e) = cache::save_config(&self.paths, &raw) {
                    error!(
                        "config",
                        "cannot save the new config, keeping the old one: {e}"
                    );
                    return;
                }
                info!(
                    "config",
                    "config applied: {} components, {} modules",
                    cfg.components.len(),
                    cfg.modules.len()
                );
                let was_managed = self.server_managed();
                self.config = Some(cfg);
                self.config_errors.clear();
                self.choose_backend();
                self.apply_syscfg();
                // A config from a poll was fetched online: its networks may be applied.
                self.apply_provisioning(true);
                match (was_managed, self.server_managed()) {
                    (true, false) => {
                        info!(
                            "svc-server",
                            "svc-server management disabled by config: stopping it"
                        );
                        self.server.stop();
                    }
                    (false, true) => self.server.start(),
                    _ => self.server.reload(),
                }
            }
            Err(report) => {
                error!(
                    "config",
                    "config rejected, keeping the last good one: {} errors",
                    report.errors.len()
                );
                for e in &report.errors {
                    error!("config", "{e}");
                }
                self.config_errors = report.errors;
            }
        }
    }

    pub(crate) fn status(&self) -> status::StatusReport {
        status::StatusReport {
            agent: status::AgentStatus {
                version: env!("SVC_VERSION").into(),
                target: env!("SVC_TARGET").into(),
                pid: std::process::id(),
                uptime_secs: self.started.elapsed().as_secs(),
                started_at: self.started_unix,
                fast_start: self.fast_start,
            },
            svc_server: self.server.status(self.server_managed()),
            host: self.host.clone(),
            config_errors: self.config_errors.clone(),
            done_commands: self.cached.done_commands.clone(),
            last_contact: self.cached.last_contact,
            last_error: self.last_error.clone(),
            subsystems: self.subsystems_status(),
            // An unreadable record is set aside by its loader; the report then says nothing.
            versions: crate::update::VersionRecords::load(&self.paths).unwrap_or_default(),
            os: self.os.status(),
        }
    }

    /// The subsystems' states, and on the hawkBit backend its own: the server, and an
    /// action waiting for consent (what `svc-agent hawkbit confirm|decline` decides on).
    fn subsystems_status(&self) -> serde_json::Map<String, Value> {
        let mut all = self.subsystems.clone();
        if let Backend::Hawkbit(h) = &self.backend {
            let consent = crate::hawkbit::consent::load(&self.paths);
            let (state, reason) = match &consent {
                Some(c) if c.decision.is_none() => (
                    "waiting for consent",
                    Some(format!(
                        "action {} would install {}: svc-agent hawkbit confirm|decline --action {0}",
                        c.action,
                        c.targets
                            .iter()
                            .map(|(n, v)| format!("{n} {v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                ),
                _ => ("active", None),
            };
            all.insert(
                "hawkbit".into(),
                serde_json::json!({
                    "state": state,
                    "reason": reason,
                    "server_url": h.server_url,
                    "controller_id": h.controller_id,
                    "consent": consent,
                }),
            );
        }
        all
    }

    /// agent-syscfg: applies the config's system settings (or reverts them when disabled);
    /// idempotent, so it runs at start and on every config change.
    fn apply_syscfg(&mut self) {
        let section = self
            .config
            .as_ref()
            .map(|c| c.agent.syscfg.clone())
            .unwrap_or_default();
        let status = crate::syscfg::run(&section, &self.paths);
        self.subsystems.insert(
            "agent-syscfg".into(),
            serde_json::to_value(&status).unwrap_or(Value::Null),
        );
    }

    /// agent-provisioning: started, re-configured or stopped as the config says.
    fn apply_provisioning(&mut self, fetched_online: bool) {
        let section = self
            .config
            .as_ref()
            .map(|c| c.agent.provisioning.clone())
            .unwrap_or_default();
        let status = self
            .provisioning
            .apply(&self.paths, &section, fetched_online);
        self.subsystems.insert("agent-provisioning".into(), status);
    }

    /// Writes `/opt/svc/status.json` when something changed. The file holds start times,
    /// not uptimes (`svc-agent status` computes those), so an idle agent does not wear the
    /// SD card.
    fn write_status(&mut self) {
        let mut report = self.status();
        report.agent.uptime_secs = 0;
        report.svc_server.uptime_secs = None;
        if self.last_status.as_ref() == Some(&report) {
            return;
        }
        let text = serde_json::to_vec_pretty(&report).unwrap_or_default();
        if let Err(e) = crate::fsutil::atomic_write(&status::path(&self.paths), &text, 0o644) {
            debug!("agent", "cannot write the status file: {e}");
        }
        self.last_status = Some(report);
    }

    /// Stops svc-server (spec §3: the agent stopping stops it too).
    pub(crate) fn shutdown(&mut self) {
        info!("agent", "svc-agent stopping");
        self.provisioning.stop();
        self.server.stop();
        self.write_status();
    }

    pub(crate) fn exit(&self) -> Option<Exit> {
        self.exit
    }
}

/// Linux on amd64 or arm64 only (spec §1).
pub(crate) fn platform_supported() -> Result<(), String> {
    if cfg!(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )) {
        Ok(())
    } else {
        Err(format!(
            "svc-agent runs on Linux amd64 and arm64 only; this build is for {} {}",
            std::env::consts::OS,
            std::env::consts::ARCH
        ))
    }
}

/// What the start-up does after svc-server's start (with fast start) because nothing that
/// starts svc-server depends on it (BENCHMARKS.md, fast start): the holder's pid in the lock
/// file (only a second agent's error message reads it; the `flock` itself is taken first),
/// and the temps of writes a power cut or a kill interrupted (see
/// `fsutil::remove_stale_temps`: no reader takes a temp for its file, and a running
/// process's temps, svc-server's in its home included, are left alone), and the cache
/// cleanup of an activation a power cut interrupted. All come before the log queue opens.
fn housekeeping(paths: &Paths, lock: &mut crate::systemd::InstanceLock) {
    lock.record_holder();
    let state = paths.state_dir();
    let stale: usize = [state.clone(), state.join("logqueue"), state.join("home")]
        .iter()
        .map(|d| crate::fsutil::remove_stale_temps(d))
        .sum();
    if stale > 0 {
        crate::debug!("agent", "removed {stale} temp files of interrupted writes");
    }
    // An activation's cache cleanup that a power cut skipped (`update::clean_cache_at_start`).
    match crate::update::clean_cache_at_start(paths) {
        Ok(removed) if !removed.is_empty() => crate::info!(
            "update",
            "cache cleanup at start: removed {}",
            removed
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Ok(_) => {}
        Err(e) => crate::warn!("update", "cache cleanup at start: {e}"),
    }
}

pub(crate) fn run(paths: Paths) -> i32 {
    if let Err(e) = platform_supported() {
        error!("agent", "{e}");
        return 1;
    }
    // Nothing runs from, or is kept in, a state or credentials directory another user owns
    // or can write (issue 40): checked before the lock, which makes the state directory.
    if !crate::dirtrust::trusted_or_logged(&paths, "run") {
        return 1;
    }
    // The lock first (it makes the state directory when missing): only its holder may start
    // svc-server.
    let mut lock = match crate::systemd::InstanceLock::acquire(&paths) {
        Ok(l) => l,
        Err(e) => {
            error!("agent", "{e}");
            return 1;
        }
    };
    // Then a stop request is caught (noted) until the signal handlers are in place: with
    // fast start they come right after svc-server's start (their installation is ~20 system
    // calls and a socket pair, BENCHMARKS.md, fast start), and a SIGTERM meanwhile counts.
    if let Err(e) = signals::catch_early() {
        error!("agent", "cannot install signal handlers: {e}");
        return 1;
    }
    let cannot_install = |e: std::io::Error| format!("cannot install signal handlers: {e}");
    let mut agent = Agent::new(paths.clone());
    // With fast start, svc-server starts first; the signal handlers and the housekeeping come
    // right after its start, then the rest of the agent's state is read (`Agent::load_rest`)
    // and the log queue opens (opening a full queue takes tens of milliseconds); the lines
    // logged meanwhile wait in memory for it.
    let started = if agent.fast_start {
        agent
            .start(|| {
                signals::test_signal_point("svc-server-started");
                signals::install().map_err(cannot_install)?;
                housekeeping(&paths, &mut lock);
                Ok(())
            })
            .map(|()| logs::LogPipeline::start(&paths, agent.credentials().cloned()))
    } else {
        if let Err(e) = signals::install() {
            error!("agent", "{}", cannot_install(e));
            return 1;
        }
        agent.load_rest();
        housekeeping(&paths, &mut lock);
        let p = logs::LogPipeline::start(&paths, agent.credentials().cloned());
        agent.start(|| Ok(())).map(|()| p)
    };
    let pipeline = match started {
        Ok(p) => p,
        Err(e) => {
            error!("agent", "{e}");
            agent.shutdown();
            return 1;
        }
    };
    crate::systemd::notify("READY=1\nSTATUS=running");
    // The watchdog is fed by a thread of its own while this loop reports (a pass, or a
    // bounded wait inside one: `watchdog`), so a slow download or a slow answer never
    // starves it and a hung loop still gets the agent restarted.
    let beat_every = crate::systemd::start_watchdog();
    let mut healthy_marked = false;
    while agent.exit().is_none() {
        crate::watchdog::test_hang_point();
        crate::watchdog::beat();
        let wait = agent.tick();
        crate::watchdog::beat();
        if !healthy_marked {
            // The first loop went round: this binary works; end a self-update's probation
            // and make it the known-good one the boot guard runs from.
            healthy_marked = true;
            mark_healthy(&paths);
        }
        if std::mem::take(&mut agent.credentials_changed) {
            if let Some(p) = &pipeline {
                // Also nudges: shipping paused by a refusal resumes with the new secret.
                p.set_credentials(agent.credentials().cloned());
            }
        }
        if std::mem::take(&mut agent.reconnected) {
            if let Some(p) = &pipeline {
                p.nudge();
            }
        }
        if agent.exit().is_none() {
            signals::wait(beat_every.map_or(wait, |b| b.min(wait)));
        }
    }
    crate::systemd::notify("STOPPING=1\nSTATUS=stopping svc-server");
    agent.shutdown();
    if let Some(p) = pipeline {
        p.stop();
    }
    // Both a stop and a restart request exit cleanly: systemd's Restart=always brings the
    // agent back for a restart, and a stop by systemd does not restart it.
    0
}

/// The version of this running binary when it runs from the cache
/// (`cache/svc-agent-<version>`, the only place updates and `install` put it).
fn running_cached_version(paths: &Paths) -> Option<String> {
    let exe = std::fs::read_link("/proc/self/exe").ok()?;
    let cache = std::fs::canonicalize(paths.cache_dir()).ok()?;
    if exe.parent()? != cache {
        return None;
    }
    let v = exe.file_name()?.to_str()?.strip_prefix("svc-agent-")?;
    Some(v.to_string())
}

fn mark_healthy(paths: &Paths) {
    let Some(version) = running_cached_version(paths) else {
        return;
    };
    if let Err(e) = crate::update::mark_agent_healthy(paths, &version) {
        warn!("update", "cannot mark svc-agent {version} healthy: {e}");
    }
}
