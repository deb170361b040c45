//! agent-syscfg: journald limits and OS package upgrades, applied exactly and reverted cleanly.
//!
//! Config in → [`plan`] (pure, over [`SystemFacts`]) → [`apply`] (through [`Effects`]) →
//! [`SyscfgStatus`] out. The subsystem only ever writes files of its own name
//! ([`journald::DROPIN`], [`upgrades::FILES`]) and records the sha256 of every byte it wrote in
//! [`record::RECORD_PATH`]; reverting removes exactly those files, and only while they still
//! hold what the agent wrote. See `docs/syscfg.md`.
pub mod journald;
pub mod record;
pub mod upgrades;

use crate::config::model::{SyscfgSection, UpgradeType};
use crate::paths::Paths;
use record::{sha256_hex, WrittenFiles};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

const SUB: &str = "syscfg";

/// The two settings the subsystem manages; each gets one status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Setting {
    /// `logging.*`: the journald drop-in.
    Logging,
    /// `upgrades.type`: the apt drop-ins.
    Upgrades,
}

impl Setting {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Setting::Logging => "logging",
            Setting::Upgrades => "upgrades",
        }
    }

    /// Which setting a recorded path belongs to.
    fn of_path(path: &str) -> Setting {
        if path.starts_with("/etc/systemd/journald.conf.d/") {
            Setting::Logging
        } else {
            Setting::Upgrades
        }
    }
}

/// Outcome of one setting after an apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "lowercase")]
pub enum SettingState {
    /// Files were written or removed to match the config.
    Applied,
    /// Everything already matched; nothing was touched.
    Unchanged,
    /// The system cannot do this (no journald, no apt, package missing).
    Unsupported(String),
    /// Something was attempted and failed; retried on the next apply.
    Failed(String),
    /// The agent's files were removed and the system's own settings apply again.
    Reverted,
}

impl std::fmt::Display for SettingState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingState::Applied => f.write_str("applied"),
            SettingState::Unchanged => f.write_str("unchanged"),
            SettingState::Unsupported(r) => write!(f, "unsupported: {r}"),
            SettingState::Failed(r) => write!(f, "failed: {r}"),
            SettingState::Reverted => f.write_str("reverted"),
        }
    }
}

/// One setting's status, as `svc-agent status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingStatus {
    pub setting: Setting,
    #[serde(flatten)]
    pub state: SettingState,
    /// What the setting asks for, in words.
    pub detail: String,
    /// Files written or removed by this apply (device paths).
    pub changed: Vec<String>,
    pub warnings: Vec<String>,
}

/// The subsystem's status after an apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyscfgStatus {
    pub settings: Vec<SettingStatus>,
    /// Services restarted by this apply (argv joined), or why restarts are not done here.
    pub services: Vec<String>,
}

impl SyscfgStatus {
    pub fn get(&self, s: Setting) -> Option<&SettingStatus> {
        self.settings.iter().find(|x| x.setting == s)
    }
    pub fn any_failed(&self) -> bool {
        self.settings
            .iter()
            .any(|s| matches!(s.state, SettingState::Failed(_)))
    }
}

/// Whether this process may restart services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restarts {
    Allowed,
    /// Not on this system (`--root` is not `/`, or systemd is not PID 1); the reason says which.
    Skipped(String),
}

/// What the planner needs to know about the machine, gathered by [`SystemFacts::detect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemFacts {
    pub os: upgrades::OsRelease,
    pub has_journald: bool,
    pub has_apt_get: bool,
    pub unattended_upgrades_installed: bool,
    /// `apt-daily-upgrade.timer` is enabled (else unattended upgrades never run).
    pub upgrade_timer_enabled: bool,
    pub restarts: Restarts,
    /// sha256 of each relevant file that exists now, by device path.
    pub current: BTreeMap<String, String>,
    pub record: WrittenFiles,
    /// Why the record could not be read (then it counts as empty).
    pub record_problem: Option<String>,
}

fn exists_any(root: &Path, rels: &[&str]) -> bool {
    rels.iter().any(|r| root.join(r).exists())
}

