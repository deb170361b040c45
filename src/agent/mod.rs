//! The daemon: `svc-agent run`. One thread drives everything through `Agent::tick`:
//! signals, svc-server supervision, polls of the management app, config and commands,
//! updates and log shipping. A held poll (the long poll) waits on a thread of its own and
//! hands its answer back through a channel; systemd's watchdog is fed by a thread of its own
//! while this loop reports (`watchdog`). Decisions live in `policy` and `updates`; effects
//! sit in the modules this one calls. By concern: `connection` (credentials, backend,
//! transport, update engine, poll schedule, held poll), `polls` (a poll's round and what its
//! answer does), `status` (the report, a view over one `Observed` per pass), `startup` (the
//! start-up's one ordered list, `run`), `tuning` (the environment, read once).
pub(crate) mod cache;
mod connection;
pub(crate) mod logs;
mod medium;
pub(crate) mod os;
pub(crate) mod policy;
mod polls;
pub(crate) mod provisioning;
mod startup;
#[cfg(test)]
mod state_table;
pub(crate) mod status;
pub(crate) mod svc_server;
#[cfg(test)]
mod tick_tests;
mod tuning;
pub(crate) mod updater;
pub(crate) mod updates;

pub(crate) use startup::{platform_supported, run};

use crate::config::{Diagnostic, MachineConfig};
use crate::credentials::Credentials;
use crate::paths::Paths;
use crate::{debug, info};
use connection::{backend_of, Backend, Connection, LoadedCredentials};
use serde_json::Value;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const DEFAULT_POLL: Duration = Duration::from_secs(60);
/// The longest sleep of the loop; signals (SIGCHLD included) wake it earlier. It bounds
/// how late a new or changed credentials file is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(10);

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// SIGTERM/SIGINT: stop svc-server and exit 0.
    Stop,
    /// The app asked for an agent restart: stop svc-server, exit so systemd restarts us.
    Restart,
}

/// What happened since the last pass that the log pipeline must hear of.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Events {
    /// The credentials were re-read: the log uploader is handed the new ones.
    pub credentials_changed: bool,
    /// Contact came back after a failure: the log shipper is nudged.
    pub reconnected: bool,
    /// A poll was answered: the log lines that wait ride this poll cycle.
    pub polled: bool,
}

/// The start, as the report shows it.
struct Started {
    at: Instant,
    unix: u64,
    fast_start: bool,
}

/// Both binaries' updates in progress.
#[derive(Default)]
struct Tracks {
    agent: updates::Track,
    server: updates::Track,
}

pub(crate) struct Agent {
    paths: Paths,
    tuning: tuning::Tuning,
    conn: Connection,
    config: Option<MachineConfig>,
    config_errors: Vec<Diagnostic>,
    cached: cache::CachedAnswer,
    server: svc_server::ServerManager,
    started: Started,
    restart_server_requested: bool,
    exit: Option<Exit>,
    host: status::HostInfo,
    /// The subsystems' last reported states, for the status report.
    subsystems: serde_json::Map<String, Value>,
    tracks: Tracks,
    /// The OS image's update (`osimage`).
    os: os::OsTrack,
    provisioning: provisioning::Runner,
    /// The credentials file as read by `new`, until `load_rest` takes it into use.
    pending: Option<LoadedCredentials>,
    /// This pass's reading of what the report shows from outside (`None`: to be read).
    observed: Option<status::Observed>,
    last_status: Option<status::StatusReport>,
    /// Gathered since the last pass; `tick` hands them over.
    events: Events,
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
    pub(crate) fn new(paths: Paths, tuning: tuning::Tuning) -> Agent {
        let loaded = LoadedCredentials::read(&paths);
        let config = cache::load_config(&paths).map(|(cfg, _)| cfg);
        let fast_start = policy::fast_start(
            config
                .as_ref()
                .is_some_and(|c| c.agent.server.attributes.fast_start),
            tuning.fast_start_env.as_deref(),
        );
        let server = svc_server::ServerManager::new(&paths)
            .with_app(loaded.creds.as_ref().map(|c| c.app_address.as_str()));
        Agent {
            conn: Connection::unconnected(loaded.stamp, tuning.hold_secs),
            paths,
            tuning,
            config,
            config_errors: Vec::new(),
            cached: cache::CachedAnswer::default(),
            server,
            started: Started {
                at: Instant::now(),
                unix: unix_now(),
                fast_start,
            },
            restart_server_requested: false,
            exit: None,
            host: status::HostInfo::default(),
            subsystems: serde_json::Map::new(),
            tracks: Tracks::default(),
            os: os::OsTrack::default(),
            provisioning: provisioning::Runner::default(),
            pending: Some(loaded),
            observed: None,
            last_status: None,
            events: Events::default(),
        }
    }

