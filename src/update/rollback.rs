//! Going back: `rollback(name)`, the svc-server probation rule, and the agent boot guard.
//!
//! The agent cannot judge itself: a new agent that crashes at start never runs any code
//! of ours. So the known-good agent binary (`bin/svc-agent.stable`, moved forward only by
//! [`mark_agent_healthy`]) runs [`agent_boot_guard`] before every start of `bin/svc-agent`
//! (systemd `ExecStartPre`; see `docs/updates.md`). The guard counts starts of a new version
//! in `state_dir/agent-boot.json`; the new version clears the file after its first good
//! loop; a version that used up [`AGENT_MAX_STARTS`] starts without doing so is rolled back.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::activate::{linked_version, point_link, swap_link};
use super::record::{StateLock, VersionRecords};
use super::{io_err, Kind, UpdateError, SUB};
use crate::paths::Paths;

/// Starts a new agent version gets to reach its first healthy loop.
pub const AGENT_MAX_STARTS: u32 = 3;
/// The link to the last agent version that proved healthy.
pub const AGENT_STABLE_LINK: &str = "svc-agent.stable";

/// Re-points `bin/<name>` at the previous version and marks the current one bad (not
/// retried until the app offers a different version). Returns `(from, to)`.
pub fn rollback(paths: &Paths, kind: Kind) -> Result<(Option<String>, String), UpdateError> {
    rollback_held(paths, kind, &StateLock::acquire(paths)?)
}

fn rollback_held(
    paths: &Paths,
    kind: Kind,
    held: &StateLock,
) -> Result<(Option<String>, String), UpdateError> {
    let name = kind.name();
    let mut records = VersionRecords::load(paths)?;
    let linked = linked_version(paths, name);
    let rec = records.entry(name);
    let from = linked.or_else(|| rec.current.clone());
    let to = rec
        .previous
        .clone()
        .filter(|p| Some(p) != from.as_ref())
        .ok_or_else(|| UpdateError::NoPrevious(name.to_string()))?;
    let file = paths.cache_dir().join(format!("{name}-{to}"));
    if !file.is_file() {
        return Err(UpdateError::NoPrevious(format!(
            "{name}: {} is missing",
            file.display()
        )));
    }
    swap_link(paths, name, &file)?;
    if let Some(f) = &from {
        if !rec.bad.contains(f) {
            rec.bad.push(f.clone());
        }
    }
    rec.current = Some(to.clone());
    rec.previous = None;
    rec.probation = None;
    // The build rolled back is not kept as the target (issue 46): the cleanup below drops
    // its file, so one copy of each build wanted stays on disk.
    if rec.target.is_some() && rec.target == from {
        rec.target = None;
    }
    records.save(paths, held)?;
    match kind {
        Kind::Agent => {
            clear_boot(paths)?;
            point_link(paths, AGENT_STABLE_LINK, &file, false)?;
        }
        Kind::Server => {}
    }
    if let Err(e) = super::cache::clean(paths, &records, super::UpdateOptions::default().cache_cap)
    {
        crate::warn!(SUB, "cache cleanup after the rollback of {name}: {e}");
    }
    crate::warn!(
        SUB,
        "{name} rolled back from {} to {to}; {} marked bad",
        from.as_deref().unwrap_or("?"),
        from.as_deref().unwrap_or("?")
    );
    Ok((from, to))
}

/// When svc-server counts as good after an activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbationPolicy {
    /// How long after activation crashes count against the new version.
    pub window: Duration,
    /// Crashes within the window that condemn it.
    pub max_crashes: usize,
}

