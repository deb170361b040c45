//! Updates that cannot brick a machine: download (streamed, resumable), verify (size,
//! sha256, ed25519, ELF, `version --json`), activate (atomic link swap), record, roll back,
//! and keep the cache small.
//!
//! The invariant every step keeps: at every instant `bin/<name>` points at a complete,
//! verified binary. A download lands in `cache/<name>-<version>.part`; only a file that passed
//! every check is renamed to `cache/<name>-<version>`; only such a file is ever a link target;
//! the link is replaced by `rename(2)` of a new link over it. See `docs/updates.md`.
//!
//! The daemon decides *what* to install (channels, pins, maintenance window); this module
//! does *how*. Its face, the whole of what the daemon (and every test of the engine) uses:
//! - [`read_state`]: every [`Kind`]'s whole state ([`BinaryState`]: current, previous,
//!   target, pin, bad versions, probation) from one load of the records under [`StateLock`];
//! - [`Engine::stage`]: download (or find in the cache) and verify one [`Artifact`];
//! - [`Engine::activate`]: make a staged version active (link swap, record, cache cleanup);
//! - [`rollback`] and [`end_server_probation`]: what a failed or a passed probation does.
//!
//! Every operation returns [`UpdateError`]; a failure leaves the old binary active.
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::paths::Paths;

pub(crate) mod activate;
pub mod budget;
pub mod cache;
pub mod delta;
pub(crate) mod download;
pub(crate) mod record;
pub mod rollback;
pub mod seed;
mod state;
pub mod swu;
pub mod verify;

pub use download::{DownloadOptions, Fetched, ProgressHook};
pub use record::{NameRecord, Refusal, StateLock, VersionRecords};
pub use rollback::{
    agent_boot_guard, end_server_probation, mark_agent_healthy, probation_verdict, rollback,
    GuardOutcome, ProbationPolicy, ProbationVerdict,
};
pub use seed::{seed_from_image, SeedOutcome};
pub(crate) use state::{read_state, BinaryState, Snapshot};

/// Log subsystem tag of this module.
pub(crate) const SUB: &str = "update";

/// What the engine installs. The kind, not a name, chooses how a version is activated and
/// rolled back (the agent's boot guard, svc-server's probation); a new kind of target is a
/// new variant, and the compiler names every place that must handle it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Agent,
    Server,
}

impl Kind {
    /// Every kind, in the order their states are read.
    pub const ALL: [Kind; 2] = [Kind::Agent, Kind::Server];

    /// The link name in `bin/`, the records' key and the expected `binary_name`.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Agent => "svc-agent",
            Kind::Server => "svc-server",
        }
    }

    /// The kind a name denotes; `None` for a name this engine does not install.
    pub fn of(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One binary the management app offers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Artifact {
    /// `svc-agent` or `svc-server`: the link name in `bin/` and the expected `binary_name`.
    pub name: String,
    pub version: String,
    /// `https://…`, `http://…` (only when written so), or `file:///…`.
    pub url: String,
    /// Lowercase hex. `None` for a `pin_url` artifact (a URL the user pinned).
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub size: Option<u64>,
    /// ed25519 over [`Artifact::signed_message`], hex or base64.
    #[serde(default)]
    pub signature: Option<String>,
    /// The machine's identity, sent with requests to the app's own origin only (never
    /// serialized, never to another host a redirect names).
    #[serde(skip)]
    pub identity: Option<crate::http::Identity>,
}

impl Artifact {
    /// The message a vendor signs: every field the device acts on, one per line.
    /// `target` is the Rust target arch (`x86_64`, `aarch64`), so that a signature for one
    /// architecture cannot be replayed for another.
    pub fn signed_message(&self, target: &str) -> Vec<u8> {
        format!(
            "svc-artifact-v1\n{}\n{}\n{}\n{}\n{}\n",
            self.name,
            self.version,
            target,
            self.sha256.as_deref().unwrap_or("").to_ascii_lowercase(),
            self.size.map(|s| s.to_string()).unwrap_or_default()
        )
        .into_bytes()
    }

    /// A `pin_url` artifact carries no sha256: its content is whatever the URL serves.
    pub(crate) fn is_pin(&self) -> bool {
        self.sha256.is_none()
    }
}

/// What [`Engine::activate`] did: the link now points at `version`; the caller restarts
/// the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activated {
    pub version: String,
    pub previous: Option<String>,
}

