//! The agent's side of updates: what to install (policy), when (the maintenance window and
//! svc-server's busy file), and what to do when a new svc-server does not hold up
//! (rollback). Downloading, verifying and activating are the `Updater`'s (the effect edge:
//! it runs downloads on a worker so that the loop and its watchdog never wait for the
//! network). The steps here decide only: they read no clock, no file and no environment
//! (the caller passes their [`Facts`], read once) and start no thread.
use super::policy::{self, Desired, LocalTime, RestartGate};
use crate::config::model::{MaintenanceWindow, VersionControl};
use crate::protocol::Target;
use crate::update::{
    probation_verdict, BinaryState, Kind, ProbationPolicy, ProbationVerdict, UpdateError,
};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// A downloaded and verified artifact, ready to activate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Staged {
    pub kind: Kind,
    pub version: String,
    pub path: std::path::PathBuf,
    /// For a `pin_url` artifact: the URL it came from.
    pub url: Option<String>,
}

/// What the update engine offers the agent: the operations, typed. What is installed comes
/// with the step's [`Facts`] (`update::read_state`, once per loop pass), so one step calls
/// this at most twice: a download started, and one change of what is active.
pub(crate) trait Updater: Send {
    /// The vendor's rule for offers whose deltas cannot be used (the config's
    /// `svc-agent.updates.delta_fallback`); a backend without deltas ignores it.
    fn set_delta_fallback(&mut self, _rule: crate::update::DeltaFallback) {}
    /// The byte budget (the config's `svc-agent.updates.budget`); off: `None`.
    fn set_budget(&mut self, _gate: Option<crate::update::budget::Gate>) {}
    /// Starts downloading and verifying what `desired` names, off the caller's thread; the
    /// result arrives on the receiver: a complete, checked file, or `None` for nothing new
    /// (already active, or a pinned URL answered 304 Not Modified). `pinned`: the config's
    /// `pin_version` or `pin_url` named it (`policy::pinned`), so the byte budget counts it
    /// and never holds it.
    fn start_stage(
        &self,
        kind: Kind,
        desired: &Desired,
        pinned: bool,
    ) -> Result<Receiver<StageResult>, UpdateError>;
    /// Makes `staged` the active version atomically (link swap + version record).
    fn activate(&mut self, staged: &Staged) -> Result<(), UpdateError>;
    /// Points `kind` back at its previous version and marks the current one bad; returns
    /// the version now active.
    fn rollback(&mut self, kind: Kind) -> Result<String, UpdateError>;
    /// `version` of `kind` passed its probation.
    fn end_probation(&mut self, kind: Kind, version: &str) -> Result<(), UpdateError>;
}

/// What a download worker sends back.
pub(crate) type StageResult = Result<Option<Staged>, UpdateError>;

/// What a step knows, read once by the loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'a> {
    pub vc: &'a VersionControl,
    pub offered: Option<&'a Target>,
    /// The binary's state (`update::read_state`).
    pub state: &'a BinaryState,
    /// The update server asks to wait (download only, or its window is closed).
    pub hold: bool,
    pub clock: Clock,
}

/// What an svc-server step knows besides [`Facts`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerFacts<'a> {
    pub facts: Facts<'a>,
    pub window: Option<&'a MaintenanceWindow>,
    /// svc-server is processing a config change (its busy file).
    pub busy: bool,
    /// svc-server's crash count so far.
    pub crashes: u64,
    /// The probation rule's policy (`Tuning`).
    pub probation: ProbationPolicy,
}

/// The time as the steps see it, read once by the caller.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// For intervals (retry, pin re-check, probation).
    pub now: Instant,
    /// For the maintenance window, which is written in local time.
    pub local: LocalTime,
}

impl Clock {
    /// Reads both clocks: the loop's edge, once per step. The local time is the machine's
    /// timezone, as the window is written in local time.
    pub(crate) fn read() -> Clock {
        let (weekday, minute_of_day) = crate::sys::local_weekday_minute().unwrap_or((0, 0));
        Clock {
            now: Instant::now(),
            local: LocalTime {
                weekday,
                minute_of_day,
            },
        }
    }
}

