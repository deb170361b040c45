//! Crash-safe file writes (temp file, fsync, rename, fsync of the directory), and the one
//! way to open a name in a directory someone else may write.
//!
//! Every file the agent writes goes through [`atomic_write`], so that a power cut at any
//! instant leaves either the old or the new content, never a torn file. Append-only JSON-lines
//! files (the `file://` log sink) go through [`append_lines`] instead.
//!
//! A management directory on a USB stick, a share, a data partition: whoever can write there
//! can plant a symbolic link, a FIFO or a hard link under any name we open, or guess our
//! temp names. So every name is opened through [`Dir`], relative to a descriptor of its
//! directory (a component swapped for a link after the check cannot redirect us), with:
//! - `O_NOFOLLOW`: a symbolic link as the last component is refused, never followed; below
//!   a directory someone else writes, [`Dir::sub`] and [`Dir::open_beneath`] refuse links in
//!   every component;
//! - `O_CREAT|O_EXCL` for temp files, under names with 64 random bits ([`temp_name`]): no
//!   planted name is ever opened, and none can be guessed;
//! - `O_NONBLOCK`, then `fstat`: a FIFO or a device cannot block the open, and anything but
//!   a regular file with one link is refused before a byte is read or written (a hard link
//!   to another file would be written in place by an append). On a regular file
//!   `O_NONBLOCK` changes nothing, so it stays set.
//!
//! The directory named by the caller is opened as named (its path is configuration: a link
//! there is the administrator's); only the names below it are distrusted.
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A bound for reading the agent's own state files (records, caches, sidecars): far above
/// any of them, so that only a file someone planted meets it.
pub(crate) const STATE_FILE_LIMIT: u64 = 64 * 1024 * 1024;

/// Writes `data` to `path` atomically with the given permission bits (e.g. 0o600): a fresh
/// temp file beside it (exclusive create, random name), fsync, rename, fsync of the folder.
/// Missing folders are made. A link at `path` is replaced, never written through.
pub fn atomic_write(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    let (dir, name) = split(path)?;
    Dir::create(&dir)?.write_atomic(name, data, mode)
}

/// Creates `path` with `data` and `mode` (exact from the first byte), never replacing
/// anything already there (a file, a link, a FIFO): for files made once, like a private key.
/// Written through a temp file and linked into place, so a crash leaves no half file
/// under the name.
pub fn create_new(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    let (dir, name) = split(path)?;
    Dir::create(&dir)?.create_new(name, data, mode)
}

/// The bytes of the regular file `path` (not a link, a FIFO, a device), at most `limit`:
/// a longer file is an `InvalidData` error saying so.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let (dir, name) = split(path)?;
    Dir::open(&dir)?.read_regular(name, limit)
}

/// The regular file `path` opened for reading (the last component not followed).
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    let (dir, name) = split(path)?;
    Dir::open(&dir)?.open_regular(name)
}

