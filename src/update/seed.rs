//! Seeding the state directory from the agent a read-only image ships (docs/updates.md "A/B
//! system updates"). Run before every start on such an image (`svc-agent seed`, the unit's
//! drop-in, from the image's own binary), under the state lock:
//!
//! - no agent in the state directory (first boot, an empty data partition): the image's
//!   binary becomes the first current version;
//! - the image brings a newer agent (the other A/B slot, with a newer image): it becomes the
//!   current version on probation, like a self-update, with the state's version as the one
//!   to roll back to;
//! - the state's agent is newer (a self-update since the image was built, or a switch back
//!   to an older slot): it keeps running. Never a downgrade: the state it wrote stays its own.
//!   Versions that cannot be ordered (a pinned URL's `pin+…`) count as newer;
//! - the image's version was rolled back on this machine (marked bad): not activated again.
use std::path::Path;

use super::{
    activate, io_err, record_activation, rollback, StateLock, UpdateError, VersionRecords,
};
use crate::paths::Paths;

const NAME: &str = "svc-agent";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedOutcome {
    /// The state directory had no agent: the image's became the current one.
    Seeded { version: String },
    /// The image's agent is newer than the state's: now current, on probation.
    Upgraded { from: String, to: String },
    /// The state's agent is the image's version.
    Unchanged { version: String },
    /// The state's agent is newer than (or not comparable with) the image's: it stays.
    KeptNewer { image: String, running: String },
    /// The image's version was rolled back here before: the state's agent stays.
    ImageMarkedBad { image: String, running: String },
}

/// `true` when `a` is a newer release than `b` (semantic versions; build metadata ignored).
/// Either not a semantic version: `false` (never a move we cannot justify).
fn newer(a: &str, b: &str) -> bool {
    match (semver::Version::parse(a), semver::Version::parse(b)) {
        (Ok(a), Ok(b)) => a.cmp_precedence(&b) == std::cmp::Ordering::Greater,
        _ => false,
    }
}

/// Makes the image's agent (`image_exe`, version `image_version`) current when the state
/// directory has none or an older one. Idempotent: an unchanged machine costs a lock, a
/// record read and a link read.
pub fn seed_from_image(
    paths: &Paths,
    image_exe: &Path,
    image_version: &str,
) -> Result<SeedOutcome, UpdateError> {
    let state = paths.state_dir();
    std::fs::create_dir_all(&state).map_err(io_err(format!("creating {}", state.display())))?;
    let held = StateLock::acquire(paths)?;
    let mut records = VersionRecords::load(paths)?;
    let linked = activate::linked_version(paths, NAME)
        .filter(|_| activate::link_target(paths, NAME).is_some_and(|t| t.is_file()));
    let outcome = match linked {
        Some(running) if running == image_version => {
            return Ok(SeedOutcome::Unchanged { version: running })
        }
        Some(running)
            if records
                .get(NAME)
                .is_some_and(|r| r.bad.iter().any(|b| b == image_version)) =>
        {
            return Ok(SeedOutcome::ImageMarkedBad {
                image: image_version.to_string(),
                running,
            })
        }
        Some(running) if !newer(image_version, &running) => {
            return Ok(SeedOutcome::KeptNewer {
                image: image_version.to_string(),
                running,
            })
        }
        Some(running) => SeedOutcome::Upgraded {
            from: running,
            to: image_version.to_string(),
        },
        None => SeedOutcome::Seeded {
            version: image_version.to_string(),
        },
    };
    let cached = paths.cache_dir().join(format!("{NAME}-{image_version}"));
    copy_into_cache(image_exe, &cached)?;
    if matches!(outcome, SeedOutcome::Upgraded { .. }) {
        // Before the swap, as an update does: the boot guard rolls a failing image agent
        // back to the state's version after its starts are used up.
        rollback::start_agent_probation(paths, image_version)?;
    }
    activate::point_link(paths, NAME, &cached, false)?;
    let linked_before = match &outcome {
        SeedOutcome::Upgraded { from, .. } => Some(from.as_str()),
        _ => None,
    };
    record_activation(
        &mut records,
        super::Kind::Agent,
        image_version,
        linked_before,
    );
    records.entry(NAME).target = Some(image_version.to_string());
    records.save(paths, &held)?;
    Ok(outcome)
}

/// The image's binary at `cached` (0755, durable); nothing when the bytes are already there.
fn copy_into_cache(image_exe: &Path, cached: &Path) -> Result<(), UpdateError> {
    let bytes =
        std::fs::read(image_exe).map_err(io_err(format!("reading {}", image_exe.display())))?;
    if std::fs::read(cached).ok().as_deref() == Some(&bytes[..]) {
        return Ok(());
    }
    if let Some(dir) = cached.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    }
    crate::fsutil::atomic_write(cached, &bytes, 0o755)
        .map_err(io_err(format!("writing {}", cached.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_never_justifies_a_move_it_cannot_prove() {
        assert!(newer("0.2.0", "0.1.9"));
        assert!(!newer("0.1.0", "0.2.0"));
        assert!(!newer("0.2.0", "0.2.0+0123456789ab"));
        assert!(!newer("0.2.0", "pin+0123456789ab"));
        assert!(newer("1.0.0", "1.0.0-rc.1"));
    }
}