/// What [`Engine::stage`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staging {
    /// Verified and in the cache; not active yet.
    Ready { version: String },
    /// This version is already the active one.
    AlreadyCurrent { version: String },
    /// A pinned URL answered 304 Not Modified: the active version stays.
    NotModified { version: String },
}

/// Every way an update can fail. Each leaves the previously active binary active.
#[derive(Debug)]
pub enum UpdateError {
    /// A name that is not `svc-agent`/`svc-server`, an empty version, a malformed hash.
    BadArtifact(String),
    /// An SWUpdate image's `sw-description` is refused (where and why).
    SwDescription(swu::DescriptionError),
    /// A delta refused (its bytes, its description), or no usable one where the vendor's
    /// rule forbids the full download.
    Delta(delta::DeltaError),
    /// The version was rolled back and is not retried until the app offers another.
    MarkedBad {
        name: String,
        version: String,
    },
    UnsupportedUrl(String),
    /// A URL the daemon refuses for where it points (an https app's non-https artifact, a
    /// file outside a `file://` app's directory): the whole message.
    UrlRefused(String),
    /// 4xx other than 408/429: not retried.
    HttpStatus {
        url: String,
        status: u16,
        reason: String,
    },
    /// Network failures after the retry budget was spent.
    Network {
        url: String,
        attempts: u32,
        last: String,
    },
    /// `needed` includes `margin`, the free space an update never takes (the agent's records
    /// and log queue, the rest of the system).
    NoSpace {
        needed: u64,
        available: u64,
        margin: u64,
    },
    /// More bytes than announced.
    TooLarge {
        limit: u64,
    },
    SizeMismatch {
        expected: u64,
        actual: u64,
    },
    ShaMismatch {
        expected: String,
        actual: String,
    },
    /// An archive's sha1 (the only hash gooseBit gives) is not the server's.
    Sha1Mismatch {
        expected: String,
        actual: String,
    },
    Signature(String),
    NotElf(String),
    WrongArch {
        expected: u16,
        actual: u16,
    },
    VersionCheck(String),
    /// Rollback requested with no previous version on disk.
    NoPrevious(String),
    Io {
        context: String,
        err: std::io::Error,
    },
    Record(String),
    /// The byte budget holds the download until `until` (unix time, the start of the next
    /// period), `wait_secs` from when it was decided: `needed` bytes do not fit the `left`
    /// ones. Nothing was downloaded; not a refusal, the same offer goes then.
    OverBudget {
        name: String,
        version: String,
        needed: u64,
        left: u64,
        until: u64,
        wait_secs: u64,
    },
}

impl UpdateError {
    /// A refusal of the artifact for what it is (its bytes, its description, its server's
    /// final answer), which trying again cannot change; not a network failure, a full disk
    /// or a local fault.
    pub fn is_refusal(&self) -> bool {
        use UpdateError::*;
        matches!(
            self,
            BadArtifact(_)
                | SwDescription(_)
                | UnsupportedUrl(_)
                | UrlRefused(_)
                | HttpStatus { .. }
                | TooLarge { .. }
                | SizeMismatch { .. }
                | ShaMismatch { .. }
                | Sha1Mismatch { .. }
                | Signature(_)
                | NotElf(_)
                | WrongArch { .. }
                | VersionCheck(_)
        ) || matches!(self, Delta(e) if e.is_refusal())
    }