impl SystemFacts {
    /// Looks at the machine under `paths.root()`. Reads only; never fails (what cannot be read
    /// counts as absent).
    pub fn detect(paths: &Paths) -> SystemFacts {
        let root = paths.root();
        let (record, record_problem) = match WrittenFiles::load(&record::record_path(paths)) {
            Ok(r) => (r, None),
            Err(e) => (WrittenFiles::default(), Some(e.to_string())),
        };
        let live = std::fs::canonicalize(root)
            .map(|p| p == Path::new("/"))
            .unwrap_or(false);
        let restarts = if !live {
            Restarts::Skipped(format!(
                "services are not restarted under --root {}",
                root.display()
            ))
        } else if !Path::new("/run/systemd/system").is_dir() {
            Restarts::Skipped("services are not restarted: systemd is not PID 1".into())
        } else {
            Restarts::Allowed
        };
        let mut wanted: Vec<String> = vec![journald::DROPIN.to_string()];
        wanted.extend(upgrades::FILES.iter().map(|s| s.to_string()));
        wanted.extend(record.files.iter().map(|f| f.path.clone()));
        let mut current = BTreeMap::new();
        for p in wanted {
            if let Ok(bytes) = std::fs::read(paths.device(&p)) {
                current.insert(p, sha256_hex(&bytes));
            }
        }
        SystemFacts {
            os: upgrades::OsRelease::read(root),
            has_journald: exists_any(
                root,
                &[
                    "usr/lib/systemd/systemd-journald",
                    "lib/systemd/systemd-journald",
                ],
            ),
            has_apt_get: exists_any(root, &["usr/bin/apt-get", "bin/apt-get"]),
            unattended_upgrades_installed: upgrades::dpkg_installed(root, "unattended-upgrades"),
            upgrade_timer_enabled: root
                .join("etc/systemd/system/timers.target.wants/apt-daily-upgrade.timer")
                .symlink_metadata()
                .is_ok(),
            restarts,
            current,
            record,
            record_problem,
        }
    }
}

/// One step on one file. `Adopt` and `Forget` touch only the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileAction {
    /// Write `content` to `path` (atomically) and record its hash.
    Write {
        setting: Setting,
        path: String,
        content: String,
    },
    /// Remove `path`, which still holds what the agent wrote (`sha256`), and forget it.
    Remove {
        setting: Setting,
        path: String,
        sha256: String,
    },
    /// `path` already holds exactly the wanted content but the record does not say so (a crash
    /// between writing it and recording it): record it.
    Adopt {
        setting: Setting,
        path: String,
        sha256: String,
    },
    /// Stop tracking `path` without touching it: it is gone (`vanished`), or someone changed it
    /// since the agent wrote it (left in place, with a warning).
    Forget {
        setting: Setting,
        path: String,
        vanished: bool,
    },
}

impl FileAction {
    pub(crate) fn setting(&self) -> Setting {
        match self {
            FileAction::Write { setting, .. }
            | FileAction::Remove { setting, .. }
            | FileAction::Adopt { setting, .. }
            | FileAction::Forget { setting, .. } => *setting,
        }
    }
    pub(crate) fn path(&self) -> &str {
        match self {
            FileAction::Write { path, .. }
            | FileAction::Remove { path, .. }
            | FileAction::Adopt { path, .. }
            | FileAction::Forget { path, .. } => path,
        }
    }
    /// Whether this changes what journald reads (or may have read) from disk.
    fn affects_journald(&self) -> bool {
        self.setting() == Setting::Logging
            && match self {
                FileAction::Forget { vanished, .. } => *vanished,
                _ => true,
            }
    }
}

/// What a setting asks for once the system is taken into account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Intent {
    /// Make the agent's files match the config.
    Apply,
    /// Impose nothing: remove what the agent wrote (if anything).
    Revert,
    /// Cannot be done here; what the agent wrote before is still removed.
    Unsupported(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SettingPlan {
    pub setting: Setting,
    pub intent: Intent,
    pub detail: String,
    pub warnings: Vec<String>,
}

/// The planner's result: file actions in execution order, and what each setting intends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub actions: Vec<FileAction>,
    pub settings: Vec<SettingPlan>,
}

/// The pure planner: which files to write, remove, adopt or forget so that the machine holds
/// exactly the files `section` asks for, given what `facts` says is there and what the agent
/// recorded. `disable_subsystem` wants no files at all, which reverts everything.
pub(crate) fn plan(section: &SyscfgSection, facts: &SystemFacts) -> Plan {
    // Desired content by device path; a known path absent here is not wanted.
    let mut desired: BTreeMap<&str, String> = BTreeMap::new();
    let mut settings = vec![
        plan_logging(section, facts, &mut desired),
        plan_upgrades(section, facts, &mut desired),
    ];
    let actions = file_actions(desired, facts, &mut settings);
    Plan { actions, settings }
}

