//! Trust in the directories root runs binaries from and keeps secrets in (issue 40, finding
//! 8): the state directory (`bin/`, `cache/`, svc-server's `home/`) and the credentials
//! directory, and the files root runs or reads from them (what `bin/svc-agent`,
//! `bin/svc-agent.stable`, `bin/svc-server` lead to; the credentials file). A directory another user owns, or one they can write, or one below a directory
//! they can write (they could rename it away and put theirs in its place), hands them root:
//! systemd and the agent run `bin/svc-agent` and `bin/svc-server` from there as root.
//!
//! The rule, for every component of the path (the path as given and the path it resolves
//! to, symbolic links followed): owned by root or by this process's user; not writable by
//! group or others, except a parent with the sticky bit that root owns (`/tmp`: nobody else
//! may rename what is in it). The directories themselves (and the state directory's
//! `bin/`, `cache/`, `home/`) may not be sticky-writable either. At start (`Repair`) a missing
//! directory is made 0700, and group and other write are taken off one this process's user
//! owns (the agent made it, or an older install did); anything else is refused with the
//! path, its owner and its mode, and fixed by nobody but an administrator. `doctor`
//! (`Check`) reports the same and changes nothing.
use crate::paths::Paths;
use std::fmt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// Check only (`doctor`), or also make missing directories and fix the modes of ours
/// (start-up, `check-dirs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Check,
    Repair,
}

/// Why a directory is not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Untrusted {
    /// Owned by a user other than root (or this process's user).
    Owner { path: PathBuf, uid: u32, mode: u32 },
    /// Group or others may write it (and it is not ours to fix, or this is a check).
    Writable { path: PathBuf, uid: u32, mode: u32 },
    /// Not a directory.
    NotDirectory { path: PathBuf },
    /// It could not be examined or made.
    Io { path: PathBuf, error: String },
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const RUNS: &str = "svc-agent runs nothing from it and keeps nothing in it";
        match self {
            Untrusted::Owner { path, uid, mode } => write!(
                f,
                "{} is owned by uid {uid} (mode {mode:04o}): it must be owned by root and \
                 writable by no one else; {RUNS} (check its contents, then chown root:root \
                 and chmod go-w)",
                path.display()
            ),
            Untrusted::Writable { path, uid, mode } => write!(
                f,
                "{} (owner uid {uid}, mode {mode:04o}) can be written by group or others: \
                 another user could replace what root runs from it; {RUNS} (check its \
                 contents, then chmod go-w)",
                path.display()
            ),
            Untrusted::NotDirectory { path } => {
                write!(f, "{} is not a directory; {RUNS}", path.display())
            }
            Untrusted::Io { path, error } => {
                write!(f, "{}: {error}; {RUNS}", path.display())
            }
        }
    }
}

/// The directories checked: the state directory and its `bin/`, `cache/` and `home/`, and
/// the credentials directory. The first and the last are made when missing.
fn targets(paths: &Paths) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let state = paths.state_dir();
    let made = vec![
        state.clone(),
        paths.device(paths.credentials_dir_device_path()),
    ];
    let inner = ["bin", "cache", "home"]
        .iter()
        .map(|d| state.join(d))
        .collect();
    (made, inner)
}

/// Checks (and with `Repair`, makes and fixes) the state and credentials directories.
/// Returns what was fixed (for a warning); the first problem otherwise.
pub(crate) fn secure(paths: &Paths, mode: Mode) -> Result<Vec<String>, Untrusted> {
    let me = crate::sys::euid();
    let mut fixed = Vec::new();
    let (made, inner) = targets(paths);
    for dir in &made {
        if mode == Mode::Repair {
            // One that cannot be made (a read-only mount) is not a question of trust: the
            // command that needs it says why it cannot go on.
            let _ = make_0700(dir);
        }
        if std::fs::symlink_metadata(dir).is_ok() {
            check_dir(dir, me, mode, &mut fixed)?;
        }
    }
    for dir in &inner {
        if std::fs::symlink_metadata(dir).is_ok() {
            check_dir(dir, me, mode, &mut fixed)?;
        }
    }
    // What root runs and reads from there, where each link leads (a dangling link is the
    // seed's or the update engine's business, not a question of trust).
    let files = ["svc-agent", "svc-agent.stable", "svc-server"]
        .iter()
        .map(|n| paths.bin_link(n))
        .chain([paths.credentials()]);
    for file in files {
        if let Ok(real) = std::fs::canonicalize(&file) {
            check_node(&real, me, mode, &mut fixed, false)?;
        }
    }
    Ok(fixed)
}