    /// The downloaded bytes are not what the server described (its hash or size): a fault
    /// of the transfer or of the server's copy, which another download may not repeat;
    /// unlike a file that disagrees with its signed description, or a bad signature.
    pub fn is_transfer_mismatch(&self) -> bool {
        matches!(
            self,
            UpdateError::ShaMismatch { .. }
                | UpdateError::Sha1Mismatch { .. }
                | UpdateError::SizeMismatch { .. }
        )
    }
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use UpdateError::*;
        match self {
            BadArtifact(m) => write!(f, "bad artifact: {m}"),
            SwDescription(e) => write!(f, "bad artifact: swu: {e}"),
            Delta(e) => write!(f, "bad artifact: delta: {e}"),
            MarkedBad { name, version } => write!(
                f,
                "{name} {version} was rolled back as bad; not retried until another version is offered"
            ),
            UnsupportedUrl(u) => write!(f, "unsupported URL (https://, explicit http://, file://): {u}"),
            UrlRefused(m) => f.write_str(m),
            HttpStatus { url, status, reason } => write!(f, "{url}: HTTP {status} {reason}"),
            Network { url, attempts, last } => {
                write!(f, "{url}: failed after {attempts} attempts: {last}")
            }
            NoSpace {
                needed,
                available,
                margin,
            } => write!(
                f,
                "not enough free space in the cache: need {needed} bytes ({margin} of them the \
                 margin an update leaves free), {available} available"
            ),
            TooLarge { limit } => write!(f, "download exceeds the announced size of {limit} bytes"),
            SizeMismatch { expected, actual } => {
                write!(f, "size mismatch: expected {expected} bytes, got {actual}")
            }
            ShaMismatch { expected, actual } => {
                write!(f, "sha256 mismatch: expected {expected}, got {actual}")
            }
            Sha1Mismatch { expected, actual } => {
                write!(f, "sha1 mismatch: expected {expected}, got {actual}")
            }
            Signature(m) => write!(f, "signature check failed: {m}"),
            NotElf(m) => write!(f, "not an executable ELF file: {m}"),
            WrongArch { expected, actual } => {
                // Named, so the operator sees which build went to which machine.
                let name = |m: &u16| verify::arch_of_machine(*m).unwrap_or("unknown");
                write!(
                    f,
                    "ELF for the wrong architecture: e_machine {actual} ({}), this machine needs {expected} ({})",
                    name(actual),
                    name(expected)
                )
            }
            VersionCheck(m) => write!(f, "version check of the new binary failed: {m}"),
            NoPrevious(n) => write!(f, "no previous version of {n} to roll back to"),
            Io { context, err } => write!(f, "{context}: {err}"),
            Record(m) => write!(f, "version record: {m}"),
            OverBudget {
                name,
                version,
                needed,
                left,
                until,
                ..
            } => write!(
                f,
                "{name} {version} waits for the byte budget: it needs {needed} bytes, {left} are left until {}",
                crate::logging::format_timestamp_ms(until.saturating_mul(1000))
            ),
        }
    }
}

impl std::error::Error for UpdateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpdateError::Io { err, .. } => Some(err),
            _ => None,
        }
    }
}

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> UpdateError {
    let context = context.into();
    move |err| UpdateError::Io { context, err }
}

/// Names this module installs.
pub(crate) const NAMES: [&str; 2] = [Kind::Agent.name(), Kind::Server.name()];

/// The Rust arch name of this build, part of the signed message.
pub fn this_target() -> &'static str {
    std::env::consts::ARCH
}

/// Crash points for power-cut tests: `SVC_CRASH_AT=<point>` makes the process SIGKILL itself
/// when it reaches that point (no unwinding, no flush: like a power cut for this process).
/// Only in builds with the `test-hooks` feature (the tests); a no-op in every shipped build.
pub(crate) fn crash_point(point: &str) {
    if !cfg!(feature = "test-hooks") {
        return;
    }
    if let Some(want) = std::env::var_os("SVC_CRASH_AT") {
        if want == point {
            crate::warn!(SUB, "SVC_CRASH_AT={point}: killing this process");
            crate::sys::kill(std::process::id() as i32, libc::SIGKILL);
            // SIGKILL is not deliverable late, but keep the promise if it ever returns.
            std::process::abort();
        }
    }
}

