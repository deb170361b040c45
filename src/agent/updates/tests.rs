//! The update steps against an engine that records what it is asked.
use super::*;
use std::sync::{Arc, Mutex};

/// An updater that records what it is asked and never touches a file; its versions are
/// what `state` shows the next step.
#[derive(Clone, Default)]
struct FakeUpdater {
    log: Arc<Mutex<Vec<String>>>,
    current: Arc<Mutex<Option<String>>>,
    previous: Arc<Mutex<Option<String>>>,
    bad: Arc<Mutex<Vec<String>>>,
    /// Calls on the updater since the count was last reset.
    calls: Arc<Mutex<u32>>,
    fail_stage: bool,
    /// Every stage is held by the byte budget this many seconds.
    over_budget: Option<u64>,
}

impl FakeUpdater {
    fn stage(&self, kind: Kind, d: &Desired) -> StageResult {
        self.log.lock().unwrap().push(format!("stage {kind} {d:?}"));
        if let Some(wait_secs) = self.over_budget {
            return Err(UpdateError::OverBudget {
                name: kind.name().into(),
                version: "2.0.0".into(),
                needed: 10,
                left: 1,
                until: 1_000_000 + wait_secs,
                wait_secs,
            });
        }
        if self.fail_stage {
            return Err(UpdateError::ShaMismatch {
                expected: "00".into(),
                actual: "11".into(),
            });
        }
        let Desired::Install(t) = d else {
            return Err(UpdateError::BadArtifact("unexpected".into()));
        };
        Ok(Some(Staged {
            kind,
            version: t.version.clone(),
            path: "/x".into(),
            url: None,
        }))
    }

    /// What `update::read_state` would say.
    fn state(&self) -> BinaryState {
        BinaryState {
            current: self.current.lock().unwrap().clone(),
            previous: self.previous.lock().unwrap().clone(),
            bad: self.bad.lock().unwrap().clone(),
            ..BinaryState::default()
        }
    }

    fn called(&self) {
        *self.calls.lock().unwrap() += 1;
    }
}

impl Updater for FakeUpdater {
    /// Stages at once, on the caller's thread: the result is waiting for the next step.
    fn start_stage(
        &self,
        kind: Kind,
        d: &Desired,
        _pinned: bool,
    ) -> Result<Receiver<StageResult>, UpdateError> {
        self.called();
        let (tx, rx) = std::sync::mpsc::channel();
        let _ = tx.send(self.stage(kind, d));
        Ok(rx)
    }
    fn activate(&mut self, s: &Staged) -> Result<(), UpdateError> {
        self.called();
        self.log
            .lock()
            .unwrap()
            .push(format!("activate {}", s.version));
        let old = self.current.lock().unwrap().replace(s.version.clone());
        *self.previous.lock().unwrap() = old;
        Ok(())
    }
    fn rollback(&mut self, kind: Kind) -> Result<String, UpdateError> {
        self.called();
        let prev = self
            .previous
            .lock()
            .unwrap()
            .clone()
            .ok_or_else(|| UpdateError::NoPrevious(kind.to_string()))?;
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
    fn end_probation(&mut self, _kind: Kind, version: &str) -> Result<(), UpdateError> {
        self.called();
        self.log.lock().unwrap().push(format!("passed {version}"));
        Ok(())
    }
}

fn offer(v: &str) -> Target {
    Target {
        version: v.into(),
        url: format!("https://r/{v}"),
        sha256: Some("00".repeat(32)),
        size: Some(1),
        signature: None,
        deltas: Vec::new(),
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

/// The facts of one svc-server step besides the offer and the state.
#[derive(Clone, Copy)]
struct World<'a> {
    window: Option<&'a MaintenanceWindow>,
    busy: bool,
    crashes: u64,
    clock: Clock,
}

fn world() -> World<'static> {
    World {
        window: None,
        busy: false,
        crashes: 0,
        clock: clk(),
    }
}

/// The default world, `after` past the clock `start`.
fn world_at(start: &Clock, after: Duration) -> World<'static> {
    World {
        clock: Clock {
            now: start.now + after,
            ..*start
        },
        ..world()
    }
}

/// One svc-server step as the loop takes it: the state read first, then the step.
fn step(track: &mut Track, fake: &mut FakeUpdater, offered: &str, w: World) -> Step {
    let state = fake.state();
    let vc = vc();
    let offered = offer(offered);
    let f = ServerFacts {
        facts: Facts {
            vc: &vc,
            offered: Some(&offered),
            state: &state,
            hold: false,
            clock: w.clock,
        },
        window: w.window,
        busy: w.busy,
        crashes: w.crashes,
        probation: ProbationPolicy::default(),
    };
    step_server(track, fake, &f)
}

/// svc-server 1.0.0 runs, 1.1.0 is offered and activated (svc-server `busy` or not).
fn activated(busy: bool) -> (FakeUpdater, Track) {
    let mut fake = FakeUpdater::default();
    *fake.current.lock().unwrap() = Some("1.0.0".into());
    let mut track = Track::default();
    let w = World { busy, ..world() };
    assert_eq!(
        until_staged(&mut track, &mut fake, "1.1.0", w),
        Step::RestartServer
    );
    (fake, track)
}

/// One step of `activated`'s 1.1.0 on probation, svc-server having crashed `crashes`
/// times in all, at `clock`.
fn on_probation(track: &mut Track, fake: &mut FakeUpdater, crashes: u64, clock: Clock) -> Step {
    let w = World {
        crashes,
        clock,
        ..world()
    };
    step(track, fake, "1.1.0", w)
}

