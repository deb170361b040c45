//! Where the config comes from: a file (`--config`, `SVC_CONFIG_FILE`), or the `config`
//! member of `DIR/poll.json` of a `file://DIR` management directory (`--app`). Changes
//! are noticed by the file's mtime, size and inode, then confirmed by its content hash.
use crate::config::{MachineConfig, Report};
use sha2::{Digest, Sha256};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The largest config accepted (as `svc-agent validate`).
const MAX_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    /// A management directory; the config is `poll.json`'s `config` member.
    App(PathBuf),
}

impl Source {
    /// The file that is read and watched.
    pub fn path(&self) -> PathBuf {
        match self {
            Source::File(p) => p.clone(),
            Source::App(dir) => dir.join("poll.json"),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::App(d) => write!(f, "file://{} (poll.json)", d.display()),
        }
    }
}

/// One read of the source.
pub struct Loaded {
    /// sha256 of the bytes read: a rewrite with the same content changes nothing.
    pub hash: [u8; 32],
    pub config: Result<(MachineConfig, Report), Report>,
}

/// Reads the source and notices when its file changes.
pub struct Watcher {
    source: Source,
    seen: Option<(i64, i64, u64, u64)>,
}

fn one_error(message: String) -> Report {
    let mut r = Report::default();
    r.error(&crate::config::diag::Ptr::root(), message);
    r
}

impl Watcher {
    pub fn new(source: Source) -> Watcher {
        Watcher { source, seen: None }
    }

    fn stat(&self) -> Option<(i64, i64, u64, u64)> {
        let m = std::fs::metadata(self.source.path()).ok()?;
        Some((m.mtime(), m.mtime_nsec(), m.size(), m.ino()))
    }

    /// Whether the file looks different from the last time it was read.
    pub fn changed(&mut self) -> bool {
        self.stat() != self.seen
    }

    /// Reads and validates the config. `Err` only when the file cannot be read at all.
    pub fn load(&mut self) -> Result<Loaded, String> {
        let path = self.source.path();
        self.seen = self.stat();
        let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.len() > MAX_BYTES {
            return Err(format!(
                "{} is larger than {MAX_BYTES} bytes",
                path.display()
            ));
        }
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        let config = match &self.source {
            Source::File(_) => crate::config::parse_slice(&bytes),
            Source::App(_) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
                Ok(v) => match v.get("config") {
                    Some(c) => crate::config::parse_value(c),
                    None => Err(one_error(format!(
                        "{} has no \"config\" member",
                        path.display()
                    ))),
                },
                Err(e) => Err(one_error(format!("{}: {e}", path.display()))),
            },
        };
        Ok(Loaded { hash, config })
    }
}