/// A new svc-server under watch: when it was activated, svc-server's crash count then, and
/// when each crash since happened at the earliest, for the one rule
/// (`update::probation_verdict`).
struct Probation {
    version: String,
    since: Instant,
    crashes_then: u64,
    crash_times: Vec<Instant>,
    /// The step before this one: a crash first counted now happened after it.
    last_step: Instant,
}

/// One binary's update in progress.
#[derive(Default)]
pub(crate) struct Track {
    job: Option<(Desired, Receiver<StageResult>)>,
    pub staged: Option<Staged>,
    /// After an svc-server activation, until it passes or is rolled back.
    probation: Option<Probation>,
    /// Whether a probation left by an earlier run was looked for.
    probation_resumed: bool,
    waiting_logged: Option<RestartGate>,
    /// The download that failed, when, and how long until it is tried again.
    last_failure: Option<(Desired, Instant, Duration)>,
    /// When a pinned URL was last checked (conditionally) for a new build.
    last_pin_check: Option<Instant>,
    /// The older offer last refused (logged once, not on every poll).
    refused_logged: Option<String>,
    /// A probation passed and not yet ended in the records: ended at the step's end, or
    /// replaced by that step's activation (which records the new version's probation).
    unended: Option<String>,
}

/// What the loop must do after a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Nothing,
    /// A new svc-server is active: restart it.
    RestartServer,
    /// The new svc-server failed probation and was rolled back: restart it.
    RolledBack(String),
}

/// A failed download is retried after this long (a new offer is tried at once).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(600);
/// A download the byte budget holds is asked again when its period ends, and at least this
/// often (a config that raised the budget, a clock set forward): a read of `budget.json` on
/// a worker, nothing downloaded.
const RETRY_OVER_BUDGET: Duration = RETRY_AFTER_FAILURE;
/// A pinned URL that is installed is re-checked this often with a conditional request
/// (ETag / Last-Modified), so a rebuilt file at the same URL is picked up without
/// downloading the unchanged one again.
const PIN_RECHECK: Duration = Duration::from_secs(3600);

impl Track {
    /// `desired`, or for an installed pinned URL due for a re-check, that URL again.
    fn with_pin_recheck(&mut self, vc: &VersionControl, desired: Desired, now: Instant) -> Desired {
        if desired != Desired::Keep || self.job.is_some() {
            return desired;
        }
        let crate::config::model::VersionChoice::Url(url) = vc.choice() else {
            return desired;
        };
        if self
            .last_pin_check
            .is_some_and(|t| now.saturating_duration_since(t) < PIN_RECHECK)
        {
            return desired;
        }
        self.last_pin_check = Some(now);
        Desired::InstallUrl(url.to_string())
    }