/// A fresh temp file beside `path` for a write the caller finishes with [`durable_rename`]
/// (exclusive create, random name, exact `mode`); the caller removes it on failure.
pub(crate) fn create_temp(path: &Path, mode: u32) -> io::Result<(File, PathBuf)> {
    let (dir, name) = split(path)?;
    let (f, tmp) = Dir::open(&dir)?.create_temp(name, mode)?;
    Ok((f, dir.join(tmp)))
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

/// A directory held open by descriptor; see the module's header for what every open in it
/// refuses.
pub struct Dir {
    file: File,
    path: PathBuf,
}

impl Dir {
    /// Opens the directory `path` as named.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(path)?;
        Ok(Dir {
            file,
            path: path.to_path_buf(),
        })
    }

    /// [`Dir::open`], making the missing folders first.
    pub fn create(path: &Path) -> io::Result<Dir> {
        match Dir::open(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(path)?;
                Dir::open(path)
            }
            r => r,
        }
    }

    /// The path this was opened as (for messages and for `read_dir`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder `name` in this one, never through a link; made (0755 before the umask)
    /// when missing and `create`.
    pub fn sub(&self, name: &OsStr, create: bool) -> io::Result<Dir> {
        check_name(name)?;
        if create {
            match crate::sys::mkdirat(self.file.as_fd(), name, 0o755) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        let fd = self.openat(
            name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
        Ok(Dir {
            file: File::from(fd),
            path: self.path.join(name),
        })
    }

    /// The regular file at `rel` below this folder (normal components only, no `..`, not
    /// absolute), every component opened without following a link.
    pub fn open_beneath(&self, rel: &Path) -> io::Result<File> {
        let mut names = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(n) => names.push(n),
                Component::CurDir => {}
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} climbs out of {}", rel.display(), self.path.display()),
                    ))
                }
            }
        }
        let Some((last, parents)) = names.split_last() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
        };
        let mut dir: Option<Dir> = None;
        for p in parents {
            let d = dir.as_ref().unwrap_or(self).sub(p, false)?;
            dir = Some(d);
        }
        dir.as_ref().unwrap_or(self).open_regular(last)
    }

    /// The regular file `name`, opened for reading.
    pub fn open_regular(&self, name: &OsStr) -> io::Result<File> {
        check_name(name)?;
        let f = File::from(self.openat(name, libc::O_RDONLY | libc::O_NOFOLLOW, 0)?);
        only_regular(&f)?;
        Ok(f)
    }

    /// The bytes of the regular file `name`, at most `limit` (more is an error).
    pub fn read_regular(&self, name: &OsStr, limit: u64) -> io::Result<Vec<u8>> {
        read_capped(self.open_regular(name)?, limit)
    }

    /// The bytes of the regular file at `rel` (see [`Dir::open_beneath`]), at most `limit`.
    pub fn read_beneath(&self, rel: &Path, limit: u64) -> io::Result<Vec<u8>> {
        read_capped(self.open_beneath(rel)?, limit)
    }

    /// Writes `name` atomically (see [`atomic_write`]).
    pub fn write_atomic(&self, name: &OsStr, data: &[u8], mode: u32) -> io::Result<()> {
        let (mut f, tmp) = self.create_temp(name, mode)?;
        let result = (|| {
            f.write_all(data)?;
            f.sync_all()?;
            crate::sys::renameat(self.file.as_fd(), &tmp, name)?;
            self.file.sync_all()
        })();
        if result.is_err() {
            let _ = crate::sys::unlinkat(self.file.as_fd(), &tmp);
        }
        result
    }

    /// Creates `name` (see [`create_new`]): the temp file is hard-linked to the name, which
    /// fails when anything is there; a file system without hard links (FAT) gets an
    /// exclusive create of the name itself.
    pub fn create_new(&self, name: &OsStr, data: &[u8], mode: u32) -> io::Result<()> {
        let (mut f, tmp) = self.create_temp(name, mode)?;
        let result = (|| {
            f.write_all(data)?;
            f.sync_all()?;
            match crate::sys::linkat(self.file.as_fd(), &tmp, name) {
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EPERM | libc::EOPNOTSUPP | libc::EXDEV)
                    ) =>
                {
                    let fd = self.openat(
                        name,
                        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
                        mode,
                    )?;
                    let mut f = File::from(fd);
                    f.set_permissions(fs::Permissions::from_mode(mode))?;
                    f.write_all(data)?;
                    f.sync_all()?;
                }
                r => r?,
            }
            self.file.sync_all()
        })();
        let _ = crate::sys::unlinkat(self.file.as_fd(), &tmp);
        result
    }

    /// A fresh temp file for `name` in this folder, with exactly `mode`; returns it and its
    /// name. The caller renames it into place or removes it.
    pub fn create_temp(&self, name: &OsStr, mode: u32) -> io::Result<(File, OsString)> {
        check_name(name)?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let mut tries = 0;
        loop {
            let tmp = temp_name(name);
            match self.openat(&tmp, flags, mode) {
                Ok(fd) => {
                    let f = File::from(fd);
                    // The mode passed to open is filtered by the umask; set it exactly.
                    if let Err(e) = f.set_permissions(fs::Permissions::from_mode(mode)) {
                        let _ = crate::sys::unlinkat(self.file.as_fd(), &tmp);
                        return Err(e);
                    }
                    return Ok((f, tmp));
                }
                // Someone's file under a name 64 random bits chose: take another.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Renames `from` over `to` (both in this folder) and makes it durable.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        crate::sys::renameat(self.file.as_fd(), from, to)?;
        self.file.sync_all()
    }

    /// Removes the non-folder `name` (a link goes, not what it names).
    pub fn remove(&self, name: &OsStr) -> io::Result<()> {
        crate::sys::unlinkat(self.file.as_fd(), name)
    }

    /// The regular file `name` opened read-write, created with `mode` when missing (a lock,
    /// an append-only file).
    pub fn open_for_update(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        check_name(name)?;
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW;
        let f = File::from(self.openat(name, flags, mode)?);
        only_regular(&f)?;
        Ok(f)
    }

    /// Appends `lines` to `name` (see [`append_lines`]).
    pub fn append_lines(&self, name: &OsStr, lines: &[u8]) -> io::Result<()> {
        let mut f = self.open_for_update(name, 0o644)?;
        let len = f.seek(SeekFrom::End(0))?;
        let end = complete_prefix_len(&mut f, len)?;
        if end != len {
            f.set_len(end)?;
            f.seek(SeekFrom::Start(end))?;
        }
        f.write_all(lines)?;
        f.sync_data()
    }

    /// openat with the flags every open here has, and a link refused in words.
    fn openat(
        &self,
        name: &OsStr,
        flags: libc::c_int,
        mode: u32,
    ) -> io::Result<std::os::fd::OwnedFd> {
        let flags = flags | libc::O_CLOEXEC | libc::O_NONBLOCK;
        crate::sys::openat(self.file.as_fd(), name, flags, mode as libc::mode_t).map_err(|e| {
            let link = fs::symlink_metadata(self.path.join(name))
                .is_ok_and(|m| m.file_type().is_symlink());
            match e.raw_os_error() {
                Some(libc::ELOOP | libc::ENOTDIR) if link => {
                    io::Error::new(io::ErrorKind::InvalidInput, "a symbolic link, not followed")
                }
                _ => e,
            }
        })
    }
}

fn read_capped(f: File, limit: u64) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    f.take(limit.saturating_add(1)).read_to_end(&mut body)?;
    if body.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(body)
}