    /// The rest of the start-up state (see `new`); once.
    pub(crate) fn load_rest(&mut self) {
        let Some(loaded) = self.pending.take() else {
            return;
        };
        self.cached = cache::load_answer(&self.paths);
        self.host = status::HostInfo::detect(&self.paths);
        self.take_credentials(loaded);
    }

    /// Takes `loaded` into use (`Connection::take_credentials`).
    fn take_credentials(&mut self, loaded: LoadedCredentials) {
        if self
            .conn
            .take_credentials(&self.paths, loaded, self.config.as_ref())
        {
            self.forget_backend_answer();
        }
    }

    /// Switches to the backend the config names, when it is not the one in use: hawkBit
    /// (transport and engine with its token), or back to the management app of the
    /// credentials.
    fn choose_backend(&mut self) {
        let wanted = backend_of(self.config.as_ref());
        if &wanted != self.conn.backend() && self.conn.connect(&self.paths, wanted) {
            self.forget_backend_answer();
        }
    }

    /// What the old backend offered is not the new one's to install; its ETag is not the
    /// new one's either.
    fn forget_backend_answer(&mut self) {
        self.cached.etag = None;
        self.cached.targets = crate::protocol::Targets::default();
        self.cached.hold = None;
    }

    /// One step of both updates over this pass's state; restarts svc-server when a new
    /// version is active.
    fn step_updates(&mut self) {
        let Some(cfg) = self.config.as_ref() else {
            return;
        };
        if self.conn.updater.is_none() {
            return;
        }
        let managed = !cfg.agent.server.disable_subsystem;
        let (paths, server, backend) = (&self.paths, &self.server, self.conn.backend());
        let observed = self
            .observed
            .get_or_insert_with(|| observe(paths, server, managed, backend));
        let Some(updater) = self.conn.updater.as_deref_mut() else {
            return;
        };
        let agent = &cfg.agent;
        updater.set_delta_fallback(crate::update::DeltaFallback::from_setting(
            &agent.agent.updates.delta_fallback,
        ));
        updater.set_budget(budget_gate(paths, Some(cfg)));
        let targets = &self.cached.targets;
        let hold = self.cached.hold.is_some();
        let clock = updates::Clock::read();
        let changed = updates::step_agent(
            &mut self.tracks.agent,
            updater,
            &updates::Facts {
                vc: &agent.agent.version,
                offered: targets.agent.as_ref(),
                state: &observed.versions.agent,
                hold,
                clock,
            },
        );
        let step = if agent.server.disable_subsystem {
            updates::Step::Nothing
        } else {
            let facts = updates::ServerFacts {
                facts: updates::Facts {
                    vc: &agent.server.version,
                    offered: targets.server.as_ref(),
                    state: &observed.versions.server,
                    hold,
                    clock,
                },
                window: agent.server.attributes.maintenance_window.as_ref(),
                busy: self.server.busy(),
                crashes: self.server.crashes(),
                probation: self.tuning.probation,
            };
            updates::step_server(&mut self.tracks.server, updater, &facts)
        };
        if step != updates::Step::Nothing {
            self.server.restart();
        }
        if changed || step != updates::Step::Nothing {
            self.observed = None;
        }
    }

    fn server_managed(&self) -> bool {
        !self
            .config
            .as_ref()
            .is_some_and(|c| c.agent.server.disable_subsystem)
    }

