//! The operating system as a whole, through the A/B updater on the machine (RAUC; docs/updates.md,
//! *OS images*): an offered bundle is downloaded by the one download engine
//! (`update::download`: resumable, space-checked, sha256, size, the vendor's ed25519
//! signature) into the data partition before RAUC sees a byte; RAUC then checks its own
//! signature and compatible string and writes the other slot. The daemon reboots into it only
//! when the restart rule allows (`agent::os`), and after the boot a health gate decides: mark
//! the slot good, or mark it bad and boot the old one again.
//!
//! The decisions are pure functions over [`Phase`] and facts ([`after_boot`],
//! [`gate_verdict`], [`offer_decision`]); the effects are [`fetch_bundle`], [`install`],
//! [`reboot`] and the state file `os.json` (written whole by rename).
pub(crate) mod rauc;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::model::UpgradeType;
use crate::paths::Paths;
use crate::protocol::OsTarget;
use crate::update::{Artifact, DownloadOptions, UpdateError};
use rauc::{Mark, Rauc, RaucError};

pub(crate) const SUB: &str = "os";
/// The one bundle format this engine installs.
pub(crate) const FORMAT_RAUC: &str = "rauc-bundle";
/// The artifact name a vendor signs an OS bundle under (`svc-release sign --name os`).
pub(crate) const ARTIFACT_NAME: &str = "os";
/// The longest a RAUC install may take (a slot of a few GiB on slow flash).
const INSTALL_DEADLINE: Duration = Duration::from_secs(3600);

/// Every way an OS update fails; each leaves the booted slot booted and primary.
#[derive(Debug)]
pub(crate) enum OsError {
    /// The offer itself is unusable (format, missing hash or size, a version rolled back).
    BadOffer(String),
    /// Download or verification (space, size, sha256, vendor signature).
    Fetch(UpdateError),
    Rauc(RaucError),
    /// RAUC finished but the slot it made primary is the booted one.
    NoNewSlot(String),
    State(String),
}

impl fmt::Display for OsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OsError::BadOffer(m) => write!(f, "OS image refused: {m}"),
            OsError::Fetch(e) => write!(f, "OS bundle: {e}"),
            OsError::Rauc(e) => e.fmt(f),
            OsError::NoNewSlot(s) => write!(
                f,
                "RAUC reported success but the next boot is still slot {s}: nothing to boot into"
            ),
            OsError::State(m) => write!(f, "OS update state: {m}"),
        }
    }
}

impl std::error::Error for OsError {}

impl From<RaucError> for OsError {
    fn from(e: RaucError) -> Self {
        OsError::Rauc(e)
    }
}

/// Where an OS update stands; kept in `os.json` across restarts and reboots.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub(crate) enum Phase {
    #[default]
    Idle,
    /// RAUC was asked to write `version`; saved before the call, so that a cut during the
    /// install is recognised after it (the booted slot is then still the old one).
    Installing { version: String, from_slot: String },
    /// RAUC wrote slot `slot` whole and made it primary; the reboot waits for the restart
    /// rule (maintenance window, svc-server idle). RAUC is asked to install only when that
    /// rule allows, so a wait here is rare (the window closed during the install): the old
    /// slot is made primary again while it lasts ([`keep_primary`]).
    Installed {
        version: String,
        slot: String,
        from_slot: String,
    },
    /// The reboot into `slot` was asked for during boot `boot_id`.
    Rebooting {
        version: String,
        slot: String,
        from_slot: String,
        boot_id: String,
    },
    /// Running the new slot; its health gate started at `since` (Unix time) during boot
    /// `boot_id`.
    Gate {
        version: String,
        slot: String,
        from_slot: String,
        since: u64,
        boot_id: String,
    },
    /// The gate failed (`why`): the new slot is marked bad, a reboot into `from_slot` asked for.
    RollingBack {
        version: String,
        slot: String,
        from_slot: String,
        why: String,
        /// Reboots asked for since: bounded, so that a boot loader that keeps starting the
        /// bad slot cannot make the machine reboot for ever.
        #[serde(default)]
        reboots: u32,
    },
}

/// The most reboots a rollback asks for.
pub(crate) const MAX_ROLLBACK_REBOOTS: u32 = 3;

/// The whole state file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OsState {
    #[serde(default)]
    pub phase: Phase,
    /// The OS version running and known good.
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub previous: Option<String>,
    /// Versions rolled back or refused for what they are: not retried until another is
    /// offered.
    #[serde(default)]
    pub bad: Vec<String>,
    /// The last outcome, as reported: `installed 2.0`, `rolled back: <why>`, `refused: <why>`.
    #[serde(default)]
    pub last_result: Option<String>,
}

