//! Where the config comes from: a file (`--config`, `SVC_CONFIG_FILE`), the `config`
//! member of `DIR/poll.json` of a `file://DIR` management directory (`--app file://DIR`),
//! or the management app itself over the agent's protocol (`--app https://...`, with the
//! machine credentials). File changes are noticed by mtime, size and inode; the app is
//! polled conditionally (ETag) at its poll interval; either is confirmed by a content hash.
use crate::config::{MachineConfig, Report};
use sha2::{Digest, Sha256};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The largest config accepted (as `svc-agent validate`).
const MAX_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConfigSource {
    File(PathBuf),
    /// A management directory; the config is `poll.json`'s `config` member.
    App(PathBuf),
    /// The management app (`https://`, or `http://` when written so), polled with the
    /// credentials file's part id and secret.
    Remote {
        url: String,
        credentials: PathBuf,
    },
}

impl ConfigSource {
    /// The file that is read and watched.
    pub(crate) fn path(&self) -> PathBuf {
        match self {
            ConfigSource::File(p) => p.clone(),
            ConfigSource::App(dir) => dir.join("poll.json"),
            ConfigSource::Remote { credentials, .. } => credentials.clone(),
        }
    }
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::File(p) => write!(f, "{}", p.display()),
            ConfigSource::App(d) => write!(f, "file://{} (poll.json)", d.display()),
            ConfigSource::Remote { url, .. } => write!(f, "{url}"),
        }
    }
}

/// One read of the source.
pub(crate) struct Loaded {
    /// sha256 of the bytes read: a rewrite with the same content changes nothing.
    pub hash: [u8; 32],
    pub config: Result<(MachineConfig, Report), Report>,
}

/// Reads the source and notices when its file changes.
pub(crate) struct Watcher {
    source: ConfigSource,
    seen: Option<(i64, i64, u64, u64)>,
    remote: Option<Remote>,
}

/// The state of a `ConfigSource::Remote`: the connection, the validator and hash of the answer
/// held, and when to poll next.
struct Remote {
    transport: Box<dyn crate::protocol::Transport>,
    etag: Option<String>,
    hash: [u8; 32],
    next_poll: std::time::Instant,
    interval: std::time::Duration,
}

/// Poll interval when the app names none.
const REMOTE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

fn one_error(message: String) -> Report {
    let mut r = Report::default();
    r.error(&crate::config::diag::Ptr::root(), message);
    r
}

impl Watcher {
    pub(crate) fn new(source: ConfigSource) -> Watcher {
        Watcher {
            source,
            seen: None,
            remote: None,
        }
    }

    fn stat(&self) -> Option<(i64, i64, u64, u64)> {
        let m = std::fs::metadata(self.source.path()).ok()?;
        Some((m.mtime(), m.mtime_nsec(), m.size(), m.ino()))
    }

    /// Whether the file looks different from the last time it was read (for the app: a
    /// poll is due).
    pub(crate) fn changed(&mut self) -> bool {
        match (&self.source, &self.remote) {
            (ConfigSource::Remote { .. }, Some(r)) => std::time::Instant::now() >= r.next_poll,
            (ConfigSource::Remote { .. }, None) => true,
            _ => self.stat() != self.seen,
        }
    }

    /// Reads and validates the config. `Err` only when the file cannot be read at all (or
    /// the app cannot be reached).
    pub(crate) fn load(&mut self) -> Result<Loaded, SourceError> {
        if let ConfigSource::Remote { url, credentials } = &self.source {
            let (url, credentials) = (url.clone(), credentials.clone());
            return self.poll_remote(&url, &credentials);
        }
        let path = self.source.path();
        self.seen = self.stat();
        let unreadable = |source| SourceError::Read {
            path: path.clone(),
            source,
        };
        let meta = std::fs::metadata(&path).map_err(unreadable)?;
        if meta.len() > MAX_BYTES {
            return Err(SourceError::TooLarge(path));
        }
        let bytes = std::fs::read(&path).map_err(unreadable)?;
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        let config = match &self.source {
            ConfigSource::File(_) | ConfigSource::Remote { .. } => {
                crate::config::parse_slice(&bytes)
            }
            ConfigSource::App(_) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
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

/// Why the config could not be had at all (a config that can be read but is invalid is a
/// `Loaded` with its report).
#[derive(Debug)]
pub(crate) enum SourceError {
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    TooLarge(PathBuf),
    Credentials {
        path: PathBuf,
        source: crate::credentials::CredentialsError,
    },
    Connect(crate::protocol::ProtocolError),
    NoConnection,
    NoConfig(String),
    Encode(serde_json::Error),
    Poll {
        url: String,
        source: crate::protocol::ProtocolError,
    },
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            SourceError::TooLarge(path) => {
                write!(f, "{} is larger than {MAX_BYTES} bytes", path.display())
            }
            SourceError::Credentials { path, source } => {
                write!(f, "{}: {source}", path.display())
            }
            SourceError::Connect(e) => write!(f, "{e}"),
            SourceError::NoConnection => f.write_str("no connection to the app"),
            SourceError::NoConfig(url) => write!(f, "{url}: the answer has no config"),
            SourceError::Encode(e) => write!(f, "{e}"),
            SourceError::Poll { url, source } => write!(f, "{url}: {source}"),
        }
    }
}

impl std::error::Error for SourceError {}

impl Watcher {
    /// One conditional poll of the app. A `304` (or an unchanged answer) gives back the hash
    /// of the config held, which the caller recognises as applied already.
    fn poll_remote(
        &mut self,
        url: &str,
        credentials: &std::path::Path,
    ) -> Result<Loaded, SourceError> {
        use crate::protocol::PollOutcome;
        if self.remote.is_none() {
            let mut creds =
                crate::credentials::Credentials::load_file(credentials).map_err(|source| {
                    SourceError::Credentials {
                        path: credentials.to_path_buf(),
                        source,
                    }
                })?;
            creds.app_address = url.to_string();
            let transport = crate::protocol::connect(&creds).map_err(SourceError::Connect)?;
            self.remote = Some(Remote {
                transport,
                etag: None,
                hash: [0; 32],
                next_poll: std::time::Instant::now(),
                interval: REMOTE_INTERVAL,
            });
        }
        let Some(r) = self.remote.as_mut() else {
            return Err(SourceError::NoConnection);
        };
        r.next_poll = std::time::Instant::now() + r.interval;
        let status = serde_json::json!({"svc_server": {
            "version": env!("SVC_VERSION"), "standalone": true, "running": true}});
        match r.transport.poll(&status, r.etag.as_deref()) {
            Ok(PollOutcome::NotModified) => Ok(Loaded {
                hash: r.hash,
                config: Err(one_error("unchanged".into())),
            }),
            Ok(PollOutcome::Changed { answer, etag }) => {
                r.etag = etag;
                if let Some(secs) = answer.poll_interval_secs {
                    r.interval = std::time::Duration::from_secs(secs.clamp(1, 3600));
                    r.next_poll = std::time::Instant::now() + r.interval;
                }
                let Some(config) = answer.config else {
                    return Err(SourceError::NoConfig(url.to_string()));
                };
                let bytes = serde_json::to_vec(&config).map_err(SourceError::Encode)?;
                r.hash = Sha256::digest(&bytes).into();
                Ok(Loaded {
                    hash: r.hash,
                    config: crate::config::parse_value(&config),
                })
            }
            Err(source) => Err(SourceError::Poll {
                url: url.to_string(),
                source,
            }),
        }
    }
}