/// The journald drop-in: what the logging setting intends, its file put in `desired`.
fn plan_logging(
    section: &SyscfgSection,
    facts: &SystemFacts,
    desired: &mut BTreeMap<&str, String>,
) -> SettingPlan {
    let disabled = section.disable_subsystem;
    let logging = &section.attributes.logging;
    let (intent, detail) = match journald::render(logging) {
        _ if disabled => (Intent::Revert, "subsystem disabled".to_string()),
        None if logging.disable => (Intent::Revert, "logging.disable is true".into()),
        None => (
            Intent::Revert,
            "no journald limits set: journald's own configuration applies".into(),
        ),
        Some(_) if !facts.has_journald => (
            Intent::Unsupported("systemd-journald is not present on this system".into()),
            "journald limits requested".into(),
        ),
        Some(text) => {
            desired.insert(journald::DROPIN, text);
            let mut d = Vec::new();
            if let Some(v) = &logging.system_max_use {
                d.push(format!("SystemMaxUse={v}"));
            }
            if let Some(v) = &logging.runtime_max_use {
                d.push(format!("RuntimeMaxUse={v}"));
            }
            (Intent::Apply, d.join(" "))
        }
    };
    SettingPlan {
        setting: Setting::Logging,
        intent,
        detail,
        warnings: Vec::new(),
    }
}

/// The unattended-upgrades drop-ins: what the upgrades setting intends, its files put in
/// `desired`.
fn plan_upgrades(
    section: &SyscfgSection,
    facts: &SystemFacts,
    desired: &mut BTreeMap<&str, String>,
) -> SettingPlan {
    let disabled = section.disable_subsystem;
    let mut warnings = Vec::new();
    let (intent, detail) = match section.attributes.upgrades.upgrade_type {
        _ if disabled => (Intent::Revert, "subsystem disabled".to_string()),
        None => (
            Intent::Revert,
            "upgrades.type not set: the OS's own upgrade settings apply".into(),
        ),
        Some(t) => {
            let detail = format!("upgrades.type {}", type_name(t));
            if !facts.has_apt_get {
                (
                    Intent::Unsupported(format!(
                        "not supported on this system: no apt-get ({})",
                        facts.os.name()
                    )),
                    detail,
                )
            } else if !facts.os.is_debian_family() {
                (
                    Intent::Unsupported(format!(
                        "not supported on this system: {} is not of the Debian family",
                        facts.os.name()
                    )),
                    detail,
                )
            } else if t != UpgradeType::None && !facts.unattended_upgrades_installed {
                (
                    Intent::Unsupported("package unattended-upgrades is not installed".to_string()),
                    detail,
                )
            } else {
                for (path, text) in upgrades::render(t) {
                    desired.insert(path, text);
                }
                if t != UpgradeType::None && !facts.upgrade_timer_enabled {
                    warnings.push(
                        "apt-daily-upgrade.timer is not enabled: apt will not run the upgrades \
                         until it is (the agent does not enable it)"
                            .to_string(),
                    );
                }
                (Intent::Apply, detail)
            }
        }
    };
    SettingPlan {
        setting: Setting::Upgrades,
        intent,
        detail,
        warnings,
    }
}