/// Most entries `bad` keeps (oldest dropped): an outsider offering versions must not grow it.
const MAX_BAD: usize = 16;

impl OsState {
    fn path(paths: &Paths) -> PathBuf {
        paths.state_dir().join("os.json")
    }

    /// The saved state; an unreadable file is reported and read as idle (the slots
    /// themselves, through RAUC, stay the truth of what boots).
    pub(crate) fn load(paths: &Paths) -> OsState {
        let p = Self::path(paths);
        match crate::fsutil::read_regular(&p, crate::fsutil::STATE_FILE_LIMIT) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                crate::warn!(SUB, "{} is unreadable ({e}); starting idle", p.display());
                OsState::default()
            }),
            Err(_) => OsState::default(),
        }
    }

    pub(crate) fn save(&self, paths: &Paths) -> Result<(), OsError> {
        let p = Self::path(paths);
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| OsError::State(e.to_string()))?;
        crate::fsutil::atomic_write(&p, &bytes, 0o644)
            .map_err(|e| OsError::State(format!("writing {}: {e}", p.display())))
    }

    pub(crate) fn add_bad(&mut self, version: &str) {
        if !self.bad.iter().any(|b| b == version) {
            self.bad.push(version.to_string());
        }
        while self.bad.len() > MAX_BAD {
            self.bad.remove(0);
        }
    }
}

/// The OS part of the status report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OsStatus {
    /// The system's compatible string (RAUC's): which bundles this machine takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatible: Option<String>,
    pub booted_slot: Option<String>,
    pub version: Option<String>,
    pub previous: Option<String>,
    pub offered: Option<String>,
    pub bad: Vec<String>,
    /// `idle`, `downloading`, `downloaded` (verified; RAUC waits for the reboot's rule),
    /// `installing`, `installed` (waiting to reboot), `rebooting`, `gate`, `rolling-back`.
    pub state: String,
    /// Why the state waits, when it does (the reboot outside the maintenance window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// Why nothing can move now (RAUC's service unreachable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub last_result: Option<String>,
}

impl Phase {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Installing { .. } => "installing",
            Phase::Installed { .. } => "installed",
            Phase::Rebooting { .. } => "rebooting",
            Phase::Gate { .. } => "gate",
            Phase::RollingBack { .. } => "rolling-back",
        }
    }
}

/// What to do with an offer while idle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OfferDecision {
    /// Nothing offered, or the offer is what runs.
    Keep,
    Install,
    /// Rolled back (or refused for its bytes) before: not retried until another is offered.
    Bad,
    /// Not a format this agent installs.
    Unsupported(String),
    /// agent-syscfg's `upgrades.type` is `none`: the machine takes no OS upgrades.
    UpgradesOff,
}

/// An offer against the state and agent-syscfg's `upgrades.type` (docs/syscfg.md, *OS
/// images*): `none` takes no OS image; `all`, `security` and no setting take what the app
/// offers (an image is one signed whole: the vendor chose what is in it).
pub(crate) fn offer_decision(
    state: &OsState,
    offer: Option<&OsTarget>,
    upgrades: Option<UpgradeType>,
) -> OfferDecision {
    let Some(o) = offer else {
        return OfferDecision::Keep;
    };
    if state.version.as_deref() != Some(o.target.version.as_str())
        && upgrades == Some(UpgradeType::None)
    {
        return OfferDecision::UpgradesOff;
    }
    if o.format != FORMAT_RAUC {
        return OfferDecision::Unsupported(o.format.clone());
    }
    if state.version.as_deref() == Some(o.target.version.as_str()) {
        OfferDecision::Keep
    } else if state.bad.contains(&o.target.version) {
        OfferDecision::Bad
    } else {
        OfferDecision::Install
    }
}

/// What the phase saved before a (re)start means, given the slot that booted and this boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BootFinding {
    /// Nothing changes.
    Same,
    /// The saved phase becomes this one.
    Next(Phase),
    /// The new slot did not come up (the boot loader's fallback, a cut during the
    /// install): record `version` as bad when `bad`, say `why`, and go idle.
    Failed {
        version: String,
        why: String,
        bad: bool,
        /// Mark the new slot bad (the boot loader may still count it bootable).
        mark_other_bad: bool,
    },
    /// A rollback reached the old slot: report it.
    RolledBack { version: String, why: String },
    /// Ask for the reboot again (asked for, but this is still the same boot).
    RebootAgain,
    /// The rollback's reboots keep starting the new slot: stop rebooting, report it.
    RollbackStuck { version: String, why: String },
}

