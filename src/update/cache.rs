//! Cache hygiene: keep current, previous and target of each name (and the `.part` of a
//! target, for resuming); remove the rest; then, while over the size cap, drop what is least
//! needed. Never removes a link target or the executable of a running process.
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::activate::link_target;
use super::record::VersionRecords;
use super::rollback::AGENT_STABLE_LINK;
use super::{UpdateError, NAMES, SUB};
use crate::paths::Paths;

/// What [`clean`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanReport {
    pub removed: Vec<PathBuf>,
    pub kept_bytes: u64,
}

/// Executables of running processes that live in `dir` (from `/proc/*/exe`).
fn running_in(dir: &Path) -> HashSet<PathBuf> {
    let mut out = HashSet::new();
    if let Ok(rd) = fs::read_dir("/proc") {
        for e in rd.flatten() {
            if let Ok(t) = fs::read_link(e.path().join("exe")) {
                if t.starts_with(dir) {
                    out.insert(t);
                }
            }
        }
    }
    out
}

pub fn clean(
    paths: &Paths,
    records: &VersionRecords,
    cap: u64,
) -> Result<CleanReport, UpdateError> {
    let cache = paths.cache_dir();
    let canon = fs::canonicalize(&cache).unwrap_or_else(|_| cache.clone());
    // Untouchable: what links point at and what runs.
    let mut pinned: HashSet<PathBuf> = running_in(&canon);
    for link in NAMES.iter().copied().chain([AGENT_STABLE_LINK]) {
        if let Some(t) = link_target(paths, link) {
            pinned.insert(fs::canonicalize(&t).unwrap_or(t));
        }
    }
    // Wanted, in the order they go when over the cap (last goes first).
    let mut wanted: Vec<PathBuf> = Vec::new();
    for name in NAMES {
        let Some(r) = records.get(name) else { continue };
        for v in [&r.current, &r.previous, &r.target].into_iter().flatten() {
            wanted.push(canon.join(format!("{name}-{v}")));
        }
    }
    for name in NAMES {
        let Some(r) = records.get(name) else { continue };
        // A partial download and its sidecar, for resuming; a sidecar whose `.part` is gone
        // (a power cut between the part's rename into the cache and the sidecar's removal)
        // resumes nothing and goes.
        // A delta's download (update::delta) resumes like the target's own.
        let parts = r
            .target
            .iter()
            .flat_map(|t| [format!("{name}-{t}.part"), format!("{name}-{t}.delta.part")]);
        for part in parts.chain([format!("{name}-pin.part")]) {
            let part = canon.join(part);
            if part.is_file() {
                wanted.push(PathBuf::from(format!("{}.json", part.display())));
                wanted.push(part);
            }
        }
    }
    let own_temp = crate::fsutil::own_temp_marker();
    let mut report = CleanReport::default();
    let mut kept: Vec<(PathBuf, u64)> = Vec::new();
    let rd = match fs::read_dir(&canon) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => {
            return Err(UpdateError::Io {
                context: format!("listing {}", canon.display()),
                err: e,
            })
        }
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(meta) = fs::symlink_metadata(&p) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        if name.contains(&own_temp) {
            continue;
        }
        if pinned.contains(&p) || wanted.contains(&p) {
            kept.push((p, meta.len()));
        } else if remove(&p) {
            report.removed.push(p);
        }
    }
    let mut total: u64 = kept.iter().map(|(_, s)| s).sum();
    if total > cap {
        // Least needed first: partial downloads, then target, then previous, never pinned.
        let rank = |p: &Path| -> usize {
            let s = p.to_string_lossy();
            if s.ends_with(".part") || s.ends_with(".part.json") {
                0
            } else {
                wanted
                    .iter()
                    .rposition(|w| w == p)
                    .map_or(0, |i| wanted.len() - i)
            }
        };
        let mut candidates: Vec<_> = kept.iter().filter(|(p, _)| !pinned.contains(p)).collect();
        candidates.sort_by_key(|(p, _)| rank(p));
        for (p, size) in candidates {
            if total <= cap {
                break;
            }
            crate::warn!(
                SUB,
                "cache over its cap of {cap} bytes: removing {}",
                p.display()
            );
            if remove(p) {
                total -= size;
                report.removed.push(p.clone());
            }
        }
    }
    report.kept_bytes = total;
    Ok(report)
}

/// Removes download sidecars (`<file>.part.json`) whose `.part` is gone: a power cut between
/// the complete download's rename into the cache and the sidecar's removal left one, and it
/// resumes nothing. [`clean`] does the same at the next activation; the boot guard calls this
/// before each agent start, so that a new agent that never activates anything does not keep
/// it (found by the power-cut campaign). Returns what it removed.
pub(crate) fn remove_orphan_sidecars(paths: &Paths) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for e in fs::read_dir(paths.cache_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(part) = name.strip_suffix(".json").filter(|n| n.ends_with(".part")) else {
            continue;
        };
        if !p.with_file_name(part).exists() && remove(&p) {
            removed.push(p);
        }
    }
    removed
}

fn remove(p: &Path) -> bool {
    match fs::remove_file(p) {
        Ok(()) => {
            crate::info!(SUB, "cache: removed {}", p.display());
            true
        }
        Err(e) => {
            crate::warn!(SUB, "cache: cannot remove {}: {e}", p.display());
            false
        }
    }
}
