//! The agent's side of updates: what to install (policy), when (the maintenance window and
//! svc-server's busy file), and what to do when a new svc-server does not hold up
//! (rollback). Downloading, verifying and activating are the `Updater`'s (the effect edge:
//! it runs downloads on a worker so that the loop and its watchdog never wait for the
//! network). The steps here decide only: they read no clock (the caller passes [`Clock`])
//! and start no thread.
use super::policy::{self, Desired, LocalTime, RestartGate};
use crate::config::model::{MaintenanceWindow, VersionControl};
use crate::protocol::Target;
use crate::update::{probation_verdict, ProbationPolicy, ProbationVerdict};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// A downloaded and verified artifact, ready to activate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Staged {
    pub name: String,
    pub version: String,
    pub path: std::path::PathBuf,
    /// For a `pin_url` artifact: the URL it came from.
    pub url: Option<String>,
}

/// What the update engine offers the agent.
pub(crate) trait Updater: Send {
    /// Starts downloading and verifying what `desired` names, off the caller's thread; the
    /// result arrives on the receiver: a complete, checked file, or `None` for nothing new
    /// (already active, or a pinned URL answered 304 Not Modified).
    fn start_stage(&self, name: &str, desired: &Desired) -> Result<Receiver<StageResult>, String>;
    /// Makes `staged` the active version atomically (link swap + version record).
    fn activate(&mut self, staged: &Staged) -> Result<(), String>;
    /// Points `name` back at its previous version and marks the current one bad.
    fn rollback(&mut self, name: &str) -> Result<String, String>;
    /// The active version and, for a `pin_url` install, its URL.
    fn current(&self, name: &str) -> (Option<String>, Option<String>);
    /// Versions rolled back before: not retried until the app offers another.
    fn bad_versions(&self, name: &str) -> Vec<String>;
    /// The svc-server version whose probation an earlier run began and did not finish.
    fn server_probation(&self) -> Option<String> {
        None
    }
    /// svc-server `version` passed its probation.
    fn end_server_probation(&mut self, _version: &str) {}
}