/// The file actions, in path order, that leave exactly the `desired` files of the agent's
/// known paths on the machine; what a setting should hear of (a file changed by hand, one
/// not ours) goes into its warnings in `settings`.
fn file_actions(
    mut desired: BTreeMap<&str, String>,
    facts: &SystemFacts,
    settings: &mut [SettingPlan],
) -> Vec<FileAction> {
    // Every path the agent knows: its own names plus whatever it recorded (older versions).
    let mut known: Vec<String> = vec![journald::DROPIN.to_string()];
    known.extend(upgrades::FILES.iter().map(|s| s.to_string()));
    for f in &facts.record.files {
        if !known.contains(&f.path) {
            known.push(f.path.clone());
        }
    }
    known.sort();

    let mut actions = Vec::new();
    for path in known {
        let setting = Setting::of_path(&path);
        let current = facts.current.get(&path).map(String::as_str);
        let recorded = facts.record.sha(&path);
        let warn = |settings: &mut [SettingPlan], w: String| {
            if let Some(sp) = settings.iter_mut().find(|s| s.setting == setting) {
                sp.warnings.push(w);
            }
        };
        match desired.remove(path.as_str()) {
            Some(content) => {
                let want = sha256_hex(content.as_bytes());
                if current == Some(want.as_str()) {
                    if recorded != Some(want.as_str()) {
                        actions.push(FileAction::Adopt {
                            setting,
                            path,
                            sha256: want,
                        });
                    }
                } else {
                    match (current, recorded) {
                        (Some(_), None) => warn(
                            settings,
                            format!("{path} existed and was not written by the agent; replaced"),
                        ),
                        (Some(c), Some(r)) if c != r => warn(
                            settings,
                            format!("{path} was changed since the agent wrote it; replaced"),
                        ),
                        _ => {}
                    }
                    actions.push(FileAction::Write {
                        setting,
                        path,
                        content,
                    });
                }
            }
            None => match (current, recorded) {
                (None, None) => {}
                (None, Some(_)) => actions.push(FileAction::Forget {
                    setting,
                    path,
                    vanished: true,
                }),
                (Some(c), Some(r)) if c == r => actions.push(FileAction::Remove {
                    setting,
                    path,
                    sha256: c.to_string(),
                }),
                (Some(_), Some(_)) => {
                    warn(
                        settings,
                        format!(
                            "{path} was changed since the agent wrote it; left in place \
                             (remove it by hand to restore the system's settings)"
                        ),
                    );
                    actions.push(FileAction::Forget {
                        setting,
                        path,
                        vanished: false,
                    });
                }
                (Some(_), None) => warn(
                    settings,
                    format!("{path} was not written by the agent; left in place"),
                ),
            },
        }
    }
    actions
}

fn type_name(t: UpgradeType) -> &'static str {
    match t {
        UpgradeType::All => "all",
        UpgradeType::Security => "security",
        UpgradeType::None => "none",
    }
}

/// The side effects of an apply. The real one is [`RealEffects`]; tests count calls.
/// A service restart (systemctl) that takes longer than this is reported as failed.
const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

pub trait Effects {
    /// Writes a whole file atomically (mode 0644).
    fn write(&mut self, path: &Path, content: &[u8]) -> io::Result<()>;
    /// Removes a file durably; a missing file is not an error.
    fn remove(&mut self, path: &Path) -> io::Result<()>;
    /// Runs a program (argv, never a shell) and waits for it; `Err` says why it failed.
    fn run(&mut self, argv: &[&str]) -> Result<(), CommandError>;
}

/// Why a program `Effects::run` ran did not succeed; each names the command line.
#[derive(Debug)]
pub enum CommandError {
    Empty,
    /// It could not be started, or did not finish in time.
    NotRun {
        argv: String,
        why: String,
    },
    /// It ran and failed: its exit status and stderr.
    Failed {
        argv: String,
        status: String,
        stderr: String,
    },
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::Empty => f.write_str("empty command"),
            CommandError::NotRun { argv, why } => write!(f, "{argv}: {why}"),
            CommandError::Failed {
                argv,
                status,
                stderr,
            } => write!(f, "{argv} exited with {status}: {stderr}"),
        }
    }
}

impl std::error::Error for CommandError {}

/// Effects on the real machine.
#[derive(Debug, Default)]
pub struct RealEffects;

impl Effects for RealEffects {
    fn write(&mut self, path: &Path, content: &[u8]) -> io::Result<()> {
        crate::fsutil::atomic_write(path, content, 0o644)
    }

    fn remove(&mut self, path: &Path) -> io::Result<()> {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
        match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => crate::fsutil::fsync_dir(dir),
            _ => Ok(()),
        }
    }

    fn run(&mut self, argv: &[&str]) -> Result<(), CommandError> {
        let Some((prog, args)) = argv.split_first() else {
            return Err(CommandError::Empty);
        };
        let mut cmd = std::process::Command::new(prog);
        cmd.args(args);
        let out = crate::process::run(cmd, COMMAND_TIMEOUT).map_err(|e| CommandError::NotRun {
            argv: argv.join(" "),
            why: e.to_string(),
        })?;
        if out.success() {
            Ok(())
        } else {
            Err(CommandError::Failed {
                argv: argv.join(" "),
                status: out.status.to_string(),
                stderr: out.stderr_text(),
            })
        }
    }
}

