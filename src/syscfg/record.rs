//! The record of what agent-syscfg wrote: `/opt/svc/syscfg-state.json`.
//!
//! One entry per file the subsystem wrote, with the sha256 of the exact bytes. Revert removes
//! a file only while its content still has that hash, so a file someone else wrote or changed
//! is never deleted.
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Device path of the record with the conventions' state directory (tests, docs).
pub const RECORD_PATH: &str = "/opt/svc/syscfg-state.json";
/// The record's file name in the state directory.
pub(crate) const RECORD_FILE: &str = "syscfg-state.json";

/// Where the record lives: `syscfg-state.json` in the state directory (`/opt/svc` or the
/// image's chosen data-partition directory).
pub(crate) fn record_path(paths: &crate::paths::Paths) -> std::path::PathBuf {
    paths.state_dir().join(RECORD_FILE)
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WrittenFiles {
    /// Files the subsystem wrote, sorted by path (deterministic text).
    #[serde(default)]
    pub files: Vec<RecordedFile>,
    /// A journald restart is owed: the drop-in changed but the restart failed. Retried on the
    /// next apply so that journald does not keep running on stale limits.
    #[serde(default)]
    pub journald_restart_pending: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedFile {
    /// Device path (`/etc/...`), never the `--root`-prefixed one.
    pub path: String,
    pub sha256: String,
}

#[derive(Debug)]
pub enum RecordError {
    Read(std::io::Error),
    Parse(serde_json::Error),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Read(e) => write!(f, "cannot read {RECORD_FILE}: {e}"),
            RecordError::Parse(e) => write!(f, "{RECORD_FILE} is not a valid record: {e}"),
        }
    }
}

impl std::error::Error for RecordError {}

impl WrittenFiles {
    /// Reads the record; a missing file is an empty record.
    pub fn load(path: &std::path::Path) -> Result<WrittenFiles, RecordError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(RecordError::Parse),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(WrittenFiles::default()),
            Err(e) => Err(RecordError::Read(e)),
        }
    }

    pub fn sha(&self, path: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.sha256.as_str())
    }

    pub(crate) fn set(&mut self, path: &str, sha256: &str) {
        match self.files.iter_mut().find(|f| f.path == path) {
            Some(f) => f.sha256 = sha256.to_string(),
            None => self.files.push(RecordedFile {
                path: path.to_string(),
                sha256: sha256.to_string(),
            }),
        }
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
    }

    pub(crate) fn forget(&mut self, path: &str) {
        self.files.retain(|f| f.path != path);
    }

    /// The file's text: pretty JSON with a final newline.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }
}

/// Lower-case hex sha256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    crate::encoding::hex(&Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha_of_empty_input() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn set_keeps_entries_sorted_and_unique() {
        let mut r = WrittenFiles::default();
        r.set("/etc/b", "1");
        r.set("/etc/a", "2");
        r.set("/etc/b", "3");
        let paths: Vec<_> = r.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["/etc/a", "/etc/b"]);
        assert_eq!(r.sha("/etc/b"), Some("3"));
        r.forget("/etc/a");
        assert_eq!(r.sha("/etc/a"), None);
        let back: WrittenFiles = serde_json::from_slice(&r.to_bytes()).unwrap();
        assert_eq!(back, r);
    }
}
