//! The management protocol (docs/protocol.md): one poll that reports what the machine runs
//! and receives its config, update targets, commands and poll interval; plus log upload.
//! Two transports speak it: HTTPS (`https://`, or `http://` when written so) and a local
//! directory (`file://DIR`), the embedded default for machines with no cloud.
pub(crate) mod file;
pub(crate) mod https;

pub(crate) use crate::backoff::Retry;
use crate::credentials::Credentials;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// Most bytes an answer may have; a larger one is refused, never buffered whole.
pub(crate) const MAX_ANSWER_BYTES: u64 = 8 * 1024 * 1024;

/// One downloadable version of svc-agent or svc-server, as the app resolved it from the
/// release channel and pins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub version: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// ed25519 signature (base64) over the artifact description; see docs/updates.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Patches that make this target from earlier versions (docs/protocol.md, *Deltas*); an
    /// agent without delta support ignores them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deltas: Vec<Delta>,
}

/// A delta (`svc-delta-v1` or `-v2`, docs/updates.md) from the binary whose sha256 is `from` to its
/// target. Its result is checked as the full artifact is (size, sha256, signature).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    pub from: String,
    pub url: String,
    pub size: u64,
    pub sha256: String,
    /// `svc-delta-v2`, or absent for `svc-delta-v1`; a delta in a format the agent does not
    /// know is skipped, never downloaded (agents before v2 ignore the field: they take the
    /// first delta from their binary, which svc-release lists in v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Targets {
    #[serde(rename = "svc-agent", default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Target>,
    #[serde(
        rename = "svc-server",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub server: Option<Target>,
    /// The machine's operating system as a whole (`osimage`): a bundle for the A/B updater.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OsTarget>,
}

/// An OS image: a target with its format named (`rauc-bundle`; docs/updates.md, *OS images*).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsTarget {
    #[serde(flatten)]
    pub target: Target,
    pub format: String,
    /// The bundle's sha1, only a check of the transfer: gooseBit gives no other hash of a
    /// RAUC bundle. Read only for an offer from hawkBit (`osimage::Provenance`); the agent's
    /// own protocol requires `sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
}

/// A command from the app, honoured at the next safe point and acknowledged by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    pub id: String,
    pub kind: CommandKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommandKind {
    RestartSvcServer,
    RestartAgent,
    #[serde(other)]
    Unknown,
}

/// The answer to a poll.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PollAnswer {
    /// The whole machine config (validated by the agent before use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    #[serde(default)]
    pub targets: Targets,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_secs: Option<u64>,
    #[serde(default)]
    pub commands: Vec<Command>,
    /// Set by a transport whose server asks to download the targets but not to activate
    /// them yet (hawkBit: `update: skip`, `maintenanceWindow: unavailable`), with why. Not
    /// part of the management protocol: never read from an answer's JSON. The agent's one
    /// activation gate (`agent::policy::restart_gate`) waits while it is set.
    #[serde(skip)]
    pub hold: Option<String>,
    /// Set by a transport whose answers prove nothing about their author (`file://`: a USB
    /// stick, a share): the config it offers, which the agent takes only as
    /// `agent::medium` allows (signed by the vendor key on a device that has one). `config`
    /// is then `None`. Not part of the management protocol: never read from JSON.
    #[serde(skip)]
    pub medium_config: Option<MediumConfig>,
}

/// The machine config a management directory offers (docs/releases.md, *What a stick can
/// change*).
#[derive(Debug, Clone, PartialEq)]
pub struct MediumConfig {
    /// `poll.json`'s own `config` member: unsigned.
    pub inline: Option<Value>,
    /// `poll.json`'s `signed_config` member (version, url, sha256, size, signature, as a
    /// target's) and the bytes of the file it names, or why they could not be read.
    pub signed: Option<(Target, Result<Vec<u8>, file::MemberError>)>,
}

impl PollAnswer {
    /// Parses an answer body, naming what is wrong with it.
    pub fn parse(body: &[u8]) -> Result<PollAnswer, ProtocolError> {
        serde_json::from_slice(body)
            .map_err(|e| ProtocolError::BadAnswer(format!("the answer is not a poll answer: {e}")))
    }
}

/// What a poll brought.
#[derive(Debug, Clone, PartialEq)]
pub enum PollOutcome {
    /// A new answer, with its validator for the next conditional poll.
    Changed {
        answer: Box<PollAnswer>,
        etag: Option<String>,
    },
    /// Same as last time (HTTP 304, or an unchanged file).
    NotModified,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// No connection, reset, DNS, TLS: try again with backoff.
    Network(String),
    /// The server answered with an error status.
    Http {
        status: u16,
        retry_after_secs: Option<u64>,
        body: String,
    },
    /// The server's reply cannot be used (garbage JSON, too large).
    BadAnswer(String),
    /// Our own setup is wrong (an unsupported app address).
    Setup(String),
}