/// Every crash point, in the order an update reaches them.
pub const CRASH_POINTS: &[&str] = &[
    "download-started",
    "download-half",
    "download-complete",
    "verified",
    "cached",
    "link-temp-created",
    "link-swapped",
    "recorded",
    "cleaned",
];

/// Settings of an [`Engine`].
#[derive(Debug, Clone)]
pub struct UpdateOptions {
    pub download: DownloadOptions,
    /// Upper bound of `<new binary> version --json`.
    pub version_timeout: Duration,
    /// Cache cap in bytes (see [`cache::clean`]).
    pub cache_cap: u64,
    /// Run `version --json` of the new binary (off only in unit tests of other parts).
    pub run_version_check: bool,
    /// What happens when an offer's deltas cannot be used (docs/updates.md, *Deltas*).
    pub delta_fallback: DeltaFallback,
}

/// The vendor's rule for an offer whose deltas cannot be used (`agent.updates.delta_fallback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeltaFallback {
    /// Download the full artifact instead (logged, and in the status with the reason).
    #[default]
    Full,
    /// Download the full artifact only when it fits the byte budget now; when it does
    /// not, nothing is downloaded until the next period (or a usable delta). Valid only
    /// with a budget set.
    Budget,
    /// Download nothing: the offer is refused until a usable delta comes.
    Never,
}

impl DeltaFallback {
    /// The config's word for it (validated there: `full`, `budget` or `never`).
    pub(crate) fn from_setting(word: &str) -> DeltaFallback {
        match word {
            "never" => DeltaFallback::Never,
            "budget" => DeltaFallback::Budget,
            _ => DeltaFallback::Full,
        }
    }
}

impl Default for UpdateOptions {
    fn default() -> Self {
        UpdateOptions {
            download: DownloadOptions::default(),
            version_timeout: Duration::from_secs(10),
            cache_cap: 512 * 1024 * 1024,
            run_version_check: true,
            delta_fallback: DeltaFallback::Full,
        }
    }
}

/// Brings artifacts to "active" under one root.
#[derive(Debug, Clone)]
pub struct Engine {
    pub paths: Paths,
    pub opts: UpdateOptions,
}

impl Engine {
    pub fn new(paths: Paths, opts: UpdateOptions) -> Self {
        Engine { paths, opts }
    }

    /// The file a version lives in once verified.
    pub(crate) fn cached_file(&self, name: &str, version: &str) -> PathBuf {
        self.paths.cache_dir().join(format!("{name}-{version}"))
    }

    /// Everything before activation: download (or find in the cache) and verify. A
    /// `Ready` version is in `cache/<name>-<version>` and may be activated with
    /// [`Engine::activate`] later (the daemon waits for the maintenance window). On any
    /// error the previously active binary stays active, and the failed download is removed
    /// (unless the failure was a dropped connection, whose `.part` is kept so that the next
    /// call resumes it).
    pub fn stage(&self, a: &Artifact) -> Result<Staging, UpdateError> {
        self.stage_offer(a, &[])
    }

    /// [`Engine::stage`] of an offer with deltas (URLs resolved and allowed): the bytes are
    /// made from the running binary by the delta from it when there is one; every other
    /// step is the same.
    pub fn stage_offer(
        &self,
        a: &Artifact,
        deltas: &[crate::protocol::Delta],
    ) -> Result<Staging, UpdateError> {
        let staged = self.stage_checked(a, deltas);
        match &staged {
            Err(e) if e.is_refusal() && !a.is_pin() => self.note_refusal(a, Some(e)),
            Ok(_) if !a.is_pin() => self.note_refusal(a, None),
            _ => {}
        }
        staged
    }