/// What a download worker sends back.
pub(crate) type StageResult = Result<Option<Staged>, String>;

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
    last_failure: Option<(Desired, Instant)>,
    /// When a pinned URL was last checked (conditionally) for a new build.
    last_pin_check: Option<Instant>,
    /// The older offer last refused (logged once, not on every poll).
    refused_logged: Option<String>,
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

    /// Starts, follows or finishes the download of what `desired` names.
    fn download(&mut self, name: &str, desired: Desired, updater: &dyn Updater, now: Instant) {
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
                    Err(e) => {
                        crate::error!("update", "{name} update failed: {e}");
                        self.last_failure = Some((desired, now));
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
        if let Some((d, at)) = &self.last_failure {
            if d == &desired && now.saturating_duration_since(*at) < RETRY_AFTER_FAILURE {
                return;
            }
        }
        match updater.start_stage(name, &desired) {
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

/// The probation rule's policy; `SVC_AGENT_PROBATION_SECS` shortens its window for tests
/// that watch a whole probation through the real daemon (read once).
fn probation_policy() -> ProbationPolicy {
    static WINDOW: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let mut policy = ProbationPolicy::default();
    let secs = WINDOW.get_or_init(|| {
        std::env::var("SVC_AGENT_PROBATION_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if let Some(s) = secs {
        policy.window = Duration::from_secs(*s);
    }
    policy
}

/// svc-server: download, then activate inside the window when svc-server is idle, then
/// watch the new version through its probation.
#[allow(clippy::too_many_arguments)]
pub(crate) fn step_server(
    track: &mut Track,
    updater: &mut dyn Updater,
    vc: &VersionControl,
    offered: Option<&Target>,
    window: Option<&MaintenanceWindow>,
    server_busy: bool,
    update_server_hold: bool,
    server_crashes: u64,
    clock: Clock,
) -> Step {
    let now = clock.now;
    if !std::mem::replace(&mut track.probation_resumed, true) && track.probation.is_none() {
        // The agent restarted (a power cut, a crash) while a new svc-server was on
        // probation: it goes on, from now, or a build that crashes at start would be kept.
        if let Some(version) = updater.server_probation() {
            crate::info!(
                "update",
                "svc-server {version} is still on probation (the agent restarted during it)"
            );
            track.probation = Some(Probation {
                version,
                since: now,
                crashes_then: server_crashes,
                crash_times: Vec::new(),
                last_step: now,
            });
        }
    }
    if let Some(p) = track.probation.as_mut() {
        let policy = probation_policy();
        let seen = server_crashes.saturating_sub(p.crashes_then);
        // A crash is stamped with the step before the one that sees it, not with this
        // one: a step that runs late (a loaded machine) must not move a crash inside the
        // window past its end and let a crashing build pass.
        while (p.crash_times.len() as u64) < seen {
            p.crash_times.push(p.last_step);
        }
        p.last_step = now;
        match probation_verdict(p.since, &p.crash_times, now, policy) {
            ProbationVerdict::RollBack => {
                let crashes = p.crash_times.len();
                track.probation = None;
                return match updater.rollback("svc-server") {
                    Ok(v) => {
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
                };
            }
            ProbationVerdict::Passed => {
                crate::info!("update", "the new svc-server passed its probation");
                if let Some(p) = track.probation.take() {
                    updater.end_server_probation(&p.version);
                }
            }
            ProbationVerdict::Watching => {}
        }
    }
    let (cur, cur_url) = updater.current("svc-server");
    let bad = updater.bad_versions("svc-server");
    let desired = policy::desired(vc, offered, cur.as_deref(), cur_url.as_deref(), &bad);
    let desired = track.with_pin_recheck(vc, desired, now);
    track.download("svc-server", desired, updater, now);
    let Some(staged) = track.staged.clone() else {
        return Step::Nothing;
    };
    let gate = policy::restart_gate(window, clock.local, server_busy, update_server_hold);
    if gate != RestartGate::Now {
        if track.waiting_logged != Some(gate) {
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
            track.waiting_logged = Some(gate);
        }
        return Step::Nothing;
    }
    track.waiting_logged = None;
    track.staged = None;
    match updater.activate(&staged) {
        Ok(()) => {
            crate::info!(
                "update",
                "svc-server {} activated; restarting svc-server",
                staged.version
            );
            track.probation = Some(Probation {
                version: staged.version.clone(),
                since: now,
                crashes_then: server_crashes,
                crash_times: Vec::new(),
                last_step: now,
            });
            Step::RestartServer
        }
        Err(e) => {
            crate::error!("update", "svc-server {} not activated: {e}", staged.version);
            Step::Nothing
        }
    }
}

/// svc-agent: download and activate; the new version runs after the next agent restart or
/// reboot (spec §3). The agent never restarts itself for it.
pub(crate) fn step_agent(
    track: &mut Track,
    updater: &mut dyn Updater,
    vc: &VersionControl,
    offered: Option<&Target>,
    update_server_hold: bool,
    clock: Clock,
) {
    let (cur, cur_url) = updater.current("svc-agent");
    let cur = cur.or_else(|| Some(env!("SVC_VERSION").to_string()));
    let bad = updater.bad_versions("svc-agent");
    let desired = policy::desired(vc, offered, cur.as_deref(), cur_url.as_deref(), &bad);
    let desired = track.with_pin_recheck(vc, desired, clock.now);
    track.download("svc-agent", desired, updater, clock.now);
    if update_server_hold {
        // Staged, kept for when the update server lets it be installed.
        return;
    }
    if let Some(staged) = track.staged.take() {
        match updater.activate(&staged) {
            Ok(()) => crate::info!(
                "update",
                "svc-agent {} installed; it runs after the agent restarts or the machine reboots",
                staged.version
            ),
            Err(e) => crate::error!("update", "svc-agent {} not activated: {e}", staged.version),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// An updater that records what it is asked and never touches a file.
    #[derive(Clone, Default)]
    struct FakeUpdater {
        log: Arc<Mutex<Vec<String>>>,
        current: Arc<Mutex<Option<String>>>,
        previous: Arc<Mutex<Option<String>>>,
        bad: Arc<Mutex<Vec<String>>>,
        fail_stage: bool,
    }

    impl FakeUpdater {
        fn stage(&self, name: &str, d: &Desired) -> StageResult {
            self.log.lock().unwrap().push(format!("stage {name} {d:?}"));
            if self.fail_stage {
                return Err("sha256 mismatch".into());
            }
            let Desired::Install(t) = d else {
                return Err("unexpected".into());
            };
            Ok(Some(Staged {
                name: name.into(),
                version: t.version.clone(),
                path: "/x".into(),
                url: None,
            }))
        }
    }

    impl Updater for FakeUpdater {
        /// Stages at once, on the caller's thread: the result is waiting for the next step.
        fn start_stage(&self, name: &str, d: &Desired) -> Result<Receiver<StageResult>, String> {
            let (tx, rx) = std::sync::mpsc::channel();
            let _ = tx.send(self.stage(name, d));
            Ok(rx)
        }
        fn activate(&mut self, s: &Staged) -> Result<(), String> {
            self.log
                .lock()
                .unwrap()
                .push(format!("activate {}", s.version));
            let old = self.current.lock().unwrap().replace(s.version.clone());
            *self.previous.lock().unwrap() = old;
            Ok(())
        }
        fn rollback(&mut self, _name: &str) -> Result<String, String> {
            let prev = self.previous.lock().unwrap().clone().ok_or("no previous")?;
            let bad = self
                .current
                .lock()
                .unwrap()
                .replace(prev.clone())
                .unwrap_or_default();
            self.bad.lock().unwrap().push(bad);
            self.log.lock().unwrap().push(format!("rollback to {prev}"));
            Ok(prev)
        }
        fn current(&self, _name: &str) -> (Option<String>, Option<String>) {
            (self.current.lock().unwrap().clone(), None)
        }
        fn bad_versions(&self, _name: &str) -> Vec<String> {
            self.bad.lock().unwrap().clone()
        }
    }

    fn offer(v: &str) -> Target {
        Target {
            version: v.into(),
            url: format!("https://r/{v}"),
            sha256: Some("00".repeat(32)),
            size: Some(1),
            signature: None,
        }
    }

    fn vc() -> VersionControl {
        VersionControl {
            release_channel: "stable".into(),
            ..Default::default()
        }
    }

    /// A fixed moment: Wednesday 10:00 local time.
    fn clk() -> Clock {
        Clock {
            now: Instant::now(),
            local: LocalTime {
                weekday: 2,
                minute_of_day: 600,
            },
        }
    }

    /// svc-server 1.0.0 runs, 1.1.0 is offered and activated (svc-server `busy` or not).
    fn activated(busy: bool) -> (FakeUpdater, Track) {
        let mut fake = FakeUpdater::default();
        *fake.current.lock().unwrap() = Some("1.0.0".into());
        let mut track = Track::default();
        assert_eq!(
            until_staged(&mut track, &mut fake, &offer("1.1.0"), None, busy),
            Step::RestartServer
        );
        (fake, track)
    }

    /// One step of `activated`'s 1.1.0 on probation, svc-server having crashed `crashes`
    /// times in all, at `clock`.
    fn on_probation(track: &mut Track, fake: &mut FakeUpdater, crashes: u64, clock: Clock) -> Step {
        step_server(
            track,
            fake,
            &vc(),
            Some(&offer("1.1.0")),
            None,
            false,
            false,
            crashes,
            clock,
        )
    }

    /// Steps until the download finished (bounded).
    fn until_staged(
        track: &mut Track,
        fake: &mut FakeUpdater,
        offered: &Target,
        window: Option<&MaintenanceWindow>,
        busy: bool,
    ) -> Step {
        for _ in 0..500 {
            let step = step_server(
                track,
                fake,
                &vc(),
                Some(offered),
                window,
                busy,
                false,
                0,
                clk(),
            );
            if step != Step::Nothing || track.staged.is_some() {
                return step;
            }
        }
        panic!("never staged: {:?}", fake.log.lock().unwrap());
    }

    #[test]
    fn a_new_server_version_is_activated_at_once_without_a_window() {
        let (mut fake, mut track) = activated(true);
        assert_eq!(fake.current.lock().unwrap().as_deref(), Some("1.1.0"));
        // Nothing more to do for the same offer.
        assert_eq!(
            step_server(
                &mut track,
                &mut fake,
                &vc(),
                Some(&offer("1.1.0")),
                None,
                false,
                false,
                0,
                clk(),
            ),
            Step::Nothing
        );
    }

    #[test]
    fn a_window_holds_the_restart_until_inside_and_idle() {
        let mut fake = FakeUpdater::default();
        *fake.current.lock().unwrap() = Some("1.0.0".into());
        let now = clk().local;
        // A window that excludes this minute (one hour, starting two hours from now).
        let start = (now.minute_of_day + 120) % 1440;
        let closed = MaintenanceWindow {
            days: (0..7).collect(),
            start,
            end: (start + 60) % 1440,
        };
        let mut track = Track::default();
        assert_eq!(
            until_staged(&mut track, &mut fake, &offer("1.1.0"), Some(&closed), false),
            Step::Nothing
        );
        assert!(track.staged.is_some());
        assert_eq!(
            step_server(
                &mut track,
                &mut fake,
                &vc(),
                Some(&offer("1.1.0")),
                Some(&closed),
                false,
                false,
                0,
                clk(),
            ),
            Step::Nothing
        );
        assert_eq!(
            fake.current.lock().unwrap().as_deref(),
            Some("1.0.0"),
            "activated outside the window"
        );
        // An open window (the whole day), but svc-server is busy: still waiting.
        let open = MaintenanceWindow {
            days: (0..7).collect(),
            start: 0,
            end: 1439,
        };
        assert_eq!(
            step_server(
                &mut track,
                &mut fake,
                &vc(),
                Some(&offer("1.1.0")),
                Some(&open),
                true,
                false,
                0,
                clk(),
            ),
            Step::Nothing
        );
        assert_eq!(
            step_server(
                &mut track,
                &mut fake,
                &vc(),
                Some(&offer("1.1.0")),
                Some(&open),
                false,
                false,
                0,
                clk(),
            ),
            Step::RestartServer
        );
    }

    #[test]
    fn crashes_in_probation_roll_back_and_the_version_is_not_retried() {
        let (mut fake, mut track) = activated(false);
        let s = |track: &mut Track, fake: &mut FakeUpdater, restarts| {
            on_probation(track, fake, restarts, clk())
        };
        assert_eq!(s(&mut track, &mut fake, 2), Step::Nothing);
        assert_eq!(
            s(&mut track, &mut fake, 3),
            Step::RolledBack("1.0.0".into())
        );
        assert_eq!(fake.current.lock().unwrap().as_deref(), Some("1.0.0"));
        for _ in 0..20 {
            assert_eq!(s(&mut track, &mut fake, 3), Step::Nothing);
        }
        let stages = fake
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("stage"))
            .count();
        assert_eq!(
            stages,
            1,
            "the bad version was downloaded again: {:?}",
            fake.log.lock().unwrap()
        );
    }

    #[test]
    fn a_crash_inside_the_probation_seen_by_a_late_step_still_counts() {
        // A loaded machine: the step that sees the third crash runs after the window's
        // end, though the crash happened inside it. Stamped with that late step, the crash
        // fell outside the window and the crashing build passed its probation.
        let (mut fake, mut track) = activated(false);
        let start = clk();
        let window = probation_policy().window;
        let s = |track: &mut Track, fake: &mut FakeUpdater, crashes, after: Duration| {
            let at = Clock {
                now: start.now + after,
                ..start
            };
            on_probation(track, fake, crashes, at)
        };
        let before_end = window - Duration::from_secs(10);
        assert_eq!(s(&mut track, &mut fake, 2, before_end), Step::Nothing);
        assert_eq!(
            s(&mut track, &mut fake, 3, window + Duration::from_secs(5)),
            Step::RolledBack("1.0.0".into()),
            "{:?}",
            fake.log.lock().unwrap()
        );
        assert_eq!(fake.current.lock().unwrap().as_deref(), Some("1.0.0"));
    }

    #[test]
    fn a_failed_download_is_not_retried_in_a_loop() {
        let mut fake = FakeUpdater {
            fail_stage: true,
            ..Default::default()
        };
        let mut track = Track::default();
        for _ in 0..100 {
            step_server(
                &mut track,
                &mut fake,
                &vc(),
                Some(&offer("2.0.0")),
                None,
                false,
                false,
                0,
                clk(),
            );
        }
        assert_eq!(
            fake.log.lock().unwrap().len(),
            1,
            "{:?}",
            fake.log.lock().unwrap()
        );
        assert!(fake.current.lock().unwrap().is_none());
    }

    #[test]
    fn a_failed_download_is_retried_once_the_pause_has_passed() {
        let fake = FakeUpdater {
            fail_stage: true,
            ..Default::default()
        };
        let mut fake = fake;
        let mut track = Track::default();
        let start = clk();
        let at = |after: Duration| Clock {
            now: start.now + after,
            ..start
        };
        let step = |track: &mut Track, fake: &mut FakeUpdater, after| {
            step_server(
                track,
                fake,
                &vc(),
                Some(&offer("2.0.0")),
                None,
                false,
                false,
                0,
                at(after),
            )
        };
        // The failure is seen on the step after the one that started the download.
        step(&mut track, &mut fake, Duration::ZERO);
        step(&mut track, &mut fake, Duration::ZERO);
        step(
            &mut track,
            &mut fake,
            RETRY_AFTER_FAILURE - Duration::from_secs(1),
        );
        assert_eq!(
            fake.log.lock().unwrap().len(),
            1,
            "retried before the pause"
        );
        step(&mut track, &mut fake, RETRY_AFTER_FAILURE);
        assert_eq!(
            fake.log.lock().unwrap().len(),
            2,
            "not retried after the pause"
        );
    }

    #[test]
    fn the_clock_reads_a_real_local_time() {
        let c = Clock::read();
        assert!(c.local.weekday < 7 && c.local.minute_of_day < 1440);
    }
}