/// Errors of one file step (reported in the setting's status, not returned).
#[derive(Debug)]
pub(crate) enum SyscfgError {
    Write { path: PathBuf, source: io::Error },
    Remove { path: PathBuf, source: io::Error },
    Record { path: PathBuf, source: io::Error },
    Restart(CommandError),
}

impl std::fmt::Display for SyscfgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyscfgError::Write { path, source } => {
                write!(
                    f,
                    "cannot write {}: {source}{}",
                    path.display(),
                    read_only_hint(source)
                )
            }
            SyscfgError::Remove { path, source } => {
                write!(
                    f,
                    "cannot remove {}: {source}{}",
                    path.display(),
                    read_only_hint(source)
                )
            }
            SyscfgError::Record { path, source } => {
                write!(f, "cannot write the record {}: {source}", path.display())
            }
            SyscfgError::Restart(e) => write!(f, "journald restart failed: {e}"),
        }
    }
}

impl std::error::Error for SyscfgError {}

/// What to do about a drop-in on a read-only root file system (docs/syscfg.md).
fn read_only_hint(e: &io::Error) -> &'static str {
    if e.raw_os_error() == Some(libc::EROFS) {
        " (a read-only root file system: agent-syscfg cannot change it on this image; \
         bake the setting into the image, docs/syscfg.md \"Read-only root file systems\")"
    } else {
        ""
    }
}

/// Executes `plan` through `fx`, restarts journald when what it reads changed, writes the
/// record when it changed, and returns each setting's status. Never panics and never stops
/// half-way on one failure: each file step is independent and the record reflects exactly the
/// steps that succeeded.
pub(crate) fn apply_plan(
    plan: &Plan,
    paths: &Paths,
    facts: &SystemFacts,
    fx: &mut dyn Effects,
) -> SyscfgStatus {
    let mut record = facts.record.clone();
    let mut changed: BTreeMap<Setting, Vec<String>> = BTreeMap::new();
    let mut errors: BTreeMap<Setting, Vec<String>> = BTreeMap::new();
    let mut journald_touched = false;

    for a in &plan.actions {
        let setting = a.setting();
        match file_action(a, paths, &mut record, fx) {
            Ok(touched) => {
                if touched {
                    changed
                        .entry(setting)
                        .or_default()
                        .push(a.path().to_string());
                    crate::info!(
                        SUB,
                        "{} {}",
                        if matches!(a, FileAction::Write { .. }) {
                            "wrote"
                        } else {
                            "removed"
                        },
                        a.path()
                    );
                }
                if a.affects_journald() {
                    journald_touched = true;
                }
            }
            Err(e) => {
                crate::error!(SUB, "{e}");
                errors.entry(setting).or_default().push(e.to_string());
            }
        }
    }

    // journald reads its configuration only at start: restart it when its files changed, or
    // when an earlier restart is still owed.
    let owed = journald_touched || facts.record.journald_restart_pending;
    record.journald_restart_pending = false;
    let (services, restart_error) = if owed {
        restart_journald(&facts.restarts, fx, &mut record)
    } else {
        (Vec::new(), None)
    };

    if record != facts.record {
        let p = record::record_path(paths);
        if let Err(source) = fx.write(&p, &record.to_bytes()) {
            let e = SyscfgError::Record { path: p, source };
            crate::error!(SUB, "{e}");
            // Without the record a later revert could not remove these files: every setting
            // that changed something is failed, and the next apply tries again.
            for s in changed.keys() {
                errors.entry(*s).or_default().push(e.to_string());
            }
        }
    }

    let mut out = Vec::new();
    for sp in &plan.settings {
        let files = changed.remove(&sp.setting).unwrap_or_default();
        let mut errs = errors.remove(&sp.setting).unwrap_or_default();
        if sp.setting == Setting::Logging {
            if let Some(e) = &restart_error {
                errs.push(e.clone());
            }
        }
        out.push(setting_status(sp, files, errs, owed));
    }
    SyscfgStatus {
        settings: out,
        services,
    }
}