    /// Records (or, with `None`, clears) the engine's refusal of `a` in the version records.
    fn note_refusal(&self, a: &Artifact, refusal: Option<&UpdateError>) {
        let noted = StateLock::acquire(&self.paths).and_then(|held| {
            let mut records = VersionRecords::load(&self.paths)?;
            let rec = records.entry(&a.name);
            let new = refusal.map(|e| Refusal {
                version: a.version.clone(),
                reason: e.to_string(),
                transfer: e.is_transfer_mismatch(),
            });
            if rec.refused != new {
                rec.refused = new;
                records.save(&self.paths, &held)?;
            }
            Ok(())
        });
        if let Err(e) = noted {
            crate::warn!(SUB, "{} {}: recording the outcome: {e}", a.name, a.version);
        }
    }

    fn stage_checked(
        &self,
        a: &Artifact,
        deltas: &[crate::protocol::Delta],
    ) -> Result<Staging, UpdateError> {
        let kind = validate_artifact(a)?;
        let held = StateLock::acquire(&self.paths)?;
        let mut records = VersionRecords::load(&self.paths)?;
        let rec = records.entry(&a.name);
        if a.version != rec.target.clone().unwrap_or_default() {
            // A new offer lifts earlier bad marks: "not retried until the app offers a
            // different version".
            if !rec.bad.is_empty() && !rec.bad.contains(&a.version) {
                rec.bad.clear();
            }
        }
        if rec.bad.contains(&a.version) {
            return Err(UpdateError::MarkedBad {
                name: a.name.clone(),
                version: a.version.clone(),
            });
        }
        if !a.is_pin() {
            rec.target = Some(a.version.clone());
        }
        records.save(&self.paths, &held)?;

        if a.is_pin() {
            drop(held);
            return self.stage_pin(a, records);
        }
        let linked = activate::linked_version(&self.paths, &a.name);
        let cached = self.cached_file(&a.name, &a.version);
        if linked.as_deref() == Some(a.version.as_str()) && cached.is_file() {
            record_activation(&mut records, kind, &a.version, linked.as_deref());
            records.save(&self.paths, &held)?;
            return Ok(Staging::AlreadyCurrent {
                version: a.version.clone(),
            });
        }
        // Never across a download: the other worker and the main loop need the records.
        drop(held);
        if cached.is_file() {
            // Verified earlier (only verified files get this name); re-check the bytes in
            // case the SD card lost them, then activate.
            if let Err(e) = verify::check_file_hash(&cached, a) {
                crate::warn!(
                    SUB,
                    "cached {} is damaged ({e}); downloading again",
                    cached.display()
                );
                let _ = std::fs::remove_file(&cached);
            }
        }
        if !cached.is_file() {
            if !deltas.is_empty() {
                if let Some((part, sha)) = self.by_delta(a, deltas)? {
                    self.verify_then_cache(a, &part, &sha, &cached)?;
                    return Ok(Staging::Ready {
                        version: a.version.clone(),
                    });
                }
            }
            let fetched = download::fetch(&self.paths, a, &self.opts.download, None)?;
            let (part, sha) = match fetched {
                Fetched::Complete { part, sha256, .. } => (part, sha256),
                Fetched::NotModified => {
                    return Err(UpdateError::Record(
                        "unexpected 304 for a hashed artifact".into(),
                    ))
                }
            };
            self.verify_then_cache(a, &part, &sha, &cached)?;
        }
        Ok(Staging::Ready {
            version: a.version.clone(),
        })
    }