/// The decision at start (and after every reboot): `booted` is the slot name RAUC calls
/// booted, `boot_id` this boot's (the kernel's random boot id), `now` the Unix time.
pub(crate) fn after_boot(phase: &Phase, booted: &str, boot_id: &str, now: u64) -> BootFinding {
    let gate = |version: &str, slot: &str, from_slot: &str| {
        BootFinding::Next(Phase::Gate {
            version: version.into(),
            slot: slot.into(),
            from_slot: from_slot.into(),
            since: now,
            boot_id: boot_id.into(),
        })
    };
    match phase {
        Phase::Idle => BootFinding::Same,
        // A cut during the install: RAUC leaves the booted slot primary until the new one is
        // whole; the next offer installs again. Not the version's fault.
        Phase::Installing { version, from_slot } if booted == from_slot => BootFinding::Failed {
            version: version.clone(),
            why: "the install was interrupted (restart or power cut); the old slot runs".into(),
            bad: false,
            mark_other_bad: false,
        },
        // A cut after RAUC finished, before the state said so: the new slot booted.
        Phase::Installing { version, from_slot } => gate(version, booted, from_slot),
        // A boot into the written slot before the reboot was asked for (a cut before the old
        // slot was made primary again, or someone else's reboot): it runs; its gate decides.
        Phase::Installed {
            version,
            slot,
            from_slot,
        } if booted == slot => gate(version, slot, from_slot),
        Phase::Installed { .. } => BootFinding::Same,
        Phase::Rebooting {
            version,
            slot,
            from_slot,
            boot_id: asked_in,
        } => {
            if booted == slot {
                gate(version, slot, from_slot)
            } else if asked_in == boot_id {
                BootFinding::RebootAgain
            } else {
                BootFinding::Failed {
                    version: version.clone(),
                    why: format!(
                        "the new slot {slot} did not boot: the boot loader fell back to {booted}"
                    ),
                    bad: true,
                    mark_other_bad: true,
                }
            }
        }
        Phase::Gate {
            version,
            slot,
            from_slot,
            boot_id: gate_boot,
            ..
        } => {
            if booted != slot {
                BootFinding::Failed {
                    version: version.clone(),
                    why: format!(
                        "the new slot {slot} fell back to {booted} before its health gate passed"
                    ),
                    bad: true,
                    mark_other_bad: true,
                }
            } else if gate_boot != boot_id {
                // A cut during the first boot: the gate starts again on this boot.
                gate(version, slot, from_slot)
            } else {
                BootFinding::Same
            }
        }
        Phase::RollingBack {
            version,
            slot,
            why,
            reboots,
            ..
        } => {
            if booted == slot && *reboots >= MAX_ROLLBACK_REBOOTS {
                BootFinding::RollbackStuck {
                    version: version.clone(),
                    why: format!(
                        "{why}; and after {reboots} reboots the boot loader still starts slot {slot}"
                    ),
                }
            } else if booted == slot {
                BootFinding::RebootAgain
            } else {
                BootFinding::RolledBack {
                    version: version.clone(),
                    why: why.clone(),
                }
            }
        }
    }
}

/// Facts the health gate judges, from the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GateFacts {
    /// Unix time now, and when the gate began.
    pub now: u64,
    pub since: u64,
    /// svc-server is managed (not disabled) and installed: it must prove itself.
    pub server_required: bool,
    /// Seconds svc-server has run without a break, if running.
    pub server_up_secs: Option<u64>,
    /// svc-server's crashes since the gate began.
    pub server_crashes: u64,
    /// Unix time of the last successful contact with the app (or the `file://` directory).
    pub last_contact: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GatePolicy {
    /// svc-server's probation on the new OS: this long running without a break.
    pub server_up: Duration,
    pub max_crashes: u64,
    /// The gate's deadline from its start.
    pub deadline: Duration,
}

impl Default for GatePolicy {
    fn default() -> Self {
        GatePolicy {
            server_up: Duration::from_secs(120),
            max_crashes: 3,
            deadline: Duration::from_secs(900),
        }
    }
}

