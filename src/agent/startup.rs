//! The start-up, one ordered list of steps, and `run`, the daemon's life from the lock to
//! the exit. Fast start (spec §3) is a flag on the list, not a second order.
use super::tuning::Tuning;
use super::{logs, policy, Agent, Exit};
use crate::paths::Paths;
use crate::signals;
use crate::{error, warn};
use std::time::Instant;

/// The steps of the start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The signal handlers (a stop request caught before them counts: `catch_early`).
    Signals,
    /// The rest of the agent's state (`Agent::load_rest`).
    LoadRest,
    /// `housekeeping`.
    Housekeeping,
    /// The log queue and its uploader (opening a full queue takes tens of milliseconds;
    /// the lines logged meanwhile wait in memory for it).
    LogPipeline,
    /// The line saying the agent starts.
    Announce,
    /// agent-provisioning, as the cached config (or none) and the manufacturer defaults say:
    /// before the first-contact wait, which on a machine whose only way out is a Wi-Fi
    /// network it has not joined yet would otherwise only wait (up to 60 s) for itself. A
    /// config that first contact brings reaches it as any config change does.
    Provisioning,
    /// One bounded attempt at contact (and so at updates) before svc-server starts.
    FirstContact,
    StartServer,
    /// agent-syscfg, as the config says.
    Syscfg,
}

/// The start-up, in order.
const ORDER: [Step; 9] = [
    Step::Signals,
    Step::LoadRest,
    Step::Housekeeping,
    Step::LogPipeline,
    Step::Announce,
    Step::Provisioning,
    Step::FirstContact,
    Step::StartServer,
    Step::Syscfg,
];

/// `ORDER`, or with fast start: svc-server's start first and no wait for first contact;
/// everything else after it in the same order (BENCHMARKS.md, fast start: nothing else is
/// needed to start svc-server).
fn plan(fast_start: bool) -> Vec<Step> {
    if !fast_start {
        return ORDER.to_vec();
    }
    std::iter::once(Step::StartServer)
        .chain(
            ORDER
                .into_iter()
                .filter(|s| !matches!(s, Step::StartServer | Step::FirstContact)),
        )
        .collect()
}

/// Why the agent does not start; said on the log line of `run` (or by `install`).
#[derive(Debug)]
pub(crate) enum StartupError {
    /// This build is not for a platform the agent runs on (spec §1).
    Unsupported {
        os: &'static str,
        arch: &'static str,
    },
    Signals(std::io::Error),
}

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartupError::Unsupported { os, arch } => write!(
                f,
                "svc-agent runs on Linux amd64 and arm64 only; this build is for {os} {arch}"
            ),
            StartupError::Signals(e) => write!(f, "cannot install signal handlers: {e}"),
        }
    }
}

impl std::error::Error for StartupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartupError::Signals(e) => Some(e),
            StartupError::Unsupported { .. } => None,
        }
    }
}

impl Agent {
    /// Runs the start-up (`plan`); returns the log pipeline it opened (if there are
    /// credentials). An error ends the start-up there (svc-server may be running: the caller
    /// stops it).
    fn start(
        &mut self,
        lock: &mut crate::systemd::InstanceLock,
    ) -> Result<Option<logs::LogPipeline>, StartupError> {
        let mut pipeline = None;
        for step in plan(self.started.fast_start) {
            match step {
                Step::Signals => signals::install().map_err(StartupError::Signals)?,
                Step::LoadRest => self.load_rest(),
                Step::Housekeeping => housekeeping(&self.paths, lock),
                Step::LogPipeline => {
                    pipeline = logs::LogPipeline::start(&self.paths, self.credentials().cloned())
                }
                // With fast start said after svc-server's start: on a device the line goes
                // to journald's socket, whose wake-up would otherwise come before its exec.
                Step::Announce => self.log_starting(),
                Step::FirstContact => self.first_contact(),
                Step::StartServer => {
                    self.start_server();
                    signals::test_signal_point("svc-server-started");
                }
                Step::Provisioning => self.apply_provisioning(false),
                Step::Syscfg => self.apply_syscfg(),
            }
        }
        Ok(pipeline)
    }

    /// Polls until the first contact, a stop request or the deadline (spec §3).
    fn first_contact(&mut self) {
        let deadline = Instant::now() + self.tuning.first_contact;
        while self.conn.connected() && self.exit.is_none() {
            if self.poll_once() {
                break;
            }
            let next = self.conn.next_poll().unwrap_or_else(Instant::now);
            let Some(wait) = policy::first_contact_wait(Instant::now(), next, deadline) else {
                break;
            };
            signals::wait(wait);
            self.exit = signals::stop_requested()
                .then_some(Exit::Stop)
                .or(self.exit);
        }
    }
}

/// Linux on amd64 or arm64 only (spec §1).
pub(crate) fn platform_supported() -> Result<(), StartupError> {
    if cfg!(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )) {
        Ok(())
    } else {
        Err(StartupError::Unsupported {
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
        })
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
    // Every folder an atomic write goes to, the downloads' sidecars' included (beside their
    // parts: the cache, the .swu cache, the OS bundle's folder; a cut at the OS download's
    // middle left one in `os/` for good, campaign seed 4344 cut 43).
    let cache = paths.cache_dir();
    let stale: usize = [
        state.clone(),
        state.join("logqueue"),
        state.join("home"),
        cache.join("swu"),
        crate::osimage::bundle_dir(paths),
        cache,
    ]
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
    let mut agent = Agent::new(paths.clone(), Tuning::from_env());
    let pipeline = match agent.start(&mut lock) {
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
        let (wait, events) = agent.tick();
        crate::watchdog::beat();
        if !healthy_marked {
            // The first loop went round: this binary works; end a self-update's probation
            // and make it the known-good one the boot guard runs from.
            healthy_marked = true;
            mark_healthy(&paths);
        }
        if let Some(p) = &pipeline {
            if events.credentials_changed {
                // Also nudges: shipping paused by a refusal resumes with the new secret.
                p.set_credentials(agent.credentials().cloned());
            }
            if events.reconnected {
                p.nudge();
            }
            p.set_policy(agent.config.as_ref().map(|c| &c.agent.agent.logs));
            if events.polled {
                p.poll_cycle();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_start_moves_the_server_first_and_skips_the_wait_only() {
        assert_eq!(plan(false), ORDER.to_vec());
        let fast = plan(true);
        assert_eq!(fast[0], Step::StartServer);
        assert!(!fast.contains(&Step::FirstContact));
        let rest: Vec<Step> = ORDER
            .into_iter()
            .filter(|s| !matches!(s, Step::StartServer | Step::FirstContact))
            .collect();
        assert_eq!(fast[1..], rest[..]);
    }

    /// #39: provisioning started after the first-contact wait, so a machine that could
    /// reach the app only through a network provisioning joins waited up to 60 s for nothing.
    #[test]
    fn provisioning_starts_before_the_first_contact_wait() {
        let at = |p: &[Step], s: Step| p.iter().position(|x| *x == s).unwrap();
        let slow = plan(false);
        assert!(at(&slow, Step::Provisioning) < at(&slow, Step::FirstContact));
        assert!(at(&slow, Step::LoadRest) < at(&slow, Step::Provisioning));
        let fast = plan(true);
        assert!(at(&fast, Step::LoadRest) < at(&fast, Step::Provisioning));
    }
}
