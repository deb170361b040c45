//! `state_dir/versions.json`: `{name: {current, previous, target, bad: [versions]}}`,
//! written atomically. The link in `bin/` is the truth about what runs; this record says
//! what to roll back to and which versions not to retry.
//!
//! One owner at a time: every read-change-write of this file, of `agent-boot.json` and of
//! the links in `bin/` happens while holding [`StateLock`]. The two update workers (one per
//! artifact), the main loop (rollback, healthy mark) and the boot guard (another process)
//! take turns; [`VersionRecords::save`] needs the lock as a token, so a save outside it
//! does not compile.
use std::collections::BTreeMap;
use std::path::PathBuf;

use super::UpdateError;
use crate::paths::Paths;

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NameRecord {
    #[serde(default)]
    pub current: Option<String>,
    #[serde(default)]
    pub previous: Option<String>,
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub bad: Vec<String>,
    /// svc-server: the version activated and not yet through its probation. On disk so
    /// that a restart (a power cut) during the probation does not end it: the agent resumes
    /// watching when this is the linked version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probation: Option<String>,
    /// The last version the engine refused for what its bytes are (hash, size, signature,
    /// ELF, version check; not a network failure), and why: for a backend that must tell
    /// its server (hawkBit's feedback). Cleared when another version is offered or this
    /// one is staged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    /// How the last offer that came with deltas was obtained: `applied`, `full-download`
    /// (the vendor's rule allowed the fall-back) or `refused`, and why (docs/updates.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<DeltaNote>,
}

/// The outcome of an offer's deltas.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeltaNote {
    pub version: String,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A version the engine refused, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Refusal {
    pub version: String,
    pub reason: String,
    /// The bytes did not match the server's hash or size ([`super::UpdateError::is_transfer_mismatch`]):
    /// the same offer again is worth another download (hawkBit's feedback, issue 46).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transfer: bool,
}

#[cfg(test)]
thread_local! {
    /// The loads of the records on this thread: the daemon's pass reads them once.
    pub(crate) static LOADS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct VersionRecords(pub BTreeMap<String, NameRecord>);

/// The update state lock: an exclusive `flock` on `state_dir/records.lock`, held for one
/// read-change-write (never across a download). Waits for the holder; flock locks belong
/// to the open file, so threads exclude each other as processes do.
pub struct StateLock {
    _lock: crate::fsutil::FileLock,
}

impl StateLock {
    pub fn acquire(paths: &Paths) -> Result<StateLock, UpdateError> {
        let p = paths.state_dir().join("records.lock");
        crate::fsutil::FileLock::exclusive(&p)
            .map(|l| StateLock { _lock: l })
            .map_err(super::io_err(format!("locking {}", p.display())))
    }
}

impl VersionRecords {
    pub fn path(paths: &Paths) -> PathBuf {
        paths.state_dir().join("versions.json")
    }

    /// A missing file is an empty record. An unreadable one is set aside (renamed
    /// `versions.json.corrupt`) and treated as empty: the links still say what runs.
    pub fn load(paths: &Paths) -> Result<Self, UpdateError> {
        #[cfg(test)]
        LOADS.with(|n| n.set(n.get() + 1));
        let p = Self::path(paths);
        match crate::fsutil::read_regular(&p, crate::fsutil::STATE_FILE_LIMIT) {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(r) => Ok(r),
                Err(e) => {
                    crate::warn!(
                        super::SUB,
                        "{} is corrupt ({e}); starting afresh",
                        p.display()
                    );
                    let _ = std::fs::rename(&p, p.with_extension("json.corrupt"));
                    Ok(Self::default())
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(UpdateError::Io {
                context: format!("reading {}", p.display()),
                err: e,
            }),
        }
    }

    /// Writes the record; `_held` proves the caller holds the state lock since its `load`.
    pub fn save(&self, paths: &Paths, _held: &StateLock) -> Result<(), UpdateError> {
        let p = Self::path(paths);
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| UpdateError::Record(format!("serialising: {e}")))?;
        crate::fsutil::atomic_write(&p, &bytes, 0o644)
            .map_err(super::io_err(format!("writing {}", p.display())))
    }

    pub fn get(&self, name: &str) -> Option<&NameRecord> {
        self.0.get(name)
    }

    pub fn entry(&mut self, name: &str) -> &mut NameRecord {
        self.0.entry(name.to_string()).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_corruption() {
        let dir = std::env::temp_dir().join(format!("svc-rec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let paths = Paths::new(&dir);
        assert_eq!(
            VersionRecords::load(&paths).unwrap(),
            VersionRecords::default()
        );
        let mut r = VersionRecords::default();
        r.entry("svc-server").current = Some("1.0.0".into());
        r.entry("svc-server").bad.push("0.9.0".into());
        r.save(&paths, &StateLock::acquire(&paths).unwrap())
            .unwrap();
        let text = std::fs::read_to_string(VersionRecords::path(&paths)).unwrap();
        assert!(text.contains("\"svc-server\""), "{text}");
        assert_eq!(VersionRecords::load(&paths).unwrap(), r);
        std::fs::write(VersionRecords::path(&paths), b"{not json").unwrap();
        assert_eq!(
            VersionRecords::load(&paths).unwrap(),
            VersionRecords::default()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