/// Refuses what is not a regular file with one link (checked on the open descriptor).
fn only_regular(f: &File) -> io::Result<()> {
    let m = f.metadata()?;
    let what = match m.mode() & libc::S_IFMT {
        libc::S_IFREG if m.nlink() > 1 => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a file with {} hard links, refused", m.nlink()),
            ))
        }
        libc::S_IFREG => return Ok(()),
        libc::S_IFIFO => "a FIFO",
        libc::S_IFDIR => "a directory",
        libc::S_IFCHR | libc::S_IFBLK => "a device",
        libc::S_IFSOCK => "a socket",
        _ => "of an unknown kind",
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({what}), refused"),
    ))
}

/// One normal path component: no `/`, not `.` or `..`, not empty.
fn check_name(name: &OsStr) -> io::Result<()> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} is not a plain file name", name),
        ));
    }
    Ok(())
}

/// `path` as its folder and its last name.
fn split(path: &Path) -> io::Result<(PathBuf, &OsStr)> {
    match path.file_name() {
        Some(n) if !path.as_os_str().as_bytes().ends_with(b"/") => Ok((parent_dir(path), n)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )),
    }
}

/// A fresh temp name for `name`: `.<name>.tmp.<pid>.<16 hex digits>`, the digits 64 bits
/// nobody outside can predict (SipHash of a counter under std's `RandomState`, whose
/// 128-bit key comes from the kernel's random source without blocking at boot). The
/// `.tmp.<pid>.` part lets cleanups tell this process's temps from a crashed one's.
pub(crate) fn temp_name(name: &OsStr) -> OsString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(NEXT.fetch_add(1, Ordering::Relaxed));
    let mut t = OsString::from(".");
    t.push(name);
    t.push(format!("{}{:016x}", own_temp_marker(), h.finish()));
    t
}

/// A fresh temp path next to `path` (same directory, so rename is atomic), named by
/// [`temp_name`]. For temps that are not files (a new symbolic link, renamed over the old).
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default();
    parent_dir(path).join(temp_name(name))
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

