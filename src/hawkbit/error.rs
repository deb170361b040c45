//! Errors of the hawkBit backend's own files (the token, the action and consent records) and
//! of the local consent decision. What reaches the daemon goes through `Transport`, as a
//! `ProtocolError`.
use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum HawkbitError {
    /// The token file: unreadable, too large, or not one token (the text never quotes it).
    Token(String),
    /// A record could not be written.
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    Encode(serde_json::Error),
    /// The engine's `StateLock`, under which records are written.
    Lock(crate::update::UpdateError),
    /// `svc-agent hawkbit confirm|decline` with no action waiting for consent.
    NothingWaits,
    /// `--action` names another action than the one that waits.
    OtherAction {
        asked: String,
        waiting: String,
    },
}

impl fmt::Display for HawkbitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HawkbitError::Token(m) => f.write_str(m),
            HawkbitError::Write { path, source } => {
                write!(f, "writing {}: {source}", path.display())
            }
            HawkbitError::Encode(e) => write!(f, "{e}"),
            HawkbitError::Lock(e) => write!(f, "{e}"),
            HawkbitError::NothingWaits => f.write_str("no hawkBit action waits for consent"),
            HawkbitError::OtherAction { asked, waiting } => write!(
                f,
                "action {asked} does not wait for consent; action {waiting} does"
            ),
        }
    }
}

impl std::error::Error for HawkbitError {}