/// `secure` with `Repair`, as every command that runs or installs binaries or keeps
/// secrets there uses it (`run`, `check-dirs`, `install`, `seed`, `provision`): what was fixed is logged as a warning, a
/// directory not trusted as an error; `false` then.
pub(crate) fn trusted_or_logged(paths: &Paths, cmd: &str) -> bool {
    match secure(paths, Mode::Repair) {
        Ok(fixed) => {
            for f in fixed {
                crate::warn!("agent", "{cmd}: {f}");
            }
            true
        }
        Err(e) => {
            crate::error!("agent", "{cmd}: {e}");
            false
        }
    }
}

/// Makes `dir` 0700 when missing (its parents as the umask says, like `mkdir -p`).
fn make_0700(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if std::fs::symlink_metadata(dir).is_ok() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        // Another process made it meanwhile: judged like any that existed.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    }
}

/// `dir` itself (no group/other write; ours may be fixed) below trusted parents, both as
/// written and as resolved.
fn check_dir(dir: &Path, me: u32, mode: Mode, fixed: &mut Vec<String>) -> Result<(), Untrusted> {
    check_node(dir, me, mode, fixed, true)
}

/// A directory (`dir`) or a file, by the same rule.
fn check_node(
    path: &Path,
    me: u32,
    mode: Mode,
    fixed: &mut Vec<String>,
    dir: bool,
) -> Result<(), Untrusted> {
    let io = |p: &Path, e: std::io::Error| Untrusted::Io {
        path: p.to_path_buf(),
        error: e.to_string(),
    };
    check_parents(path, me)?;
    let real = std::fs::canonicalize(path).map_err(|e| io(path, e))?;
    if real != path {
        check_parents(&real, me)?;
    }
    let md = std::fs::metadata(&real).map_err(|e| io(&real, e))?;
    if dir && !md.is_dir() {
        return Err(Untrusted::NotDirectory { path: real });
    }
    let (uid, bits) = (md.uid(), md.mode() & 0o7777);
    if uid != 0 && uid != me {
        return Err(Untrusted::Owner {
            path: real,
            uid,
            mode: bits,
        });
    }
    if bits & 0o022 != 0 {
        if mode == Mode::Check {
            return Err(Untrusted::Writable {
                path: real,
                uid,
                mode: bits,
            });
        }
        let new = bits & !0o022;
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(new))
            .map_err(|e| io(&real, e))?;
        fixed.push(format!(
            "{}: group or others could write it (mode {bits:04o}); made {new:04o}",
            real.display()
        ));
    }
    Ok(())
}