    /// Starts, follows or finishes the download of what `desired` names (`pinned`: see
    /// [`Updater::start_stage`]).
    fn download(
        &mut self,
        kind: Kind,
        desired: Desired,
        pinned: bool,
        updater: &dyn Updater,
        now: Instant,
    ) {
        let name = kind.name();
        if let Desired::RefuseOlder { offered, current } = &desired {
            if self.refused_logged.as_ref() != Some(offered) {
                crate::error!(
                    "update",
                    "{name}: refusing {offered}, older than the running {current} (a replayed answer or an old release medium?); only a pin_version in the config downgrades"
                );
                self.refused_logged = Some(offered.clone());
            }
            self.job = None;
            self.staged = None;
            return;
        }
        self.refused_logged = None;
        if desired == Desired::Keep {
            self.job = None;
            self.staged = None;
            return;
        }
        if let Some((d, rx)) = &self.job {
            if d != &desired {
                self.job = None; // a newer offer replaces the running one (its result is dropped)
            } else if let Ok(result) = rx.try_recv() {
                self.job = None;
                match result {
                    Ok(None) => {
                        crate::debug!("update", "{name}: nothing new to install");
                    }
                    Ok(Some(staged)) => {
                        crate::info!(
                            "update",
                            "{name} {} downloaded and verified",
                            staged.version
                        );
                        self.staged = Some(staged);
                    }
                    Err(UpdateError::OverBudget {
                        until, wait_secs, ..
                    }) => {
                        // Logged once by the budget, when the wait began; asked again a
                        // second after the period ends.
                        crate::debug!("update", "{name}: the byte budget holds it until {until}");
                        let after = Duration::from_secs(wait_secs.saturating_add(1));
                        self.last_failure = Some((desired, now, after.min(RETRY_OVER_BUDGET)));
                    }
                    Err(e) => {
                        crate::error!("update", "{name} update failed: {e}");
                        self.last_failure = Some((desired, now, RETRY_AFTER_FAILURE));
                    }
                }
                return;
            } else {
                return;
            }
        }
        if self
            .staged
            .as_ref()
            .is_some_and(|s| staged_matches(s, &desired))
        {
            return;
        }
        if let Some((d, at, after)) = &self.last_failure {
            if d == &desired && now.saturating_duration_since(*at) < *after {
                return;
            }
        }
        match updater.start_stage(kind, &desired, pinned) {
            Ok(rx) => self.job = Some((desired, rx)),
            Err(e) => crate::error!("update", "cannot start the {name} download: {e}"),
        }
    }
}

fn staged_matches(s: &Staged, d: &Desired) -> bool {
    match d {
        Desired::Install(t) => s.version == t.version,
        Desired::InstallUrl(u) => s.url.as_deref() == Some(u.as_str()),
        Desired::Keep | Desired::RefuseOlder { .. } => false,
    }
}

/// svc-server: download, then activate inside the window when svc-server is idle, then
/// watch the new version through its probation.
pub(crate) fn step_server(track: &mut Track, updater: &mut dyn Updater, f: &ServerFacts) -> Step {
    let now = f.facts.clock.now;
    if let Some(step) = track.watch_probation(updater, f) {
        return step;
    }
    let desired = desired(&f.facts, f.facts.state.current.as_deref());
    let desired = track.with_pin_recheck(f.facts.vc, desired, now);
    let pinned = policy::pinned(f.facts.vc, &desired);
    track.download(Kind::Server, desired, pinned, updater, now);
    let (step, activating) = track.activate_server(updater, f);
    if !activating {
        if let Some(version) = track.unended.take() {
            if let Err(e) = updater.end_probation(Kind::Server, &version) {
                crate::warn!("update", "svc-server {version}: ending the probation: {e}");
            }
        }
    }
    step
}

/// What `f` asks to be installed, by the policy, with `current` running.
fn desired(f: &Facts, current: Option<&str>) -> Desired {
    policy::desired(
        f.vc,
        f.offered,
        current,
        f.state.pinned_url.as_deref(),
        &f.state.bad,
    )
}

impl Track {
    /// Watches svc-server's probation (resumed from the records after an agent restart);
    /// `Some` when it failed and the step ends with its rollback.
    fn watch_probation(&mut self, updater: &mut dyn Updater, f: &ServerFacts) -> Option<Step> {
        let now = f.facts.clock.now;
        if !std::mem::replace(&mut self.probation_resumed, true) && self.probation.is_none() {
            // The agent restarted (a power cut, a crash) while a new svc-server was on
            // probation: it goes on, from now, or a build that crashes at start would be kept.
            if let Some(version) = f.facts.state.probation.clone() {
                crate::info!(
                    "update",
                    "svc-server {version} is still on probation (the agent restarted during it)"
                );
                self.probation = Some(Probation {
                    version,
                    since: now,
                    crashes_then: f.crashes,
                    crash_times: Vec::new(),
                    last_step: now,
                });
            }
        }
        let p = self.probation.as_mut()?;
        let seen = f.crashes.saturating_sub(p.crashes_then);
        // A crash is stamped with the step before the one that sees it, not with this
        // one: a step that runs late (a loaded machine) must not move a crash inside the
        // window past its end and let a crashing build pass.
        while (p.crash_times.len() as u64) < seen {
            p.crash_times.push(p.last_step);
        }
        p.last_step = now;
        match probation_verdict(p.since, &p.crash_times, now, f.probation) {
            ProbationVerdict::RollBack => {
                let crashes = p.crash_times.len();
                self.probation = None;
                Some(match updater.rollback(Kind::Server) {
                    Ok(v) => {
                        // The rollback cleared the records' probation too.
                        self.unended = None;
                        crate::error!(
                            "update",
                            "the new svc-server crashed {crashes} times within its probation: rolled back to {v}; it will not be retried until the app offers another version"
                        );
                        Step::RolledBack(v)
                    }
                    Err(e) => {
                        crate::error!("update", "svc-server rollback failed: {e}");
                        Step::Nothing
                    }
                })
            }
            ProbationVerdict::Passed => {
                crate::info!("update", "the new svc-server passed its probation");
                self.unended = self.probation.take().map(|p| p.version);
                None
            }
            ProbationVerdict::Watching => None,
        }
    }

