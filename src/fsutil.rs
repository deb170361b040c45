//! Crash-safe file writes: temp file, fsync, rename, fsync of the directory.
//!
//! Every file the agent writes goes through [`atomic_write`], so that a power cut at any
//! instant leaves either the old or the new content, never a torn file. Append-only JSON-lines
//! files (the `file://` log sink) go through [`append_lines`] instead.
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `data` to `path` atomically with the given permission bits (e.g. 0o600).
pub fn atomic_write(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    let dir = parent_dir(path);
    fs::create_dir_all(&dir)?;
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        // The mode passed to open is filtered by the umask; set it exactly.
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        f.write_all(data)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fsync_dir(&dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Renames `from` over `to` and makes the rename durable.
pub(crate) fn durable_rename(from: &Path, to: &Path) -> io::Result<()> {
    fs::rename(from, to)?;
    fsync_dir(&parent_dir(to))
}

/// fsyncs a directory so that a rename or create inside it survives a power cut.
pub(crate) fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A fresh temp name next to `path` (same directory, so rename is atomic):
/// `.<name>.tmp.<pid>.<n>`, with `n` counting up per process. Unique per call, so two
/// threads writing the same file never share (and truncate, or rename away) one temp file.
/// The `.tmp.<pid>.` part lets cleanups tell this process's temps from a crashed one's.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    parent_dir(path).join(format!(".{name}{}{n}", own_temp_marker()))
}

/// The part of every temp name this process makes: `.tmp.<pid>.`.
pub(crate) fn own_temp_marker() -> String {
    format!(".tmp.{}.", std::process::id())
}

/// Removes the temp files [`atomic_write`] left in `dir` (not below it) when its process
/// died mid-write: `.<name>.tmp.<pid>.<n>` of a pid that no longer runs. A kill or a power
/// cut during a write leaves one, and every boot brings new pids, so without this they pile
/// up. A running process's temps (ours, or a concurrent writer's) are left alone. Returns
/// how many went.
pub(crate) fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(rd) = fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = temp_pid(&name) else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if e.file_type().is_ok_and(|t| t.is_file()) && fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        let _ = fsync_dir(dir);
    }
    removed
}

/// The pid in a temp name made by [`temp_path`] (`.<name>.tmp.<pid>.<n>`), if it is one.
fn temp_pid(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let (_, rest) = name
        .rsplit_once(".tmp.")
        .filter(|(head, _)| head.len() > 1)?;
    let (pid, n) = rest.split_once('.')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// An exclusive `flock` on a file, released on drop. A lock belongs to the open file
/// description, so two threads of one process that each acquire it exclude each other just
/// as two processes do.
pub(crate) struct FileLock {
    file: File,
}

impl FileLock {
    /// Waits for the lock.
    pub(crate) fn exclusive(path: &Path) -> io::Result<FileLock> {
        Self::lock(path, libc::LOCK_EX)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::WouldBlock, "flock refused a wait"))
    }

    /// `None` when another holder has it.
    pub(crate) fn try_exclusive(path: &Path) -> io::Result<Option<FileLock>> {
        Self::lock(path, libc::LOCK_EX | libc::LOCK_NB)
    }

    /// The locked file (the instance lock writes its holder's pid into it).
    pub(crate) fn file(&mut self) -> &mut File {
        &mut self.file
    }

    fn lock(path: &Path, op: libc::c_int) -> io::Result<Option<FileLock>> {
        use std::os::unix::io::AsRawFd;
        let open = || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path)
        };
        // The folder is made only when missing: the agent takes its lock first thing at
        // every start (fast start, BENCHMARKS.md), where it nearly always exists.
        let file = match open() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(parent_dir(path))?;
                open()?
            }
            r => r?,
        };
        match crate::sys::flock(file.as_raw_fd(), op) {
            Ok(()) => Ok(Some(FileLock { file })),
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Appends `lines` (complete lines, each ending in `\n`) to a JSON-lines file with one
/// `write` and then `fdatasync`; the caller acknowledges only after this returns.
///
/// Not `atomic_write`: the file only grows. A last line torn by a crash mid-write (it was
/// never acknowledged, so it is sent again) is cut off before the append, so the file stays
/// complete lines.
pub(crate) fn append_lines(path: &Path, lines: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)?;
    let len = f.seek(SeekFrom::End(0))?;
    let end = complete_prefix_len(&mut f, len)?;
    if end != len {
        f.set_len(end)?;
        f.seek(SeekFrom::Start(end))?;
    }
    f.write_all(lines)?;
    f.sync_data()
}

/// Length of the file up to and including its last `\n` (the complete lines).
fn complete_prefix_len(f: &mut File, len: u64) -> io::Result<u64> {
    let mut end = len;
    let mut chunk = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut chunk[..n])?;
        if let Some(pos) = chunk[..n].iter().rposition(|&b| b == b'\n') {
            return Ok(start + pos as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn temp_names_are_recognised_with_their_pid() {
        let t = temp_path(Path::new("/x/versions.json"));
        let name = t.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(temp_pid(&name), Some(std::process::id()));
        assert_eq!(temp_pid(".answer.json.tmp.42.7"), Some(42));
        for not in [
            "answer.json.tmp.42.7",
            ".tmp.42.7",
            ".a.tmp.x.7",
            ".a.tmp.42",
            ".a.tmp.42.x",
            ".a.json",
        ] {
            assert_eq!(temp_pid(not), None, "{not}");
        }
    }

    #[test]
    fn a_lock_makes_its_missing_folders_and_excludes_a_second_holder() {
        let dir = std::env::temp_dir().join(format!("svc-fsutil-lock-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let p = dir.join("a/b/agent.lock");
        let held = FileLock::try_exclusive(&p).unwrap();
        assert!(held.is_some(), "the first holder gets it, folders made");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(FileLock::try_exclusive(&p).unwrap().is_none());
        drop(held);
        assert!(FileLock::try_exclusive(&p).unwrap().is_some());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_content_and_mode_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("svc-fsutil-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let p = dir.join("sub/creds.json");
        atomic_write(&p, b"one", 0o600).unwrap();
        atomic_write(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let names: Vec<_> = fs::read_dir(p.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1, "temp file left behind");
        fs::remove_dir_all(&dir).unwrap();
    }
}
