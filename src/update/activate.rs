//! Putting a verified file in place: a durable rename into the cache, then a new symlink
//! at a temp name renamed over `bin/<name>`, so the link is never missing or dangling.
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{crash_point, io_err, UpdateError};
use crate::fsutil;
use crate::paths::Paths;

/// Makes the verified `.part` executable and renames it to `cached`, durably.
pub(crate) fn install_in_cache(part: &Path, cached: &Path) -> Result<(), UpdateError> {
    fs::set_permissions(part, fs::Permissions::from_mode(0o755))
        .map_err(io_err(format!("chmod {}", part.display())))?;
    // The content was fsynced when the download completed; the rename must survive too.
    fsutil::durable_rename(part, cached).map_err(io_err(format!(
        "renaming {} to {}",
        part.display(),
        cached.display()
    )))
}

/// Points `bin/<name>` at `target` atomically: symlink at a temp name, rename over, fsync
/// the directory. Stale temp links of crashed runs are removed first.
pub(crate) fn swap_link(paths: &Paths, name: &str, target: &Path) -> Result<(), UpdateError> {
    point_link(paths, name, target, true)
}

pub(crate) fn point_link(
    paths: &Paths,
    link_name: &str,
    target: &Path,
    crash_points: bool,
) -> Result<(), UpdateError> {
    let bin = paths.bin_dir();
    fs::create_dir_all(&bin).map_err(io_err(format!("creating {}", bin.display())))?;
    remove_stale_temps(&bin, link_name);
    let link = bin.join(link_name);
    let tmp = fsutil::temp_path(&link);
    // Relative (`../cache/<file>`) when the target is in the cache, as `install` makes it:
    // the link stays right when the root file system is mounted elsewhere (an image being
    // built, a rescue system, a test sandbox).
    let relative = match (target.parent(), target.file_name()) {
        (Some(dir), Some(file)) if dir == paths.cache_dir() => {
            Some(Path::new("../cache").join(file))
        }
        _ => None,
    };
    std::os::unix::fs::symlink(relative.as_deref().unwrap_or(target), &tmp)
        .map_err(io_err(format!("creating link {}", tmp.display())))?;
    if crash_points {
        crash_point("link-temp-created");
    }
    if let Err(e) = fs::rename(&tmp, &link) {
        let _ = fs::remove_file(&tmp);
        return Err(UpdateError::Io {
            context: format!("renaming link over {}", link.display()),
            err: e,
        });
    }
    fsutil::fsync_dir(&bin).map_err(io_err(format!("fsync {}", bin.display())))?;
    if crash_points {
        crash_point("link-swapped");
    }
    Ok(())
}

/// Callers hold the state lock, so no temp link of this name is in flight. `.link.` is the
/// name older versions used.
fn remove_stale_temps(bin: &Path, link_name: &str) {
    let prefixes = [format!(".{link_name}.tmp."), format!(".{link_name}.link.")];
    if let Ok(rd) = fs::read_dir(bin) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if prefixes.iter().any(|p| name.starts_with(p)) {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// Where `bin/<link_name>` points, if it is a link.
pub(crate) fn link_target(paths: &Paths, link_name: &str) -> Option<PathBuf> {
    let link = paths.bin_link(link_name);
    let t = fs::read_link(&link).ok()?;
    Some(if t.is_absolute() {
        t
    } else {
        paths.bin_dir().join(t)
    })
}

/// The version `bin/<name>` points at, read from the target's file name
/// (`cache/<name>-<version>`); `None` when absent or not one of ours.
pub(crate) fn linked_version(paths: &Paths, name: &str) -> Option<String> {
    let t = link_target(paths, name)?;
    let file = t.file_name()?.to_string_lossy().into_owned();
    file.strip_prefix(&format!("{name}-"))
        .filter(|v| !v.is_empty())
        .map(String::from)
}