impl ProtocolError {
    pub(crate) fn retry(&self) -> Retry {
        match self {
            ProtocolError::Http {
                status,
                retry_after_secs,
                ..
            } => match (status, retry_after_secs) {
                // Retry-After only where it means "come back later"; on a 401 it would turn
                // a refusal into a fast loop.
                (408 | 429 | 500..=599, Some(s)) => Retry::After(*s),
                (408 | 429, None) => Retry::Backoff,
                (400..=499, _) => Retry::Permanent,
                _ => Retry::Backoff,
            },
            ProtocolError::Setup(_) => Retry::Permanent,
            _ => Retry::Backoff,
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::Network(e) => write!(f, "cannot reach the server: {e}"),
            ProtocolError::Http { status, body, .. } => {
                write!(f, "the server answered HTTP {status}")?;
                if !body.is_empty() {
                    write!(f, ": {body}")?;
                }
                Ok(())
            }
            ProtocolError::BadAnswer(e) => {
                write!(f, "unusable answer from the server: {e}")
            }
            ProtocolError::Setup(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// One way of talking to the management app.
pub trait Transport: Send {
    /// Reports `status` and asks for the current answer; `etag` is the validator of the
    /// answer held now.
    fn poll(&mut self, status: &Value, etag: Option<&str>) -> Result<PollOutcome, ProtocolError>;
    /// Uploads one batch of log records (a JSON document, docs/protocol.md); `Ok` is the
    /// acknowledgement.
    fn send_logs(&mut self, batch: &[u8]) -> Result<(), ProtocolError>;
    /// Resolves an artifact URL from an answer (relative URLs are relative to the app).
    fn resolve_url(&self, url: &str) -> String;
    /// Bytes sent and received by the last poll (for the benchmarks and `status`).
    fn last_poll_bytes(&self) -> (u64, u64);
    /// A copy that can make a held poll on another thread while the loop goes on; `None`
    /// where the answer is local and immediate (`file://`).
    fn detach(&self) -> Option<Box<dyn Transport>> {
        None
    }
    /// The config's byte budget for what the transport downloads itself (hawkBit's `.swu`
    /// images); `None`: off. The transport holds its downloads with the engine's one gate
    /// (`update::budget`), which it builds: a protocol is below the engines.
    fn set_budget(&mut self, _budget: Option<crate::config::model::BudgetSettings>) {}
    /// A poll the app may hold up to `hold_secs` until its answer changes (the long poll,
    /// docs/protocol.md); 0 asks for an answer at once. The flag says whether the app holds
    /// polls (`Preference-Applied: wait` on its answer); one that does not answers at once,
    /// as to a plain poll, and is polled by its interval. `status` `None`: the status is
    /// the one the app acknowledged last (only ever sent to an app that holds polls).
    fn poll_held(
        &mut self,
        status: Option<&Value>,
        etag: Option<&str>,
        hold_secs: u64,
    ) -> Result<(PollOutcome, bool), ProtocolError> {
        let _ = hold_secs;
        self.poll(status.unwrap_or(&Value::Null), etag)
            .map(|o| (o, false))
    }
}

/// The transport for the credentials' `app_address`.
pub fn connect(creds: &Credentials) -> Result<Box<dyn Transport>, ProtocolError> {
    let addr = creds.app_address.as_str();
    if let Some(dir) = addr.strip_prefix("file://") {
        Ok(Box::new(file::FileTransport::new(dir, &creds.part_id)))
    } else if addr.starts_with("https://") || addr.starts_with("http://") {
        Ok(Box::new(https::HttpsTransport::new(creds.clone())))
    } else {
        Err(ProtocolError::Setup(format!(
            "app_address {addr:?} must be https://, http:// (explicit) or file://DIR"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_classes() {
        let http = |status, ra| ProtocolError::Http {
            status,
            retry_after_secs: ra,
            body: String::new(),
        };
        assert_eq!(http(500, None).retry(), Retry::Backoff);
        assert_eq!(http(408, None).retry(), Retry::Backoff);
        assert_eq!(http(429, None).retry(), Retry::Backoff);
        assert_eq!(http(429, Some(30)).retry(), Retry::After(30));
        assert_eq!(http(401, None).retry(), Retry::Permanent);
        assert_eq!(http(404, None).retry(), Retry::Permanent);
        assert_eq!(http(401, Some(1)).retry(), Retry::Permanent);
        assert_eq!(http(503, Some(7)).retry(), Retry::After(7));
        assert_eq!(
            ProtocolError::Network("reset".into()).retry(),
            Retry::Backoff
        );
    }

    #[test]
    fn answers_parse_with_defaults_and_unknown_commands() {
        let a = PollAnswer::parse(br#"{"commands": [{"id": "1", "kind": "restart-svc-server"}, {"id": "2", "kind": "dance"}]}"#).unwrap();
        assert_eq!(a.commands[0].kind, CommandKind::RestartSvcServer);
        assert_eq!(a.commands[1].kind, CommandKind::Unknown);
        assert!(a.config.is_none() && a.targets.server.is_none());
        assert!(matches!(
            PollAnswer::parse(b"<html>"),
            Err(ProtocolError::BadAnswer(_))
        ));
    }
}