    /// The offer's bytes by delta; `None`: download the full artifact (the vendor's rule
    /// allows it). A fault (network, disk) is returned as it is, to be retried (the delta's
    /// download resumes); a delta that cannot be used or is refused falls back by the rule,
    /// logged and noted in the records (the status) with why.
    fn by_delta(
        &self,
        a: &Artifact,
        deltas: &[crate::protocol::Delta],
    ) -> Result<Option<(PathBuf, String)>, UpdateError> {
        let miss = match delta::obtain(&self.paths, a, deltas, &self.opts.download) {
            Ok(got) => {
                self.note_delta(a, "applied", None);
                return Ok(Some(got));
            }
            Err(delta::Miss::Failed(e)) if !e.is_refusal() => return Err(e),
            Err(miss) => miss,
        };
        let why = miss.to_string();
        let budget = self.opts.download.budget.is_some();
        // Within the budget: the full download is under the budget as every download is,
        // and waits when it does not fit (`budget::admit`).
        let refused = match self.opts.delta_fallback {
            DeltaFallback::Full => None,
            DeltaFallback::Budget if budget => None,
            DeltaFallback::Budget => Some("delta_fallback is budget and no budget is set"),
            DeltaFallback::Never => Some("delta_fallback is never"),
        };
        match refused {
            None => {
                let within = if budget {
                    " (within the byte budget)"
                } else {
                    ""
                };
                crate::warn!(
                    SUB,
                    "{} {}: falling back to the full download{within}: {why}",
                    a.name,
                    a.version
                );
                self.note_delta(a, "full-download", Some(why));
                Ok(None)
            }
            Some(rule) => {
                crate::error!(
                    SUB,
                    "{} {}: not downloaded ({rule}): {why}",
                    a.name,
                    a.version
                );
                self.note_delta(a, "refused", Some(why));
                Err(UpdateError::Delta(delta::DeltaError::NoFallback {
                    miss: Box::new(miss),
                }))
            }
        }
    }

    /// Records how the offer `a` was obtained when it came with deltas.
    fn note_delta(&self, a: &Artifact, outcome: &str, reason: Option<String>) {
        let noted = StateLock::acquire(&self.paths).and_then(|held| {
            let mut records = VersionRecords::load(&self.paths)?;
            records.entry(&a.name).delta = Some(record::DeltaNote {
                version: a.version.clone(),
                outcome: outcome.to_string(),
                reason,
            });
            records.save(&self.paths, &held)
        });
        if let Err(e) = noted {
            crate::warn!(
                SUB,
                "{} {}: recording the delta's outcome: {e}",
                a.name,
                a.version
            );
        }
    }

    /// Makes a staged version active: link swap, record and cache cleanup as one turn under
    /// the state lock.
    pub fn activate(&self, kind: Kind, version: &str) -> Result<Activated, UpdateError> {
        let name = kind.name();
        let cached = self.cached_file(name, version);
        if !cached.is_file() {
            return Err(UpdateError::Record(format!(
                "{name} {version} is not in the cache"
            )));
        }
        let held = StateLock::acquire(&self.paths)?;
        let mut records = VersionRecords::load(&self.paths)?;
        let linked = activate::linked_version(&self.paths, name);
        if linked.as_deref() != Some(version) {
            match kind {
                // Before the swap: a boot record naming a version the link does not point
                // at is stale and the guard drops it.
                Kind::Agent => rollback::start_agent_probation(&self.paths, version)?,
                // Likewise before the swap: a probation naming a version the link does not
                // point at is ignored (`read_state`).
                Kind::Server => {
                    records.entry(name).probation = Some(version.to_string());
                    records.save(&self.paths, &held)?;
                }
            }
            activate::swap_link(&self.paths, name, &cached)?;
        }
        let previous = record_activation(&mut records, kind, version, linked.as_deref());
        records.entry(name).target = Some(version.to_string());
        records.save(&self.paths, &held)?;
        crash_point("recorded");
        crate::info!(
            SUB,
            "{} {} active (previous {})",
            name,
            version,
            previous.as_deref().unwrap_or("none")
        );
        if let Err(e) = cache::clean(&self.paths, &records, self.opts.cache_cap) {
            crate::warn!(SUB, "cache cleanup: {e}");
        }
        crash_point("cleaned");
        Ok(Activated {
            version: version.to_string(),
            previous,
        })
    }