/// One file action on the machine, noted in `record`; `true` when it changed a file.
fn file_action(
    a: &FileAction,
    paths: &Paths,
    record: &mut WrittenFiles,
    fx: &mut dyn Effects,
) -> Result<bool, SyscfgError> {
    match a {
        FileAction::Write { path, content, .. } => {
            let p = paths.device(path);
            fx.write(&p, content.as_bytes())
                .map(|()| {
                    record.set(path, &sha256_hex(content.as_bytes()));
                    true
                })
                .map_err(|source| SyscfgError::Write { path: p, source })
        }
        FileAction::Remove { path, .. } => {
            let p = paths.device(path);
            fx.remove(&p)
                .map(|()| {
                    record.forget(path);
                    true
                })
                .map_err(|source| SyscfgError::Remove { path: p, source })
        }
        FileAction::Adopt { path, sha256, .. } => {
            record.set(path, sha256);
            Ok(false)
        }
        FileAction::Forget { path, .. } => {
            record.forget(path);
            Ok(false)
        }
    }
}

/// journald reads its configuration only at start: the restart owed, or why it was skipped.
/// Returns the services line for the status and the restart's error; a failed restart stays
/// owed in `record`.
fn restart_journald(
    restarts: &Restarts,
    fx: &mut dyn Effects,
    record: &mut WrittenFiles,
) -> (Vec<String>, Option<String>) {
    match restarts {
        Restarts::Allowed => {
            let argv = journald::RESTART_ARGV;
            match fx.run(&argv) {
                Ok(()) => {
                    crate::info!(SUB, "restarted systemd-journald to apply its limits");
                    (vec![argv.join(" ")], None)
                }
                Err(e) => {
                    let e = SyscfgError::Restart(e);
                    crate::error!(SUB, "{e}");
                    record.journald_restart_pending = true;
                    (Vec::new(), Some(e.to_string()))
                }
            }
        }
        Restarts::Skipped(why) => {
            crate::info!(SUB, "journald not restarted: {why}");
            (vec![why.clone()], None)
        }
    }
}

/// A setting's outcome from its plan, the files it changed and its errors; logged.
fn setting_status(
    sp: &SettingPlan,
    files: Vec<String>,
    errs: Vec<String>,
    owed: bool,
) -> SettingStatus {
    let state = if !errs.is_empty() {
        SettingState::Failed(errs.join("; "))
    } else {
        match &sp.intent {
            Intent::Unsupported(r) => SettingState::Unsupported(r.clone()),
            Intent::Apply if !files.is_empty() => SettingState::Applied,
            Intent::Apply if sp.setting == Setting::Logging && owed => SettingState::Applied,
            Intent::Revert if !files.is_empty() => SettingState::Reverted,
            Intent::Revert if sp.setting == Setting::Logging && owed => SettingState::Reverted,
            _ => SettingState::Unchanged,
        }
    };
    for w in &sp.warnings {
        crate::warn!(SUB, "{}: {w}", sp.setting.as_str());
    }
    let st = SettingStatus {
        setting: sp.setting,
        state,
        detail: sp.detail.clone(),
        changed: files,
        warnings: sp.warnings.clone(),
    };
    match &st.state {
        SettingState::Unchanged => {
            crate::debug!(SUB, "{}: unchanged ({})", st.setting.as_str(), st.detail)
        }
        SettingState::Failed(_) => {
            crate::error!(SUB, "{}: {} ({})", st.setting.as_str(), st.state, st.detail)
        }
        _ => crate::info!(SUB, "{}: {} ({})", st.setting.as_str(), st.state, st.detail),
    }
    st
}

/// Plans and applies `section` on the machine under `paths` with the given effects.
pub fn apply(
    section: &SyscfgSection,
    paths: &Paths,
    facts: &SystemFacts,
    fx: &mut dyn Effects,
) -> SyscfgStatus {
    if let Some(p) = &facts.record_problem {
        crate::warn!(
            SUB,
            "{p}; treating it as empty (files it listed are no longer reverted)"
        );
    }
    apply_plan(&plan(section, facts), paths, facts, fx)
}

/// The daemon's entry point: detect, plan, apply with real effects.
pub(crate) fn run(section: &SyscfgSection, paths: &Paths) -> SyscfgStatus {
    let facts = SystemFacts::detect(paths);
    apply(section, paths, &facts, &mut RealEffects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_root_says_what_to_do() {
        let e = SyscfgError::Write {
            path: "/etc/systemd/journald.conf.d/60-svc-agent.conf".into(),
            source: io::Error::from_raw_os_error(libc::EROFS),
        };
        let text = e.to_string();
        assert!(
            text.contains("read-only root file system")
                && text.contains("bake the setting into the image"),
            "{text}"
        );
        let other = SyscfgError::Write {
            path: "/x".into(),
            source: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert!(!other.to_string().contains("read-only"));
    }
}
