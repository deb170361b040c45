//! Living under systemd: `sd_notify` (READY, STOPPING, STATUS, WATCHDOG), the watchdog
//! period, `svc-agent install` / `uninstall`, and the single-instance lock.
use crate::fsutil;
use crate::paths::Paths;
use std::fmt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The one unit file, shared with the Yocto layer and the Buildroot package.
pub(crate) const UNIT: &str = include_str!("../dist/svc-agent.service");
pub(crate) const UNIT_NAME: &str = "svc-agent.service";
/// The data-partition drop-in's template, shared with the Yocto layer and the Buildroot
/// package (they fill it in at image build time).
pub(crate) const DATA_PARTITION_TEMPLATE: &str =
    include_str!("../dist/svc-agent-data-partition.conf.in");
/// Where the filled-in template goes, in the unit directory.
pub(crate) const DATA_PARTITION_DROPIN: &str = "svc-agent.service.d/data-partition.conf";

/// The drop-in for a state directory other than `/opt/svc` (or a credentials directory
/// other than `/etc`). `image_agent`: the read-only image's binary that seeds the state;
/// `None` (an `install` on a writable root) leaves the seed line out.
pub(crate) fn data_partition_dropin(paths: &Paths, image_agent: Option<&str>) -> String {
    let mut out = String::new();
    for line in DATA_PARTITION_TEMPLATE.lines() {
        if line.contains("@IMAGE_AGENT@") && image_agent.is_none() && !line.starts_with('#') {
            continue;
        }
        let line = line
            .replace("@STATE_DIR@", paths.state_device_path())
            .replace("@CREDENTIALS_DIR@", paths.credentials_dir_device_path())
            .replace("@IMAGE_AGENT@", image_agent.unwrap_or("(none)"));
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Sends one notification to systemd; a no-op when not started by systemd.
pub(crate) fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let result = if let Some(name) = bytes.strip_prefix(b"@") {
        // An abstract socket: '@' stands for the leading NUL.
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), Path::new(&path))
    };
    if let Err(e) = result {
        crate::debug!("systemd", "sd_notify failed: {e}");
    }
}