    fn verify_then_cache(
        &self,
        a: &Artifact,
        part: &std::path::Path,
        sha256: &str,
        cached: &std::path::Path,
    ) -> Result<(), UpdateError> {
        if let Err(e) = verify::verify_file(&self.paths, a, part, sha256, &self.opts) {
            crate::error!(SUB, "{} {}: {e}; removing the download", a.name, a.version);
            download::discard(part);
            return Err(e);
        }
        crash_point("verified");
        activate::install_in_cache(part, cached)?;
        download::discard_sidecar(part);
        crash_point("cached");
        Ok(())
    }

    /// A pinned URL: no sha256; conditional request against the validators of the last
    /// download; the installed version is `<version>+<first 12 hex of the sha256>` so that a
    /// rebuilt file at the same URL never overwrites the running one.
    fn stage_pin(&self, a: &Artifact, records: VersionRecords) -> Result<Staging, UpdateError> {
        crate::info!(
            SUB,
            "{} from pinned URL {}: no sha256 to check; relying on ELF and version checks",
            a.name,
            a.url
        );
        let pin = download::PinState::load(&self.paths, &a.name);
        let active = activate::linked_version(&self.paths, &a.name);
        let conditional = match (&pin, &active) {
            (Some(p), Some(v)) if p.url == a.url && &p.version == v => Some(p.clone()),
            _ => None,
        };
        // A pin is counted by the byte budget, never held by it.
        let mut opts = self.opts.download.clone();
        if let Some(gate) = opts.budget.as_mut() {
            gate.exempt = true;
        }
        let fetched = download::fetch(&self.paths, a, &opts, conditional.as_ref())?;
        let (part, sha, validators) = match fetched {
            Fetched::NotModified => {
                let version = active.unwrap_or_default();
                crate::info!(SUB, "{} pinned URL not modified; {} stays", a.name, version);
                return Ok(Staging::NotModified { version });
            }
            Fetched::Complete {
                part,
                sha256,
                validators,
            } => (part, sha256, validators),
        };
        let version = pin_version(&a.version, &sha);
        if records
            .get(&a.name)
            .is_some_and(|r| r.bad.contains(&version))
        {
            download::discard(&part);
            return Err(UpdateError::MarkedBad {
                name: a.name.clone(),
                version,
            });
        }
        let cached = self.cached_file(&a.name, &version);
        if cached.is_file() && verify::check_file_hash(&cached, &hashed(a, &sha)).is_ok() {
            download::discard(&part);
        } else {
            self.verify_then_cache(a, &part, &sha, &cached)?;
        }
        download::PinState {
            url: a.url.clone(),
            version: version.clone(),
            etag: validators.etag,
            last_modified: validators.last_modified,
        }
        .save(&self.paths, &a.name)?;
        if active.as_deref() == Some(version.as_str()) {
            return Ok(Staging::AlreadyCurrent { version });
        }
        Ok(Staging::Ready { version })
    }
}

fn hashed(a: &Artifact, sha: &str) -> Artifact {
    let mut h = a.clone();
    h.sha256 = Some(sha.to_string());
    h.size = None;
    h
}

/// `<announced>+<sha12>`, or `pin+<sha12>` when the app announced none.
pub(crate) fn pin_version(announced: &str, sha: &str) -> String {
    let short = &sha[..sha.len().min(12)];
    let base = if announced.is_empty() {
        "pin"
    } else {
        announced
    };
    format!("{base}+{short}")
}

/// The cache cleanup at the agent's start: an activation's cleanup comes after its record,
/// and a power cut between the two skipped it; the restarted agent finds the version current,
/// activates nothing, and would have kept what that cleanup removes until the next activation
/// (the power-cut campaign, seed 2628, cut 424). The same rules as after an activation
/// (`cache::clean`), under the state lock. Returns the files removed.
pub(crate) fn clean_cache_at_start(paths: &Paths) -> Result<Vec<PathBuf>, UpdateError> {
    if !paths.cache_dir().is_dir() {
        return Ok(Vec::new());
    }
    let _held = StateLock::acquire(paths)?;
    let records = VersionRecords::load(paths)?;
    cache::clean(paths, &records, UpdateOptions::default().cache_cap).map(|r| r.removed)
}