/// Steps until the download finished (bounded).
fn until_staged(track: &mut Track, fake: &mut FakeUpdater, offered: &str, w: World) -> Step {
    for _ in 0..500 {
        let step = step(track, fake, offered, w);
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
    assert_eq!(step(&mut track, &mut fake, "1.1.0", world()), Step::Nothing);
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
    let outside = World {
        window: Some(&closed),
        ..world()
    };
    assert_eq!(
        until_staged(&mut track, &mut fake, "1.1.0", outside),
        Step::Nothing
    );
    assert!(track.staged.is_some());
    assert_eq!(step(&mut track, &mut fake, "1.1.0", outside), Step::Nothing);
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
    let inside = World {
        window: Some(&open),
        ..world()
    };
    let busy = World {
        busy: true,
        ..inside
    };
    assert_eq!(step(&mut track, &mut fake, "1.1.0", busy), Step::Nothing);
    assert_eq!(
        step(&mut track, &mut fake, "1.1.0", inside),
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
    let window = ProbationPolicy::default().window;
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
fn a_passed_probation_is_ended_once() {
    let (mut fake, mut track) = activated(false);
    let start = clk();
    let after = Clock {
        now: start.now + ProbationPolicy::default().window,
        ..start
    };
    for _ in 0..3 {
        assert_eq!(on_probation(&mut track, &mut fake, 0, after), Step::Nothing);
    }
    let log = fake.log.lock().unwrap().clone();
    assert_eq!(
        log.iter().filter(|l| *l == "passed 1.1.0").count(),
        1,
        "{log:?}"
    );
}

#[test]
fn a_step_crosses_to_the_engine_at_most_twice() {
    // Every path of a step: download started, staged, activated, probation watched and
    // passed while the next version activates, rolled back; each step's calls on the
    // updater are counted (issue 41: the state comes with the step's facts).
    let mut fake = FakeUpdater::default();
    *fake.current.lock().unwrap() = Some("1.0.0".into());
    let mut track = Track::default();
    let mut most = 0;
    let start = clk();
    let mut count = |track: &mut Track, fake: &mut FakeUpdater, v: &str, crashes, secs| {
        *fake.calls.lock().unwrap() = 0;
        let clock = Clock {
            now: start.now + Duration::from_secs(secs),
            ..start
        };
        let w = World {
            crashes,
            clock,
            ..world()
        };
        step(track, fake, v, w);
        most = most.max(*fake.calls.lock().unwrap());
    };
    for _ in 0..3 {
        count(&mut track, &mut fake, "1.1.0", 0, 0);
    }
    // 1.2.0 is staged by the step on which 1.1.0's probation passes: it activates.
    count(&mut track, &mut fake, "1.2.0", 0, 0);
    count(&mut track, &mut fake, "1.2.0", 0, 600);
    for _ in 0..3 {
        count(&mut track, &mut fake, "1.3.0", 3, 600);
    }
    let log = fake.log.lock().unwrap().clone();
    assert!(log.iter().any(|l| l.starts_with("rollback")), "{log:?}");
    assert!(most <= 2, "a step called the updater {most} times: {log:?}");
}

#[test]
fn a_failed_download_is_not_retried_in_a_loop() {
    let mut fake = FakeUpdater {
        fail_stage: true,
        ..Default::default()
    };
    let mut track = Track::default();
    for _ in 0..100 {
        step(&mut track, &mut fake, "2.0.0", world());
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
    let mut fake = FakeUpdater {
        fail_stage: true,
        ..Default::default()
    };
    let mut track = Track::default();
    let start = clk();
    let at = |after: Duration| world_at(&start, after);
    // The failure is seen on the step after the one that started the download.
    step(&mut track, &mut fake, "2.0.0", at(Duration::ZERO));
    step(&mut track, &mut fake, "2.0.0", at(Duration::ZERO));
    step(
        &mut track,
        &mut fake,
        "2.0.0",
        at(RETRY_AFTER_FAILURE - Duration::from_secs(1)),
    );
    assert_eq!(
        fake.log.lock().unwrap().len(),
        1,
        "retried before the pause"
    );
    step(&mut track, &mut fake, "2.0.0", at(RETRY_AFTER_FAILURE));
    assert_eq!(
        fake.log.lock().unwrap().len(),
        2,
        "not retried after the pause"
    );
}

#[test]
fn a_download_the_budget_holds_is_asked_again_when_its_period_ends_or_every_pause() {
    for (wait, again) in [
        (30, Duration::from_secs(31)),
        (12 * 3600, RETRY_AFTER_FAILURE),
    ] {
        let mut fake = FakeUpdater {
            over_budget: Some(wait),
            ..Default::default()
        };
        let mut track = Track::default();
        let start = clk();
        let at = |after: Duration| world_at(&start, after);
        let tries = |fake: &FakeUpdater| fake.log.lock().unwrap().len();
        step(&mut track, &mut fake, "2.0.0", at(Duration::ZERO));
        step(&mut track, &mut fake, "2.0.0", at(Duration::ZERO));
        step(
            &mut track,
            &mut fake,
            "2.0.0",
            at(again - Duration::from_secs(1)),
        );
        assert_eq!(tries(&fake), 1, "{wait}: asked again before its time");
        step(&mut track, &mut fake, "2.0.0", at(again));
        assert_eq!(tries(&fake), 2, "{wait}: not asked again at {again:?}");
    }
}

#[test]
fn the_clock_reads_a_real_local_time() {
    let c = Clock::read();
    assert!(c.local.weekday < 7 && c.local.minute_of_day < 1440);
}