impl Default for ProbationPolicy {
    fn default() -> Self {
        ProbationPolicy {
            window: Duration::from_secs(600),
            max_crashes: 3,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbationVerdict {
    /// Still inside the window with fewer crashes than the limit.
    Watching,
    /// The window passed: the version is good.
    Passed,
    /// Too many crashes inside the window: roll back.
    RollBack,
}

/// Pure rule for svc-server after an activation. Monotonic instants, because a device
/// without a clock may step its wall clock by decades in the first minutes.
pub fn probation_verdict(
    activated_at: Instant,
    crashes: &[Instant],
    now: Instant,
    policy: ProbationPolicy,
) -> ProbationVerdict {
    let end = activated_at + policy.window;
    let counted = crashes
        .iter()
        .filter(|&&t| t >= activated_at && t < end)
        .count();
    if counted >= policy.max_crashes {
        ProbationVerdict::RollBack
    } else if now >= end {
        ProbationVerdict::Passed
    } else {
        ProbationVerdict::Watching
    }
}

/// svc-server `version` is on probation and linked: a power cut between the link swap and
/// the record's save left `current` on the old build. Completes the activation's record in
/// `records` (loaded under `held`) and saves it (found by the power-cut campaign).
pub(super) fn complete_server_record(
    paths: &Paths,
    records: &mut VersionRecords,
    version: &str,
    held: &StateLock,
) -> Result<(), UpdateError> {
    let rec = records.entry(Kind::Server.name());
    if rec.probation.as_deref() != Some(version) || rec.current.as_deref() == Some(version) {
        return Ok(());
    }
    let before = rec.current.clone();
    super::record_activation(records, Kind::Server, version, before.as_deref());
    records.entry(Kind::Server.name()).target = Some(version.to_string());
    records.save(paths, held)?;
    crate::info!(
        SUB,
        "svc-server {version}: its activation's record completed (previous {})",
        before.as_deref().unwrap_or("none")
    );
    Ok(())
}

/// The agent's boot record names the linked `version`: a power cut between the link swap and
/// the record's save left `current` on the agent before it. Completes the activation's
/// record, so that the record names the running build and a rollback goes to the one before
/// it (found by the power-cut campaign).
fn complete_agent_record(
    paths: &Paths,
    version: &str,
    held: &StateLock,
) -> Result<(), UpdateError> {
    let mut records = VersionRecords::load(paths)?;
    let current = records.entry(Kind::Agent.name()).current.clone();
    if current.as_deref() == Some(version) {
        return Ok(());
    }
    // An agent installed without the engine has no record yet: the build before the swap
    // is then the known-good one this guard runs from.
    let before = current.or_else(|| {
        let t = super::activate::link_target(paths, AGENT_STABLE_LINK)?;
        let file = t.file_name()?.to_string_lossy().into_owned();
        file.strip_prefix("svc-agent-")
            .filter(|v| !v.is_empty() && *v != version)
            .map(String::from)
    });
    super::record_activation(&mut records, Kind::Agent, version, before.as_deref());
    records.entry(Kind::Agent.name()).target = Some(version.to_string());
    records.save(paths, held)?;
    crate::info!(
        SUB,
        "svc-agent {version}: its activation's record completed (previous {})",
        before.as_deref().unwrap_or("none")
    );
    Ok(())
}

/// svc-server `version` passed its probation: the record stops naming it.
pub fn end_server_probation(paths: &Paths, version: &str) -> Result<(), UpdateError> {
    let held = StateLock::acquire(paths)?;
    let mut records = VersionRecords::load(paths)?;
    let rec = records.entry(Kind::Server.name());
    if rec.probation.as_deref() == Some(version) {
        rec.probation = None;
        records.save(paths, &held)?;
    }
    Ok(())
}

/// `state_dir/agent-boot.json`: present only while a new agent version is on probation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AgentBoot {
    pub version: String,
    pub starts: u32,
}

fn boot_path(paths: &Paths) -> PathBuf {
    paths.state_dir().join("agent-boot.json")
}

pub fn load_boot(paths: &Paths) -> Option<AgentBoot> {
    let bytes = crate::fsutil::read_regular(&boot_path(paths), crate::fsutil::STATE_FILE_LIMIT);
    serde_json::from_slice(&bytes.ok()?).ok()
}

fn save_boot(paths: &Paths, b: &AgentBoot) -> Result<(), UpdateError> {
    let p = boot_path(paths);
    let bytes =
        serde_json::to_vec(b).map_err(|e| UpdateError::Record(format!("agent boot: {e}")))?;
    crate::fsutil::atomic_write(&p, &bytes, 0o644)
        .map_err(io_err(format!("writing {}", p.display())))
}

fn clear_boot(paths: &Paths) -> Result<(), UpdateError> {
    let p = boot_path(paths);
    match std::fs::remove_file(&p) {
        Ok(()) => crate::fsutil::fsync_dir(&paths.state_dir())
            .map_err(io_err(format!("fsync {}", paths.state_dir().display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(UpdateError::Io {
            context: format!("removing {}", p.display()),
            err: e,
        }),
    }
}

/// Puts a freshly activated agent version on probation (zero starts so far).
pub(crate) fn start_agent_probation(paths: &Paths, version: &str) -> Result<(), UpdateError> {
    save_boot(
        paths,
        &AgentBoot {
            version: version.to_string(),
            starts: 0,
        },
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardOutcome {
    /// No version on probation: start `bin/svc-agent` as usual.
    Stable,
    /// Start number `start` (1-based) of a version on probation.
    Probation { version: String, start: u32 },
    /// The version used up its starts; the link now points at `to`.
    RolledBack { from: String, to: String },
}

/// Runs before every start of `bin/svc-agent`, from the known-good binary.
pub fn agent_boot_guard(paths: &Paths) -> Result<GuardOutcome, UpdateError> {
    let held = StateLock::acquire(paths)?;
    // A power cut during an earlier guard's (or agent's) write left its temp; a new agent
    // that never gets going would never sweep it, so the guard does it before each start.
    crate::fsutil::remove_stale_temps(&paths.state_dir());
    super::cache::remove_orphan_sidecars(paths);
    let Some(mut boot) = load_boot(paths) else {
        return Ok(GuardOutcome::Stable);
    };
    if linked_version(paths, Kind::Agent.name()).as_deref() != Some(boot.version.as_str()) {
        // The link moved on (crash before the swap, or a manual change): nothing to judge.
        clear_boot(paths)?;
        return Ok(GuardOutcome::Stable);
    }
    complete_agent_record(paths, &boot.version, &held)?;
    if boot.starts >= AGENT_MAX_STARTS {
        crate::error!(
            SUB,
            "svc-agent {} started {} times without a healthy loop; rolling back",
            boot.version,
            boot.starts
        );
        return match rollback_held(paths, Kind::Agent, &held) {
            Ok((_, to)) => Ok(GuardOutcome::RolledBack {
                from: boot.version,
                to,
            }),
            Err(UpdateError::NoPrevious(m)) => {
                // First install: nothing to go back to. Stop counting; keep what we have.
                crate::error!(SUB, "cannot roll back svc-agent {}: {m}", boot.version);
                clear_boot(paths)?;
                Ok(GuardOutcome::Stable)
            }
            Err(e) => Err(e),
        };
    }
    boot.starts += 1;
    save_boot(paths, &boot)?;
    crate::info!(
        SUB,
        "svc-agent {} on probation: start {} of {AGENT_MAX_STARTS}",
        boot.version,
        boot.starts
    );
    Ok(GuardOutcome::Probation {
        version: boot.version,
        start: boot.starts,
    })
}

/// Called by the running agent (`version` = its own) after its first successful loop:
/// ends the probation and makes this version the stable one. Idempotent and cheap.
pub fn mark_agent_healthy(paths: &Paths, version: &str) -> Result<(), UpdateError> {
    let _held = StateLock::acquire(paths)?;
    if let Some(b) = load_boot(paths) {
        if b.version == version {
            clear_boot(paths)?;
            crate::info!(SUB, "svc-agent {version} healthy; probation over");
        }
    }
    let file = paths.cache_dir().join(format!("svc-agent-{version}"));
    let stable = paths.bin_link(AGENT_STABLE_LINK);
    if file.is_file() && std::fs::canonicalize(&stable).ok() != std::fs::canonicalize(&file).ok() {
        point_link(paths, AGENT_STABLE_LINK, &file, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probation_rule() {
        let p = ProbationPolicy {
            window: Duration::from_secs(600),
            max_crashes: 3,
        };
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        use ProbationVerdict::*;
        assert_eq!(probation_verdict(t0, &[], s(10), p), Watching);
        assert_eq!(probation_verdict(t0, &[s(1), s(2)], s(30), p), Watching);
        assert_eq!(
            probation_verdict(t0, &[s(1), s(2), s(3)], s(30), p),
            RollBack
        );
        // Crashes after the window do not count against the new version.
        assert_eq!(
            probation_verdict(t0, &[s(1), s(2), s(700)], s(800), p),
            Passed
        );
        assert_eq!(probation_verdict(t0, &[], s(600), p), Passed);
        // Crashes of the old version, before activation, do not count.
        let later = s(100);
        assert_eq!(
            probation_verdict(later, &[s(1), s(2), s(3)], s(200), p),
            Watching
        );
    }
}