    fn log_starting(&self) {
        info!(
            "agent",
            "svc-agent {} starting (pid {}, fast start {})",
            env!("SVC_VERSION"),
            std::process::id(),
            if self.started.fast_start { "on" } else { "off" }
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
        self.observed = None;
    }

    /// One pass of the loop; returns when the agent should next wake, and what happened
    /// since the last pass that the log pipeline must hear of.
    pub(crate) fn tick(&mut self) -> (Duration, Events) {
        if crate::signals::stop_requested() {
            self.exit = Some(Exit::Stop);
            return (Duration::ZERO, std::mem::take(&mut self.events));
        }
        if crate::signals::take_reload() {
            info!("agent", "SIGHUP: re-reading credentials and cached config");
            self.reload(true);
        } else if self.conn.file_changed(&self.paths) {
            self.reload(false);
        }
        self.server.tick();
        // What the report shows from outside is read once a pass (`observe`).
        self.observed = None;
        self.take_held_answer();
        if self.conn.due(Instant::now()) && !self.start_held_poll() {
            self.poll_once();
        }
        self.report_status_change();
        // This pass's HTTP bytes (its poll, its status report) into the budget's count.
        crate::update::budget::account(
            budget_gate(&self.paths, self.config.as_ref()).as_ref(),
            &crate::update::budget::SystemClock,
        );
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
                self.observed = None;
            }
        }
        self.write_status();
        let now = Instant::now();
        let mut next = now + MAX_SLEEP;
        if let Some(t) = self.conn.next_poll() {
            next = next.min(t);
        }
        if let Some(t) = self.server.next_deadline() {
            next = next.min(t);
        }
        (
            next.saturating_duration_since(now),
            std::mem::take(&mut self.events),
        )
    }

    /// Re-reads credentials and the cached config and polls at once (a SIGHUP: `always`; a
    /// changed credentials file: only when the credentials differ, so a tool that rewrites
    /// the same file cannot cut a backoff or a 401's hour short). svc-server, provisioning,
    /// the update tracks and the subsystems' states are kept: only what comes from the two
    /// files changes.
    fn reload(&mut self, always: bool) {
        let loaded = LoadedCredentials::read(&self.paths);
        if !always && loaded.creds.as_ref() == self.conn.credentials() {
            self.conn.restamp(loaded.stamp);
            debug!(
                "agent",
                "the credentials file was rewritten unchanged: nothing to do"
            );
            return;
        }
        if !always {
            info!("agent", "the credentials file changed: re-read");
        }
        if let Some((cfg, _)) = cache::load_config(&self.paths) {
            self.config = Some(cfg);
        }
        self.cached = cache::load_answer(&self.paths);
        self.take_credentials(loaded);
        self.events.credentials_changed = true;
    }

    /// The credentials in use, if any.
    pub(crate) fn credentials(&self) -> Option<&Credentials> {
        self.conn.credentials()
    }

    /// The status report: a view over this pass's `Observed`, read when first needed.
    fn status(&mut self) -> status::StatusReport {
        let managed = self.server_managed();
        let (paths, server, backend) = (&self.paths, &self.server, self.conn.backend());
        let observed = self
            .observed
            .get_or_insert_with(|| observe(paths, server, managed, backend));
        let mut subsystems = self.subsystems.clone();
        if let Some(p) = subsystems.get_mut("agent-provisioning") {
            self.provisioning.live(p);
        }
        if let Backend::Hawkbit(h) = backend {
            subsystems.insert(
                "hawkbit".into(),
                status::hawkbit_entry(h, observed.consent.as_ref()),
            );
        }
        let mut server_status = observed.server.clone();
        server_status.uptime_secs = self.server.uptime_secs();
        status::StatusReport {
            agent: status::AgentStatus {
                version: env!("SVC_VERSION").into(),
                target: env!("SVC_TARGET").into(),
                pid: std::process::id(),
                uptime_secs: self.started.at.elapsed().as_secs(),
                started_at: self.started.unix,
                fast_start: self.started.fast_start,
            },
            svc_server: server_status,
            host: self.host.clone(),
            config_errors: self.config_errors.clone(),
            done_commands: self.cached.done_commands.clone(),
            last_contact: self.cached.last_contact,
            last_error: self.conn.last_error.clone(),
            subsystems,
            versions: observed.versions.records.clone(),
            os: self.os.status(),
            budget: crate::update::budget::status(
                budget_gate(paths, self.config.as_ref()).as_ref(),
            ),
        }
    }

    /// The status report as compared for changes: without the uptimes and the time of the
    /// last contact (the app knows when it answered).
    fn status_without_uptimes(&mut self) -> status::StatusReport {
        let mut report = self.status();
        report.agent.uptime_secs = 0;
        report.svc_server.uptime_secs = None;
        report.last_contact = None;
        report
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
        self.observed = None;
        self.write_status();
    }

    pub(crate) fn exit(&self) -> Option<Exit> {
        self.exit
    }
}

/// Reads what the report shows from outside the agent's memory (`status::Observed`): the
/// version records once (`update::read_state`), svc-server's link and process, and on the
/// hawkBit backend its consent file.
/// The byte budget the config sets (`svc-agent.updates.budget`); `None`: off.
pub(super) fn budget_gate(
    paths: &Paths,
    config: Option<&MachineConfig>,
) -> Option<crate::update::budget::Gate> {
    crate::update::budget::Gate::of(paths, config?.agent.agent.updates.budget)
}

fn observe(
    paths: &Paths,
    server: &svc_server::ServerManager,
    managed: bool,
    backend: &Backend,
) -> status::Observed {
    status::Observed {
        versions: crate::update::read_state(paths),
        server: server.status(managed),
        consent: match backend {
            Backend::Hawkbit(_) => crate::hawkbit::consent::load(paths),
            Backend::App => None,
        },
    }
}