/// systemd's watchdog interval (`WATCHDOG_USEC`, `WatchdogSec=`), when it is meant for us.
pub(crate) fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Some(pid) = std::env::var("WATCHDOG_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
    {
        if pid != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// The watchdog's timing for an interval `w` (`WatchdogSec`): the feeder pings every `w/4`
/// while the loop is alive; the loop is alive for `w/2` after each report (the grace given to
/// `watchdog::start`) and beats at least every `w/4`. With `WatchdogSec=60`: pings 15 s
/// apart at most (45 s to spare); a loop that stops reporting is pinged for at most 30 s
/// more and killed by systemd at most 90 s after its last report; one inside a bounded wait
/// (a plain poll's 30 s, a DDI request's 30 s, an artifact request's 300 s) at most 90 s
/// after that wait's deadline. docs/agent.md "systemd".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WatchdogTiming {
    pub feed_every: Duration,
    pub grace: Duration,
}

impl WatchdogTiming {
    pub(crate) fn of(interval: Duration) -> WatchdogTiming {
        WatchdogTiming {
            feed_every: interval / 4,
            grace: interval / 2,
        }
    }
}

/// Starts feeding systemd's watchdog, when it is on, from a thread of its own: `WATCHDOG=1`
/// every `feed_every` while `watchdog::alive` says the loop (the calling thread, from now
/// on) is alive. Returns how often the loop must beat.
pub(crate) fn start_watchdog() -> Option<Duration> {
    let timing = WatchdogTiming::of(watchdog_interval()?);
    crate::watchdog::start(timing.grace);
    let spawned = crate::sys::thread("watchdog")
        .spawn(move || {
            let mut fed = true;
            loop {
                std::thread::sleep(timing.feed_every);
                let alive = crate::watchdog::alive() == Some(true);
                if alive {
                    if !fed {
                        crate::info!("agent", "the loop reports again: feeding systemd's watchdog");
                        notify("STATUS=running");
                    }
                    notify("WATCHDOG=1");
                } else {
                    if fed {
                        crate::error!(
                            "agent",
                            "the loop has not reported within its deadline: no longer feeding systemd's watchdog"
                        );
                    }
                    // Each tick without a report is told to systemd in place of the ping
                    // (`systemctl status` shows it until systemd's own deadline).
                    notify("STATUS=stalled: the loop has not reported within its deadline");
                }
                fed = alive;
            }
        });
    if let Err(e) = spawned {
        // Without the feeder systemd restarts the agent: said, and tried again then.
        crate::error!("agent", "cannot start the watchdog thread: {e}");
    }
    Some(timing.feed_every)
}

#[derive(Debug)]
pub(crate) enum InstallError {
    Io(String, std::io::Error),
    Command(String),
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::Io(what, e) => write!(f, "{what}: {e}"),
            InstallError::Command(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for InstallError {}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> InstallError {
    let what = what.into();
    move |e| InstallError::Io(what, e)
}

/// Runs `systemctl`; behind a trait so that install logic is testable without systemd.
pub(crate) trait Systemctl {
    fn run(&mut self, args: &[&str]) -> Result<(), InstallError>;
}

/// The real one: argv, never a shell.
pub(crate) struct RealSystemctl;

impl Systemctl for RealSystemctl {
    fn run(&mut self, args: &[&str]) -> Result<(), InstallError> {
        let mut cmd = std::process::Command::new("systemctl");
        cmd.args(args);
        // Starting a unit waits for it; systemd's own start timeout is 90 s.
        let out = crate::process::run(cmd, Duration::from_secs(180))
            .map_err(|e| InstallError::Command(format!("systemctl {}: {e}", args.join(" "))))?;
        if out.success() {
            Ok(())
        } else {
            Err(InstallError::Command(format!(
                "systemctl {} failed: {}",
                args.join(" "),
                out.stderr_text()
            )))
        }
    }
}

/// Whether systemd is the running init (and so `systemctl` can act).
pub(crate) fn systemd_running(paths: &Paths) -> bool {
    paths.root() == Path::new("/") && Path::new("/run/systemd/system").is_dir()
}

/// Copies `src` to `dst` atomically (temp, fsync, rename, fsync dir), mode 0755.
fn install_file(src: &Path, dst: &Path) -> Result<(), InstallError> {
    let bytes = std::fs::read(src).map_err(io(format!("reading {}", src.display())))?;
    if std::fs::read(dst).ok().as_deref() == Some(&bytes[..]) {
        return Ok(());
    }
    fsutil::atomic_write(dst, &bytes, 0o755).map_err(io(format!("writing {}", dst.display())))
}

/// Points `link` at `target` atomically: a new link at a temp name renamed over the old.
pub(crate) fn swap_link(link: &Path, target: &Path) -> std::io::Result<()> {
    if std::fs::read_link(link).ok().as_deref() == Some(target) {
        return Ok(());
    }
    if let Some(dir) = link.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = fsutil::temp_path(link);
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)?;
    fsutil::durable_rename(&tmp, link)
}

/// What `install` did, for the user.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct InstallReport {
    pub binary: PathBuf,
    pub unit: PathBuf,
    pub changed: bool,
    pub enabled: bool,
}

/// `svc-agent install`: the running binary into the cache, the link, the unit, enabled and
/// started. Safe to run again: an identical second run changes nothing.
pub(crate) fn install(
    paths: &Paths,
    exe: &Path,
    sysctl: &mut dyn Systemctl,
) -> Result<InstallReport, InstallError> {
    install_with(paths, exe, sysctl, systemd_running(paths))
}

/// `install`, with whether systemd runs (and so is asked to act) given: the tests' seam.
fn install_with(
    paths: &Paths,
    exe: &Path,
    sysctl: &mut dyn Systemctl,
    systemd: bool,
) -> Result<InstallReport, InstallError> {
    let version = env!("SVC_VERSION");
    let cached = paths.cache_dir().join(format!("svc-agent-{version}"));
    let link = paths.bin_link("svc-agent");
    let unit = paths.unit_dir().join(UNIT_NAME);
    let dropin = paths.unit_dir().join(DATA_PARTITION_DROPIN);
    // Refused before anything is written: a read-only root takes its unit from the image.
    for (what, p) in [
        ("the state directory", paths.state_dir()),
        ("the unit directory", paths.unit_dir()),
    ] {
        if crate::sys::on_read_only_mount(&p).unwrap_or(false) {
            return Err(InstallError::Command(format!(
                "{what} {} is on a read-only file system: on a read-only image the unit and \
                 its data-partition drop-in come with the image (docs/packaging.md \
                 \"Read-only root file systems\"); set SVC_STATE_DIR to a writable directory",
                p.display()
            )));
        }
    }
    let before = (
        std::fs::read(&cached).ok(),
        std::fs::read_link(&link).ok(),
        std::fs::read(&unit).ok(),
        std::fs::read(&dropin).ok(),
    );
    if exe != cached {
        install_file(exe, &cached)?;
    }
    swap_link(&link, Path::new(&format!("../cache/svc-agent-{version}")))
        .map_err(io(format!("linking {}", link.display())))?;
    if std::fs::read(&unit).ok().as_deref() != Some(UNIT.as_bytes()) {
        fsutil::atomic_write(&unit, UNIT.as_bytes(), 0o644)
            .map_err(io(format!("writing {}", unit.display())))?;
    }
    if paths.is_default_layout() {
        remove(&dropin)?;
    } else {
        let text = data_partition_dropin(paths, None);
        if std::fs::read(&dropin).ok().as_deref() != Some(text.as_bytes()) {
            if let Some(d) = dropin.parent() {
                std::fs::create_dir_all(d).map_err(io(format!("creating {}", d.display())))?;
            }
            fsutil::atomic_write(&dropin, text.as_bytes(), 0o644)
                .map_err(io(format!("writing {}", dropin.display())))?;
        }
    }
    let after = (
        std::fs::read(&cached).ok(),
        std::fs::read_link(&link).ok(),
        std::fs::read(&unit).ok(),
        std::fs::read(&dropin).ok(),
    );
    let changed = before != after;
    let mut enabled = false;
    if systemd {
        // No `daemon-reload` of our own: `enable` reloads systemd's configuration itself once
        // its links are made (systemctl(1), unless `--no-reload`), and `--now` starts the
        // unit after that reload, so the unit file written above is the one started. A
        // second reload cost seconds on a slow machine and changed nothing.
        sysctl.run(&["enable", "--now", UNIT_NAME])?;
        enabled = true;
    }
    Ok(InstallReport {
        binary: cached,
        unit,
        changed,
        enabled,
    })
}

/// `svc-agent uninstall [--purge]`: stops and removes the service, links, cache and state;
/// the credentials file stays unless `purge`.
pub(crate) fn uninstall(
    paths: &Paths,
    purge: bool,
    sysctl: &mut dyn Systemctl,
) -> Result<(), InstallError> {
    uninstall_with(paths, purge, sysctl, systemd_running(paths))
}

/// `uninstall`, with whether systemd runs given: the tests' seam.
fn uninstall_with(
    paths: &Paths,
    purge: bool,
    sysctl: &mut dyn Systemctl,
    systemd: bool,
) -> Result<(), InstallError> {
    let unit = paths.unit_dir().join(UNIT_NAME);
    if systemd && unit.exists() {
        // The unit may already be stopped or disabled: that is not an error here. No reload
        // here (`--no-reload`): systemd still has the unit loaded to stop it, and the one
        // reload below, after the files are gone, makes it forget the unit.
        let _ = sysctl.run(&["disable", "--now", "--no-reload", UNIT_NAME]);
    }
    remove(&unit)?;
    let dropin = paths.unit_dir().join(DATA_PARTITION_DROPIN);
    remove(&dropin)?;
    if let Some(d) = dropin.parent() {
        // Only when empty: another drop-in of the administrator's stays.
        let _ = std::fs::remove_dir(d);
    }
    if systemd {
        sysctl.run(&["daemon-reload"])?;
    }
    let state = paths.state_dir();
    if state.exists() {
        std::fs::remove_dir_all(&state).map_err(io(format!("removing {}", state.display())))?;
    }
    if purge {
        remove(&paths.credentials())?;
    }
    Ok(())
}

fn remove(p: &Path) -> Result<(), InstallError> {
    match std::fs::remove_file(p) {
        Ok(()) => {
            if let Some(d) = p.parent() {
                let _ = fsutil::fsync_dir(d);
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(InstallError::Io(format!("removing {}", p.display()), e)),
    }
}

/// Why the instance lock was not taken.
#[derive(Debug)]
pub(crate) enum LockError {
    Open {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// Another agent holds it (`holder`: the pid it wrote, as written).
    Held {
        holder: String,
        path: std::path::PathBuf,
    },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Open { path, source } => {
                write!(f, "cannot open {}: {source}", path.display())
            }
            LockError::Held { holder, path } => write!(
                f,
                "another svc-agent is already running (pid {holder}, lock {})",
                path.display()
            ),
        }
    }
}

impl std::error::Error for LockError {}

/// An exclusive `flock` on `/opt/svc/agent.lock`, held for the process's life. The lock is
/// what keeps a second agent out; the pid in the file only names the holder in the second
/// one's error, so the start-up path writes it after svc-server has been started
/// ([`InstanceLock::record_holder`]).
pub(crate) struct InstanceLock {
    lock: fsutil::FileLock,
}

impl InstanceLock {
    /// Takes the lock (the file's content is left as it is; see `record_holder`).
    pub(crate) fn acquire(paths: &Paths) -> Result<InstanceLock, LockError> {
        use std::io::Read;
        let path = paths.state_dir().join("agent.lock");
        let cannot = |source| LockError::Open {
            path: path.clone(),
            source,
        };
        let Some(lock) = fsutil::FileLock::try_exclusive(&path).map_err(cannot)? else {
            let mut holder = String::new();
            if let Ok(mut f) = std::fs::File::open(&path) {
                let _ = f.read_to_string(&mut holder);
            }
            return Err(LockError::Held {
                holder: holder.trim().to_string(),
                path,
            });
        };
        Ok(InstanceLock { lock })
    }

    /// Writes this process's pid into the lock file for a second agent's error message. It
    /// is padded to one width (10 digits hold any pid) and written over the old one in place:
    /// the file keeps its length and its block, so no truncate (ext4 frees and reallocates
    /// the block under a journal handle, which waited 0.3 to 10 ms on a busy disk).
    pub(crate) fn record_holder(&mut self) {
        use std::os::unix::fs::FileExt;
        let text = format!("{:<10}\n", std::process::id());
        let f = self.lock.file();
        let _ = f.write_all_at(text.as_bytes(), 0);
        let len = text.len() as u64;
        if f.metadata().map_or(true, |m| m.len() != len) {
            let _ = f.set_len(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Recorder(Vec<String>);
    impl Systemctl for Recorder {
        fn run(&mut self, args: &[&str]) -> Result<(), InstallError> {
            self.0.push(args.join(" "));
            Ok(())
        }
    }

    #[test]
    fn the_data_partition_dropin_is_the_template_filled_in() {
        let paths = Paths::new("/")
            .with_locations(Some("/data/svc"), Some("/data/etc"))
            .unwrap();
        let d = data_partition_dropin(&paths, Some("/usr/lib/svc-agent/svc-agent"));
        assert!(!d.contains('@'), "every placeholder filled: {d}");
        for line in [
            "RequiresMountsFor=/data/svc /data/etc",
            "Environment=SVC_STATE_DIR=/data/svc SVC_CREDENTIALS_DIR=/data/etc",
            "ExecStartPre=+mkdir -p -m 0700 /data/svc /data/etc",
            "ExecStartPre=/usr/lib/svc-agent/svc-agent check-dirs",
            "ExecStartPre=-/usr/lib/svc-agent/svc-agent seed",
            "ExecStartPre=-/data/svc/bin/svc-agent.stable boot-guard",
            "ExecStart=/data/svc/bin/svc-agent run",
            "ReadWritePaths=-/data/svc -/data/etc -/etc -/var/lib",
        ] {
            assert!(d.lines().any(|l| l == line), "{line:?} missing in:\n{d}");
        }
        // The directories are checked (a failure stops the start: no `-`) before anything
        // runs from them; the seed runs before the guard, the guard before the start.
        let at = |s: &str| d.find(s).unwrap();
        let mkdir = at("ExecStartPre=+mkdir");
        let check = at("ExecStartPre=/usr/lib/svc-agent/svc-agent check-dirs");
        let seed = at("ExecStartPre=-/usr/lib/svc-agent/svc-agent seed");
        let guard = at("ExecStartPre=-/data/svc/bin/svc-agent.stable boot-guard");
        assert!(mkdir < check && check < seed && seed < guard && guard < at("ExecStart=/data"));
        let without = data_partition_dropin(&paths, None);
        assert!(!without.lines().any(|l| l.ends_with(" seed")), "{without}");
    }

    #[test]
    fn install_with_a_data_partition_writes_the_dropin_and_uninstall_removes_it() {
        let root = std::env::temp_dir().join(format!("svc-install-data-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let paths = Paths::new(&root)
            .with_locations(Some("/data/svc"), Some("/data/etc"))
            .unwrap();
        let exe = root.join("downloaded-svc-agent");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(&exe, b"\x7fELF binary").unwrap();
        let mut rec = Recorder(Vec::new());
        let r = install(&paths, &exe, &mut rec).unwrap();
        assert!(r.binary.starts_with(root.join("data/svc/cache")), "{r:?}");
        assert!(root.join("data/svc/bin/svc-agent").is_file());
        assert!(
            !root.join("opt/svc").exists(),
            "nothing in the conventions' place"
        );
        let dropin = paths.unit_dir().join(DATA_PARTITION_DROPIN);
        assert_eq!(
            std::fs::read_to_string(&dropin).unwrap(),
            data_partition_dropin(&paths, None)
        );
        assert!(!install(&paths, &exe, &mut rec).unwrap().changed);
        uninstall(&paths, false, &mut rec).unwrap();
        assert!(!dropin.exists() && !dropin.parent().unwrap().exists());
        assert!(!paths.state_dir().exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn install_is_idempotent_and_uninstall_leaves_only_credentials() {
        let root = std::env::temp_dir().join(format!("svc-install-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let paths = Paths::new(&root);
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(paths.credentials(), "{}").unwrap();
        let exe = root.join("downloaded-svc-agent");
        std::fs::write(&exe, b"\x7fELF binary").unwrap();
        let mut rec = Recorder(Vec::new());
        let r = install(&paths, &exe, &mut rec).unwrap();
        assert!(r.changed && !r.enabled, "a sandbox root has no systemd");
        assert_eq!(std::fs::read(&r.binary).unwrap(), b"\x7fELF binary");
        let link = std::fs::read_link(paths.bin_link("svc-agent")).unwrap();
        assert_eq!(
            link,
            PathBuf::from(format!("../cache/svc-agent-{}", env!("SVC_VERSION")))
        );
        assert_eq!(
            std::fs::read(paths.bin_link("svc-agent")).unwrap(),
            b"\x7fELF binary"
        );
        assert_eq!(std::fs::read_to_string(&r.unit).unwrap(), UNIT);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&r.binary).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let again = install(&paths, &exe, &mut rec).unwrap();
        assert!(!again.changed);
        assert!(rec.0.is_empty());
        uninstall(&paths, false, &mut rec).unwrap();
        assert!(paths.credentials().exists());
        assert!(!paths.state_dir().exists() && !r.unit.exists());
        uninstall(&paths, true, &mut rec).unwrap();
        assert!(!paths.credentials().exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// How many times these systemctl calls make systemd reload its configuration: each
    /// `daemon-reload`, and each `enable`/`disable` without `--no-reload` (systemctl(1): they
    /// reload by themselves once their links are made). A reload under TCG costs seconds.
    fn reloads(calls: &[String]) -> usize {
        calls
            .iter()
            .filter(|c| {
                let words: Vec<&str> = c.split(' ').collect();
                words[0] == "daemon-reload"
                    || (matches!(words[0], "enable" | "disable") && !words.contains(&"--no-reload"))
            })
            .count()
    }

    #[test]
    fn install_and_uninstall_ask_systemd_for_one_reload_each() {
        let root = std::env::temp_dir().join(format!("svc-install-reload-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let paths = Paths::new(&root);
        let exe = root.join("downloaded-svc-agent");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(&exe, b"\x7fELF binary").unwrap();
        // A first install writes the unit: the one reload must come after it is written and
        // before the start (`enable --now`: the links, the reload, then the start).
        let mut rec = Recorder(Vec::new());
        let r = install_with(&paths, &exe, &mut rec, true).unwrap();
        assert!(r.changed && r.enabled, "{r:?}");
        assert_eq!(reloads(&rec.0), 1, "first install: {:?}", rec.0);
        assert_eq!(rec.0.last().unwrap(), "enable --now svc-agent.service");
        // A second, identical install still enables and starts (a no-op for systemd).
        let mut rec = Recorder(Vec::new());
        assert!(!install_with(&paths, &exe, &mut rec, true).unwrap().changed);
        assert_eq!(reloads(&rec.0), 1, "second install: {:?}", rec.0);
        assert_eq!(rec.0.last().unwrap(), "enable --now svc-agent.service");
        // Uninstall stops the unit while systemd still knows it, then reloads once, after the
        // unit file is gone (so systemd forgets it).
        let mut rec = Recorder(Vec::new());
        uninstall_with(&paths, false, &mut rec, true).unwrap();
        assert_eq!(reloads(&rec.0), 1, "uninstall: {:?}", rec.0);
        assert!(rec.0[0].starts_with("disable --now"), "{:?}", rec.0);
        assert_eq!(rec.0.last().unwrap(), "daemon-reload");
        assert!(!r.unit.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn notify_reaches_a_real_socket() {
        let dir = std::env::temp_dir().join(format!("svc-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock_path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&sock_path);
        let sock = UnixDatagram::bind(&sock_path).unwrap();
        std::env::set_var("NOTIFY_SOCKET", &sock_path);
        notify("READY=1\nSTATUS=running");
        std::env::remove_var("NOTIFY_SOCKET");
        let mut buf = [0u8; 64];
        let n = sock.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=running");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_second_instance_is_refused_naming_the_holder() {
        let root = std::env::temp_dir().join(format!("svc-lock-{}", std::process::id()));
        let paths = Paths::new(&root);
        let mut held = InstanceLock::acquire(&paths).unwrap();
        held.record_holder();
        // flock locks belong to the open file description: a second open conflicts.
        let err = InstanceLock::acquire(&paths).err().unwrap().to_string();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_holder_pid_replaces_a_longer_or_shorter_old_one_in_place() {
        let root = std::env::temp_dir().join(format!("svc-lock-pid-{}", std::process::id()));
        let paths = Paths::new(&root);
        let file = root.join("opt/svc/agent.lock");
        for old in ["4194303 and some stale text\n", "7"] {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, old).unwrap();
            let mut held = InstanceLock::acquire(&paths).unwrap();
            held.record_holder();
            held.record_holder();
            let text = std::fs::read_to_string(&file).unwrap();
            assert_eq!(text.trim(), std::process::id().to_string(), "{text:?}");
            drop(held);
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}