/// Every parent of `path` (not `path` itself), from `/` down, as written (a symbolic link
/// among them is judged by the directory that holds it, then by what it resolves to).
fn check_parents(path: &Path, me: u32) -> Result<(), Untrusted> {
    let mut at = PathBuf::new();
    let parents: Vec<Component> = match path.parent() {
        Some(p) => p.components().collect(),
        None => return Ok(()),
    };
    for c in parents {
        at.push(c);
        let md = std::fs::symlink_metadata(&at).map_err(|e| Untrusted::Io {
            path: at.clone(),
            error: e.to_string(),
        })?;
        let md = if md.file_type().is_symlink() {
            let real = std::fs::canonicalize(&at).map_err(|e| Untrusted::Io {
                path: at.clone(),
                error: e.to_string(),
            })?;
            check_parents(&real.join("x"), me)?;
            std::fs::metadata(&real).map_err(|e| Untrusted::Io {
                path: real.clone(),
                error: e.to_string(),
            })?
        } else {
            md
        };
        let (uid, bits) = (md.uid(), md.mode() & 0o7777);
        if uid != 0 && uid != me {
            return Err(Untrusted::Owner {
                path: at,
                uid,
                mode: bits,
            });
        }
        // A sticky directory root owns (`/tmp`): others may add entries but not rename or
        // remove ours.
        let sticky_root = bits & 0o1000 != 0 && uid == 0;
        if bits & 0o022 != 0 && !sticky_root {
            return Err(Untrusted::Writable {
                path: at,
                uid,
                mode: bits,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("svc-dirtrust-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn mode_of(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_binary_or_credentials_file_another_user_owns_is_refused() {
        if crate::sys::euid() != 0 {
            return; // chown to another uid needs root; tests/it/state_dirs.rs needs it too
        }
        let root = scratch("files");
        let paths = Paths::new(&root);
        secure(&paths, Mode::Repair).unwrap();
        std::fs::create_dir_all(paths.cache_dir()).unwrap();
        std::fs::create_dir_all(paths.bin_dir()).unwrap();
        let build = paths.cache_dir().join("svc-server-1.0.0");
        std::fs::write(&build, "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("../cache/svc-server-1.0.0", paths.bin_link("svc-server"))
            .unwrap();
        assert_eq!(secure(&paths, Mode::Check), Ok(vec![]));
        std::os::unix::fs::chown(&build, Some(12345), None).unwrap();
        let e = secure(&paths, Mode::Repair).unwrap_err();
        assert!(
            matches!(&e, Untrusted::Owner { path, uid: 12345, .. } if *path == build),
            "{e}"
        );
        std::os::unix::fs::chown(&build, Some(0), None).unwrap();
        std::fs::write(paths.credentials(), "{}").unwrap();
        std::os::unix::fs::chown(paths.credentials(), Some(12345), None).unwrap();
        let e = secure(&paths, Mode::Check).unwrap_err();
        assert!(e.to_string().contains("is owned by uid 12345"), "{e}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn missing_directories_are_made_0700_and_ours_lose_group_and_other_write() {
        let root = scratch("repair");
        let paths = Paths::new(&root)
            .with_locations(Some("/data/svc"), Some("/data/etc"))
            .unwrap();
        assert_eq!(
            secure(&paths, Mode::Check),
            Ok(vec![]),
            "missing: nothing yet"
        );
        assert_eq!(secure(&paths, Mode::Repair), Ok(vec![]));
        assert_eq!(mode_of(&root.join("data/svc")), 0o700);
        assert_eq!(mode_of(&root.join("data/etc")), 0o700);
        let bin = root.join("data/svc/bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = secure(&paths, Mode::Check).unwrap_err();
        assert!(matches!(e, Untrusted::Writable { mode: 0o1777, .. }), "{e}");
        assert_eq!(mode_of(&bin), 0o1777, "a check changes nothing");
        let fixed = secure(&paths, Mode::Repair).unwrap();
        assert_eq!(fixed.len(), 1, "{fixed:?}");
        assert_eq!(mode_of(&bin), 0o1755);
        // A parent others may write (not sticky) is never ours to fix.
        let data = root.join("data");
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = secure(&paths, Mode::Repair).unwrap_err();
        assert_eq!(
            e,
            Untrusted::Writable {
                path: data.clone(),
                uid: crate::sys::euid(),
                mode: 0o777
            }
        );
        assert!(e.to_string().contains("mode 0777"), "{e}");
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A symbolic link to a directory below a writable one is judged where it leads.
        let open = root.join("open");
        std::fs::create_dir_all(open.join("svc")).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::remove_dir_all(root.join("data/svc")).unwrap();
        std::os::unix::fs::symlink(open.join("svc"), root.join("data/svc")).unwrap();
        let e = secure(&paths, Mode::Repair).unwrap_err();
        assert!(
            matches!(&e, Untrusted::Writable { path, .. } if *path == open),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