/// Updates `current`/`previous` for an activation of `version` while the link pointed at
/// `linked`. Returns the previous version. Robust to a crash between link swap and record:
/// when the link already points at `version`, the record's old `current` becomes `previous`.
pub(crate) fn record_activation(
    records: &mut VersionRecords,
    kind: Kind,
    version: &str,
    linked: Option<&str>,
) -> Option<String> {
    let rec = records.entry(kind.name());
    let before = match linked {
        Some(l) if l != version => Some(l.to_string()),
        _ => rec.current.clone().filter(|c| c != version),
    };
    if rec.current.as_deref() != Some(version) {
        if before.is_some() {
            rec.previous = before;
        }
        rec.current = Some(version.to_string());
    }
    rec.previous.clone()
}

/// Checks what the engine acts on; returns the kind the artifact's name denotes.
fn validate_artifact(a: &Artifact) -> Result<Kind, UpdateError> {
    let Some(kind) = Kind::of(&a.name) else {
        return Err(UpdateError::BadArtifact(format!(
            "unknown name {:?}",
            a.name
        )));
    };
    let bad_char = |c: char| !(c.is_ascii_alphanumeric() || "._+-".contains(c));
    if a.version.is_empty() && !a.is_pin() || a.version.chars().any(bad_char) {
        return Err(UpdateError::BadArtifact(format!(
            "version {:?} is empty or has characters outside [A-Za-z0-9._+-]",
            a.version
        )));
    }
    if let Some(s) = &a.sha256 {
        if !crate::encoding::is_sha256_hex(s) {
            return Err(UpdateError::BadArtifact(format!(
                "sha256 {s:?} is not 64 hex digits"
            )));
        }
    }
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn art(sha: Option<&str>) -> Artifact {
        Artifact {
            name: "svc-server".into(),
            version: "1.2.3".into(),
            url: "https://x/y".into(),
            sha256: sha.map(String::from),
            size: Some(10),
            signature: None,
            identity: None,
        }
    }

    #[test]
    fn signed_message_is_canonical() {
        let a = art(Some(&"AB".repeat(32)));
        let m = String::from_utf8(a.signed_message("aarch64")).unwrap();
        assert_eq!(
            m,
            format!(
                "svc-artifact-v1\nsvc-server\n1.2.3\naarch64\n{}\n10\n",
                "ab".repeat(32)
            )
        );
    }

    #[test]
    fn rejects_path_tricks_in_names_and_versions() {
        let mut a = art(Some(&"a".repeat(64)));
        a.version = "../../etc/passwd".into();
        assert!(matches!(
            validate_artifact(&a),
            Err(UpdateError::BadArtifact(_))
        ));
        let mut a = art(Some(&"a".repeat(64)));
        a.name = "sh".into();
        assert!(validate_artifact(&a).is_err());
        assert!(validate_artifact(&art(Some("abc"))).is_err());
        assert!(validate_artifact(&art(Some(&"a".repeat(64)))).is_ok());
    }

    #[test]
    fn activation_record_survives_crash_after_link_swap() {
        let mut r = VersionRecords::default();
        let s = Kind::Server;
        assert_eq!(record_activation(&mut r, s, "1", None), None);
        assert_eq!(
            record_activation(&mut r, s, "2", Some("1")),
            Some("1".into())
        );
        // Link already swapped to 3 but the record still says current=2.
        assert_eq!(
            record_activation(&mut r, s, "3", Some("3")),
            Some("2".into())
        );
        // Re-running is idempotent.
        assert_eq!(
            record_activation(&mut r, s, "3", Some("3")),
            Some("2".into())
        );
        assert_eq!(r.get("svc-server").unwrap().current.as_deref(), Some("3"));
    }

    #[test]
    fn pin_versions_differ_by_content() {
        assert_eq!(pin_version("", &"ab".repeat(32)), "pin+abababababab");
        assert_eq!(pin_version("2.0", "0123456789abcdef"), "2.0+0123456789ab");
    }
}