    /// Activates the staged svc-server when the gate is open; the step, and whether an
    /// activation was tried (it records the new version's probation in the old one's place).
    fn activate_server(&mut self, updater: &mut dyn Updater, f: &ServerFacts) -> (Step, bool) {
        let Some(staged) = self.staged.clone() else {
            return (Step::Nothing, false);
        };
        let gate = policy::restart_gate(f.window, f.facts.clock.local, f.busy, f.facts.hold);
        if gate != RestartGate::Now {
            if self.waiting_logged != Some(gate) {
                let why = match gate {
                    RestartGate::OutsideWindow => "outside the maintenance window",
                    RestartGate::UpdateServerHold => {
                        "the update server asks to wait (download only, or its maintenance window is closed)"
                    }
                    _ => "svc-server is processing a config change",
                };
                crate::info!(
                    "update",
                    "svc-server {} is ready; waiting: {why}",
                    staged.version
                );
                self.waiting_logged = Some(gate);
            }
            return (Step::Nothing, false);
        }
        self.waiting_logged = None;
        self.staged = None;
        let step = match updater.activate(&staged) {
            Ok(()) => {
                crate::info!(
                    "update",
                    "svc-server {} activated; restarting svc-server",
                    staged.version
                );
                self.unended = None;
                let now = f.facts.clock.now;
                self.probation = Some(Probation {
                    version: staged.version.clone(),
                    since: now,
                    crashes_then: f.crashes,
                    crash_times: Vec::new(),
                    last_step: now,
                });
                Step::RestartServer
            }
            Err(e) => {
                crate::error!("update", "svc-server {} not activated: {e}", staged.version);
                Step::Nothing
            }
        };
        (step, true)
    }
}

/// svc-agent: download and activate; the new version runs after the next agent restart or
/// reboot (spec §3). The agent never restarts itself for it. True when a version was
/// activated (the state changed).
pub(crate) fn step_agent(track: &mut Track, updater: &mut dyn Updater, f: &Facts) -> bool {
    // Without a link (a development run) the running agent is this build.
    let current = f.state.current.as_deref().or(Some(env!("SVC_VERSION")));
    let desired = desired(f, current);
    let desired = track.with_pin_recheck(f.vc, desired, f.clock.now);
    let pinned = policy::pinned(f.vc, &desired);
    track.download(Kind::Agent, desired, pinned, updater, f.clock.now);
    if f.hold {
        // Staged, kept for when the update server lets it be installed.
        return false;
    }
    let Some(staged) = track.staged.take() else {
        return false;
    };
    match updater.activate(&staged) {
        Ok(()) => {
            crate::info!(
                "update",
                "svc-agent {} installed; it runs after the agent restarts or the machine reboots",
                staged.version
            );
            true
        }
        Err(e) => {
            crate::error!("update", "svc-agent {} not activated: {e}", staged.version);
            false
        }
    }
}

#[cfg(test)]
mod tests;