/// The pid in a temp name made by [`temp_name`] (`.<name>.tmp.<pid>.<hex>`, or the decimal
/// counter of earlier versions), if it is one.
fn temp_pid(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let (_, rest) = name
        .rsplit_once(".tmp.")
        .filter(|(head, _)| head.len() > 1)?;
    let (pid, n) = rest.split_once('.')?;
    u64::from_str_radix(n, 16).ok()?;
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
        let (dir, name) = split(path)?;
        // The folder is made only when missing (`Dir::create`): the agent takes its lock
        // first thing at every start (fast start, BENCHMARKS.md), where it nearly always
        // exists.
        let file = Dir::create(&dir)?.open_for_update(name, 0o600)?;
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
    let (dir, name) = split(path)?;
    Dir::open(&dir)?.append_lines(name, lines)
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

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("svc-fsutil-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A 0600 file outside the directory under attack, without a final newline.
    fn victim(dir: &Path) -> (PathBuf, Vec<u8>) {
        let p = dir.join("victim");
        let bytes = b"root:x:0:0::/root:/bin/sh\nno newline".to_vec();
        fs::write(&p, &bytes).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        (p, bytes)
    }

    fn assert_untouched(p: &Path, bytes: &[u8]) {
        assert_eq!(fs::read(p).unwrap(), bytes, "{} was written", p.display());
        let mode = fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} was chmod'ed", p.display());
    }

    #[test]
    fn links_planted_at_the_temp_names_are_never_written_through() {
        let dir = scratch("temp-links");
        let (victim, bytes) = victim(&dir);
        let shared = dir.join("shared");
        fs::create_dir_all(&shared).unwrap();
        // Every name a counter-based scheme of this process could take next.
        for n in 0..20_000 {
            let link = shared.join(format!(".status.json.tmp.{}.{n}", std::process::id()));
            std::os::unix::fs::symlink(&victim, link).unwrap();
        }
        atomic_write(&shared.join("status.json"), b"{}", 0o644).unwrap();
        assert_untouched(&victim, &bytes);
        assert_eq!(fs::read(shared.join("status.json")).unwrap(), b"{}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_append_never_follows_a_link_nor_writes_a_hard_linked_file() {
        let dir = scratch("append-links");
        let (victim, bytes) = victim(&dir);
        let shared = dir.join("shared");
        fs::create_dir_all(&shared).unwrap();
        std::os::unix::fs::symlink(&victim, shared.join("logs.jsonl")).unwrap();
        let e = append_lines(&shared.join("logs.jsonl"), b"{}\n").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        fs::remove_file(shared.join("logs.jsonl")).unwrap();
        fs::hard_link(&victim, shared.join("logs.jsonl")).unwrap();
        let e = append_lines(&shared.join("logs.jsonl"), b"{}\n").unwrap_err();
        assert!(e.to_string().contains("link"), "{e}");
        assert_untouched(&victim, &bytes);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_is_refused_without_blocking_and_so_are_other_non_files() {
        let dir = scratch("fifo");
        let fifo = dir.join("poll.json");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(st.success());
        // No writer ever opens the FIFO: a blocking open would hang this test.
        let e = read_regular(&fifo, 1024).unwrap_err();
        assert!(e.to_string().contains("not a regular file (a FIFO)"), "{e}");
        let e = append_lines(&fifo, b"{}\n").unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_regular(&dir, 1024).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let e = read_regular(Path::new("/dev/null"), 1).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        fs::write(dir.join("big"), [b'x'; 11]).unwrap();
        assert_eq!(read_regular(&dir.join("big"), 11).unwrap().len(), 11);
        let e = read_regular(&dir.join("big"), 10).unwrap_err();
        assert!(e.to_string().contains("larger than 10 bytes"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_below_a_shared_folder_never_pass_through_a_link() {
        let dir = scratch("beneath");
        let (victim, bytes) = victim(&dir);
        let shared = dir.join("shared");
        fs::create_dir_all(shared.join("artifacts")).unwrap();
        fs::write(shared.join("artifacts/ok"), b"fine").unwrap();
        std::os::unix::fs::symlink(&victim, shared.join("artifacts/linked")).unwrap();
        std::os::unix::fs::symlink(&dir, shared.join("up")).unwrap();
        let d = Dir::open(&shared).unwrap();
        let mut s = String::new();
        d.open_beneath(Path::new("artifacts/ok"))
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "fine");
        for (rel, says) in [
            ("artifacts/linked", "symbolic link"),
            ("up/victim", "symbolic link"),
            ("../victim", "climbs out"),
            ("/etc/passwd", "climbs out"),
        ] {
            let e = d.open_beneath(Path::new(rel)).unwrap_err();
            assert!(e.to_string().contains(says), "{rel}: {e}");
        }
        assert!(d.sub(OsStr::new("up"), true).is_err(), "a linked folder");
        assert_untouched(&victim, &bytes);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn create_new_never_replaces_and_leaves_no_temp() {
        let dir = scratch("create-new");
        let (victim, bytes) = victim(&dir);
        let key = dir.join("keys/vendor.key");
        create_new(&key, b"secret", 0o600).unwrap();
        assert_eq!(fs::read(&key).unwrap(), b"secret");
        assert_eq!(
            fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let e = create_new(&key, b"other", 0o600).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        let link = dir.join("keys/linked.key");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(create_new(&link, b"other", 0o600).is_err());
        assert_untouched(&victim, &bytes);
        let names: Vec<_> = fs::read_dir(dir.join("keys")).unwrap().collect();
        assert_eq!(names.len(), 2, "a temp file left behind");
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