impl GatePolicy {
    /// While the gate waits for the app, a poll is tried at least this often: the poll
    /// backoff alone (doubling to 300 s) could outlast the deadline and fail a healthy OS
    /// whose app came back (#43).
    pub(crate) fn app_poll_every(&self) -> Duration {
        (self.deadline / 20).max(Duration::from_secs(1))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GateVerdict {
    Waiting,
    Passed,
    Failed(String),
}

/// The health gate: svc-server through its probation and the app reached after the boot,
/// within the deadline; svc-server crashing `max_crashes` times fails it at once.
pub(crate) fn gate_verdict(f: GateFacts, p: GatePolicy) -> GateVerdict {
    if f.server_required && f.server_crashes >= p.max_crashes {
        return GateVerdict::Failed(format!(
            "svc-server crashed {} times on the new OS",
            f.server_crashes
        ));
    }
    let server_ok =
        !f.server_required || f.server_up_secs.is_some_and(|s| s >= p.server_up.as_secs());
    let app_ok = f.last_contact.is_some_and(|t| t >= f.since);
    if server_ok && app_ok {
        return GateVerdict::Passed;
    }
    if f.now.saturating_sub(f.since) >= p.deadline.as_secs() {
        let mut missing = Vec::new();
        if !server_ok {
            missing.push(format!(
                "svc-server did not run {} s without a break",
                p.server_up.as_secs()
            ));
        }
        if !app_ok {
            missing.push("the management app was not reached".to_string());
        }
        return GateVerdict::Failed(format!(
            "health gate not passed within {} s: {}",
            p.deadline.as_secs(),
            missing.join("; ")
        ));
    }
    GateVerdict::Waiting
}

/// `<state>/os/`: the bundle's download, on the data partition with the agent's state.
pub(crate) fn bundle_dir(paths: &Paths) -> PathBuf {
    paths.state_dir().join("os")
}

/// Who the bundle's authority comes from before RAUC sees it (docs/hawkbit.md, *RAUC
/// bundles*). Decided by the backend in use, never by anything in the offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provenance {
    /// The agent's own protocol (an app, a `file://` directory, a stick): sha256 required,
    /// and on a device with a vendor key its ed25519 signature, checked before the download.
    App,
    /// A hawkBit deployment: no carrier for the vendor's ed25519 signature, so the authority
    /// is RAUC's own: its CMS signature checked against the booted image's keyring (the
    /// vendor's) before a slot is written. The server's sha256, else its sha1 (all gooseBit
    /// gives), checks only the transfer.
    Hawkbit,
}

fn artifact_of(o: &OsTarget, from: Provenance) -> Result<Artifact, OsError> {
    let t = &o.target;
    if t.version.is_empty()
        || t.version.len() > 64
        || t.version.contains(['/', '\0'])
        || t.version.starts_with('.')
    {
        return Err(OsError::BadOffer(format!(
            "version {:?} is not a version",
            t.version
        )));
    }
    // An OS image is never taken on trust of its URL alone: its hash and size bound it.
    let sha = t
        .sha256
        .as_deref()
        .filter(|s| crate::encoding::is_sha256_hex(s));
    let sha1 = o
        .sha1
        .as_deref()
        .filter(|s| from == Provenance::Hawkbit && is_sha1_hex(s));
    if sha.is_none() && sha1.is_none() {
        return Err(OsError::BadOffer(match from {
            Provenance::App => "an OS image needs a sha256 (64 hex digits)".into(),
            Provenance::Hawkbit => {
                "an OS image needs a sha256 (64 hex digits) or a sha1 (40 hex digits)".into()
            }
        }));
    }
    let size = t
        .size
        .filter(|s| *s > 0)
        .ok_or_else(|| OsError::BadOffer("an OS image needs its size".into()))?;
    Ok(Artifact {
        name: ARTIFACT_NAME.into(),
        version: t.version.clone(),
        url: t.url.clone(),
        sha256: sha.map(str::to_ascii_lowercase),
        size: Some(size),
        signature: t.signature.clone(),
        identity: None,
    })
}

fn is_sha1_hex(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Downloads and verifies the offered bundle (`identity`: the machine's, for the app's own
/// origin): `<state>/os/bundle-<version>.raucb`, complete
/// and checked (size, sha256, vendor signature when the device has a key) or not there at
/// all. Other versions' bundles and parts are removed first, so that one bundle at most takes
/// the data partition's space.
pub(crate) fn fetch_bundle(
    paths: &Paths,
    offer: &OsTarget,
    from: Provenance,
    opts: &DownloadOptions,
    identity: Option<crate::http::Identity>,
) -> Result<PathBuf, OsError> {
    let mut a = artifact_of(offer, from)?;
    // Only when there is no sha256 (the stronger one decides).
    let sha1 = match (&a.sha256, from) {
        (None, Provenance::Hawkbit) => offer.sha1.as_deref(),
        _ => None,
    };
    // Sent to the app's own origin only (the download engine's rule).
    a.identity = identity;
    let dir = bundle_dir(paths);
    let name = format!("bundle-{}.raucb", a.version);
    let done = dir.join(&name);
    let part = dir.join(format!("{name}.part"));
    // The vendor's signature first: an unsigned offer on a keyed device costs no download.
    // hawkBit carries none: RAUC's keyring is the authority there (`Provenance`).
    if from == Provenance::App {
        crate::update::verify::check_signature(paths, &a).map_err(OsError::Fetch)?;
    }
    remove_others(&dir, &name);
    if done.exists() {
        let again = crate::update::verify::check_file_hash(&done, &a).and_then(|()| match sha1 {
            Some(want) => crate::update::verify::check_sha1(&done, want),
            None => Ok(()),
        });
        match again {
            Ok(()) => return Ok(done),
            Err(e) => {
                crate::warn!(SUB, "{}: {e}; downloading again", done.display());
                let _ = std::fs::remove_file(&done);
            }
        }
    }
    let fetched = crate::update::download::fetch_into(part.clone(), &a, opts, None)
        .map_err(OsError::Fetch)?;
    // The hash streamed on the way in; the size from the file. Both before the rename.
    let checked = match &fetched {
        crate::update::Fetched::Complete { sha256, .. } => std::fs::metadata(&part)
            .map_err(|e| UpdateError::Io {
                context: format!("stat {}", part.display()),
                err: e,
            })
            .and_then(|m| match (a.size, a.sha256.as_deref()) {
                (Some(want), _) if m.len() != want => Err(UpdateError::SizeMismatch {
                    expected: want,
                    actual: m.len(),
                }),
                (_, Some(want)) if !want.eq_ignore_ascii_case(sha256) => {
                    Err(UpdateError::ShaMismatch {
                        expected: want.to_string(),
                        actual: sha256.clone(),
                    })
                }
                _ => match sha1 {
                    Some(want) => crate::update::verify::check_sha1(&part, want),
                    None => Ok(()),
                },
            }),
        crate::update::Fetched::NotModified => Err(UpdateError::BadArtifact(
            "the server answered 304 to an unconditional request".into(),
        )),
    };
    if let Err(e) = checked {
        crate::update::download::discard(&part);
        return Err(OsError::Fetch(e));
    }
    crate::update::download::discard_sidecar(&part);
    crate::fsutil::durable_rename(&part, &done)
        .map_err(|e| OsError::State(format!("renaming {}: {e}", part.display())))?;
    Ok(done)
}

/// Whether the bundle of `version` is downloaded and verified (renamed there only then).
pub(crate) fn bundle_ready(paths: &Paths, version: &str) -> bool {
    bundle_dir(paths)
        .join(format!("bundle-{version}.raucb"))
        .is_file()
}

/// Removes every bundle or part in `dir` but `keep` (and its part).
fn remove_others(dir: &Path, keep: &str) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        if n.starts_with("bundle-") && !n.starts_with(&format!("{keep}.")) && n != keep {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Removes every bundle (after an install, or when no install needs one), and the folder:
/// its absence makes the next call one `stat` (the daemon calls this on every step at rest).
pub(crate) fn remove_bundles(paths: &Paths) {
    let dir = bundle_dir(paths);
    if dir.exists() {
        remove_others(&dir, "");
        // Not when something else is left in it (a temp of a live write; a mount point).
        let _ = std::fs::remove_dir(&dir);
    }
}

/// The booted slot and the running OS version (RAUC's record of the bundle it last wrote
/// there, when it has one).
pub(crate) fn booted(r: &Rauc) -> Result<Booted, OsError> {
    let s = r.booted()?;
    Ok(Booted {
        slot: s.name,
        version: s.bundle_version,
        compatible: r.compatible()?,
    })
}

/// What RAUC says of the running system.
pub(crate) struct Booted {
    pub slot: String,
    pub version: Option<String>,
    pub compatible: String,
}

/// Installs `bundle` through RAUC: records [`Phase::Installing`] first, then
/// [`Phase::Installed`] with the slot RAUC made primary. On error the state is back to idle
/// and the booted slot stays primary (RAUC's promise; checked here).
pub(crate) fn install(
    paths: &Paths,
    state: &mut OsState,
    version: &str,
    bundle: &Path,
) -> Result<(), OsError> {
    let r = Rauc::connect()?;
    let from_slot = r.booted()?.name;
    if r.operation()? != "idle" {
        return Err(OsError::Rauc(RaucError::Call {
            method: "InstallBundle",
            message: "RAUC is busy with another operation".into(),
        }));
    }
    state.phase = Phase::Installing {
        version: version.into(),
        from_slot: from_slot.clone(),
    };
    state.save(paths)?;
    crate::update::crash_point("os-installing");
    let mut last = -1;
    let res = r.install(bundle, INSTALL_DEADLINE, |pct, msg| {
        if pct / 25 != last / 25 {
            crate::info!(SUB, "installing OS {version}: {pct}% {msg}");
            last = pct;
        }
    });
    let slot = match res.map_err(OsError::from).and_then(|()| {
        // A boot loader backend without `get-primary` (RAUC's `custom` backend may lack
        // it): the slot RAUC recorded this bundle in.
        let slot = match r.primary() {
            Ok(s) => s,
            Err(e) => r
                .slots()?
                .into_iter()
                .find(|s| s.name != from_slot && s.bundle_version.as_deref() == Some(version))
                .map(|s| s.name)
                .ok_or(OsError::Rauc(e))?,
        };
        if slot == from_slot {
            Err(OsError::NoNewSlot(slot))
        } else {
            Ok(slot)
        }
    }) {
        Ok(s) => s,
        Err(e) => {
            state.phase = Phase::Idle;
            let _ = state.save(paths);
            return Err(e);
        }
    };
    crate::update::crash_point("os-installed");
    state.phase = Phase::Installed {
        version: version.into(),
        slot,
        from_slot,
    };
    state.save(paths)?;
    remove_bundles(paths);
    Ok(())
}

/// Makes `slot` the next boot unless it is already (RAUC's mark-active; a backend without
/// `get-primary` is marked anyway). True when it was marked. Keeps the old slot booting while
/// an installed one waits for its window, and makes the new one the next boot before the
/// reboot into it.
pub(crate) fn keep_primary(slot: &str) -> Result<bool, OsError> {
    let r = Rauc::connect()?;
    if r.primary().is_ok_and(|p| p == slot) {
        return Ok(false);
    }
    r.mark(Mark::Active, slot)?;
    Ok(true)
}

/// Marks the booted slot good (the gate passed).
pub(crate) fn mark_good() -> Result<(), OsError> {
    Rauc::connect()?.mark(Mark::Good, "booted")?;
    Ok(())
}

/// Marks `bad` unbootable and makes `good` the next boot.
pub(crate) fn mark_bad(bad: &str, good: &str) -> Result<(), OsError> {
    let r = Rauc::connect()?;
    r.mark(Mark::Bad, bad)?;
    r.mark(Mark::Active, good)?;
    Ok(())
}

/// This boot's id (re-rooted for tests, else the kernel's).
pub(crate) fn boot_id(paths: &Paths) -> String {
    const P: &str = "/proc/sys/kernel/random/boot_id";
    std::fs::read_to_string(paths.device(P))
        .or_else(|_| std::fs::read_to_string(P))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Reboots the machine (`systemctl reboot`). Test builds with `SVC_TEST_REBOOT_FILE` set
/// append a line there instead: the test plays the boot loader.
pub(crate) fn reboot(why: &str) -> Result<(), String> {
    crate::warn!(SUB, "rebooting: {why}");
    if cfg!(feature = "test-hooks") {
        if let Some(f) = std::env::var_os("SVC_TEST_REBOOT_FILE") {
            return crate::fsutil::append_lines(Path::new(&f), format!("{why}\n").as_bytes())
                .map_err(|e| e.to_string());
        }
    }
    let mut cmd = std::process::Command::new("systemctl");
    cmd.arg("reboot");
    match crate::process::run(cmd, Duration::from_secs(60)) {
        Ok(o) if o.success() => Ok(()),
        Ok(o) => Err(format!("systemctl reboot: {}", o.stderr_text())),
        Err(e) => Err(format!("systemctl reboot: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rebooting(asked_in: &str) -> Phase {
        Phase::Rebooting {
            version: "2".into(),
            slot: "rootfs.1".into(),
            from_slot: "rootfs.0".into(),
            boot_id: asked_in.into(),
        }
    }

    #[test]
    fn every_cut_point_finds_a_working_slot_and_a_next_step() {
        // Cut during the install: old slot, not the version's fault.
        let installing = Phase::Installing {
            version: "2".into(),
            from_slot: "rootfs.0".into(),
        };
        assert!(matches!(
            after_boot(&installing, "rootfs.0", "b1", 5),
            BootFinding::Failed { bad: false, .. }
        ));
        // Cut after RAUC's end, before the state said so: the new slot booted: gate.
        assert!(matches!(
            after_boot(&installing, "rootfs.1", "b2", 5),
            BootFinding::Next(Phase::Gate { since: 5, .. })
        ));
        // Asked to reboot, same boot: ask again; new slot: gate; old slot on another boot:
        // the boot loader fell back.
        assert_eq!(
            after_boot(&rebooting("b1"), "rootfs.0", "b1", 5),
            BootFinding::RebootAgain
        );
        assert!(matches!(
            after_boot(&rebooting("b1"), "rootfs.1", "b2", 5),
            BootFinding::Next(Phase::Gate { .. })
        ));
        assert!(matches!(
            after_boot(&rebooting("b1"), "rootfs.0", "b2", 5),
            BootFinding::Failed {
                bad: true,
                mark_other_bad: true,
                ..
            }
        ));
        // Installed, waiting for the window: the old slot: nothing changes; the new slot
        // booted anyway (a cut before the old one was primary again): its gate.
        let installed = Phase::Installed {
            version: "2".into(),
            slot: "rootfs.1".into(),
            from_slot: "rootfs.0".into(),
        };
        assert_eq!(
            after_boot(&installed, "rootfs.0", "b2", 5),
            BootFinding::Same
        );
        assert!(matches!(
            after_boot(&installed, "rootfs.1", "b2", 5),
            BootFinding::Next(Phase::Gate { since: 5, .. })
        ));
        // A cut during the gate's boot: the gate starts again; the same boot: goes on.
        let gate = Phase::Gate {
            version: "2".into(),
            slot: "rootfs.1".into(),
            from_slot: "rootfs.0".into(),
            since: 1,
            boot_id: "b2".into(),
        };
        assert_eq!(after_boot(&gate, "rootfs.1", "b2", 9), BootFinding::Same);
        assert!(matches!(
            after_boot(&gate, "rootfs.1", "b3", 9),
            BootFinding::Next(Phase::Gate { since: 9, .. })
        ));
        assert!(matches!(
            after_boot(&gate, "rootfs.0", "b3", 9),
            BootFinding::Failed { bad: true, .. }
        ));
        let back = Phase::RollingBack {
            version: "2".into(),
            slot: "rootfs.1".into(),
            from_slot: "rootfs.0".into(),
            why: "w".into(),
            reboots: 1,
        };
        assert_eq!(
            after_boot(&back, "rootfs.1", "b3", 9),
            BootFinding::RebootAgain
        );
        assert!(matches!(
            after_boot(&back, "rootfs.0", "b4", 9),
            BootFinding::RolledBack { .. }
        ));
        // A boot loader that keeps starting the bad slot: the reboots end.
        let stuck = match back {
            Phase::RollingBack {
                version,
                slot,
                from_slot,
                why,
                ..
            } => Phase::RollingBack {
                version,
                slot,
                from_slot,
                why,
                reboots: MAX_ROLLBACK_REBOOTS,
            },
            p => p,
        };
        assert!(matches!(
            after_boot(&stuck, "rootfs.1", "b5", 9),
            BootFinding::RollbackStuck { .. }
        ));
    }

    #[test]
    fn the_gate_passes_fails_or_waits() {
        let p = GatePolicy {
            server_up: Duration::from_secs(10),
            max_crashes: 3,
            deadline: Duration::from_secs(100),
        };
        let f = GateFacts {
            now: 50,
            since: 40,
            server_required: true,
            server_up_secs: Some(10),
            server_crashes: 0,
            last_contact: Some(41),
        };
        assert_eq!(gate_verdict(f, p), GateVerdict::Passed);
        // A contact from before the boot proves nothing.
        let old = GateFacts {
            last_contact: Some(39),
            ..f
        };
        assert_eq!(gate_verdict(old, p), GateVerdict::Waiting);
        assert!(matches!(
            gate_verdict(GateFacts { now: 140, ..old }, p),
            GateVerdict::Failed(w) if w.contains("management app")
        ));
        let crashing = GateFacts {
            server_crashes: 3,
            ..f
        };
        assert!(
            matches!(gate_verdict(crashing, p), GateVerdict::Failed(w) if w.contains("crashed 3"))
        );
        let short = GateFacts {
            server_up_secs: Some(3),
            now: 140,
            ..f
        };
        assert!(
            matches!(gate_verdict(short, p), GateVerdict::Failed(w) if w.contains("svc-server"))
        );
        // No svc-server to watch: the app alone.
        let none = GateFacts {
            server_required: false,
            server_up_secs: None,
            ..f
        };
        assert_eq!(gate_verdict(none, p), GateVerdict::Passed);
    }

    #[test]
    fn offers_are_judged_against_what_runs_and_what_failed() {
        let offer = |v: &str, fmt: &str| OsTarget {
            target: crate::protocol::Target {
                version: v.into(),
                url: "b".into(),
                sha256: None,
                size: None,
                signature: None,
                deltas: Vec::new(),
            },
            format: fmt.into(),
            sha1: None,
        };
        let mut s = OsState {
            version: Some("1".into()),
            ..OsState::default()
        };
        s.add_bad("2");
        assert_eq!(offer_decision(&s, None, None), OfferDecision::Keep);
        assert_eq!(
            offer_decision(&s, Some(&offer("1", FORMAT_RAUC)), None),
            OfferDecision::Keep
        );
        assert_eq!(
            offer_decision(&s, Some(&offer("2", FORMAT_RAUC)), None),
            OfferDecision::Bad
        );
        assert_eq!(
            offer_decision(&s, Some(&offer("3", FORMAT_RAUC)), None),
            OfferDecision::Install
        );
        assert!(matches!(
            offer_decision(&s, Some(&offer("3", "swu")), None),
            OfferDecision::Unsupported(_)
        ));
        assert_eq!(
            offer_decision(&s, Some(&offer("3", FORMAT_RAUC)), Some(UpgradeType::None)),
            OfferDecision::UpgradesOff
        );
        assert_eq!(
            offer_decision(
                &s,
                Some(&offer("3", FORMAT_RAUC)),
                Some(UpgradeType::Security)
            ),
            OfferDecision::Install
        );
        for v in 0..40 {
            s.add_bad(&v.to_string());
        }
        assert_eq!(s.bad.len(), MAX_BAD);
    }

    #[test]
    fn an_offer_without_hash_or_size_or_with_a_path_for_a_version_is_refused() {
        let mut t = OsTarget {
            target: crate::protocol::Target {
                version: "../x".into(),
                url: "b".into(),
                sha256: Some("a".repeat(64)),
                size: Some(1),
                signature: None,
                deltas: Vec::new(),
            },
            format: FORMAT_RAUC.into(),
            sha1: None,
        };
        let app = Provenance::App;
        assert!(matches!(artifact_of(&t, app), Err(OsError::BadOffer(_))));
        t.target.version = "2".into();
        assert!(artifact_of(&t, app).is_ok());
        t.target.size = None;
        assert!(matches!(artifact_of(&t, app), Err(OsError::BadOffer(_))));
        t.target.size = Some(1);
        t.target.sha256 = None;
        assert!(matches!(artifact_of(&t, app), Err(OsError::BadOffer(_))));
        // A sha1 (gooseBit's only hash) counts from hawkBit alone, and must be one.
        t.sha1 = Some("b".repeat(40));
        assert!(matches!(artifact_of(&t, app), Err(OsError::BadOffer(_))));
        assert!(artifact_of(&t, Provenance::Hawkbit).is_ok());
        t.sha1 = Some("b".repeat(39));
        assert!(matches!(
            artifact_of(&t, Provenance::Hawkbit),
            Err(OsError::BadOffer(_))
        ));
    }

    /// The gate's poll floor: a twentieth of the deadline, never under 1 s.
    #[test]
    fn the_gate_polls_the_app_at_least_every_twentieth_of_its_deadline() {
        let p = |secs| GatePolicy {
            deadline: Duration::from_secs(secs),
            ..GatePolicy::default()
        };
        assert_eq!(
            GatePolicy::default().app_poll_every(),
            Duration::from_secs(45)
        );
        assert_eq!(p(150).app_poll_every(), Duration::from_millis(7500));
        assert_eq!(p(5).app_poll_every(), Duration::from_secs(1));
    }
}
