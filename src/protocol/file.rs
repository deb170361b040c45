//! The protocol over a local directory (`file://DIR`): the embedded default for machines
//! with no cloud (air-gapped sites, factory lines, demos).
//!
//! | file | role |
//! |---|---|
//! | `DIR/poll.json` | the poll answer, same shape as over HTTPS |
//! | `DIR/status.json` | the agent's last status report (written when the directory is writable) |
//! | `DIR/logs.jsonl` | uploaded log records, one record object a line, appended (docs/logs.md) |
//! | `DIR/artifacts/<sha256>` | binaries, and the config `signed_config` names (`svc-release publish`) |
//! | anything else | artifacts, named by `file://` URLs or by paths relative to DIR |
use super::{MediumConfig, PollAnswer, PollOutcome, ProtocolError, Transport, MAX_ANSWER_BYTES};
use crate::encoding::hex;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

pub(crate) struct FileTransport {
    dir: PathBuf,
    last_bytes: (u64, u64),
    /// The directory's stale temps were swept (at the first poll: off the start's path).
    swept: bool,
}

impl FileTransport {
    pub(crate) fn new(dir: &str, _part_id: &str) -> FileTransport {
        FileTransport {
            dir: PathBuf::from(dir),
            last_bytes: (0, 0),
            swept: false,
        }
    }

    /// `poll.json`, opened as every name in the directory is (`fsutil::Dir`): a link, a
    /// FIFO (which would block the loop before `READY=1`) or a device is refused with an
    /// error naming it, and at most `MAX_ANSWER_BYTES` are read.
    fn read_answer(&self) -> Result<Vec<u8>, ProtocolError> {
        let path = self.dir.join("poll.json");
        crate::fsutil::read_regular(&path, MAX_ANSWER_BYTES).map_err(|e| {
            let msg = format!("cannot read {}: {e}", path.display());
            if e.kind() == std::io::ErrorKind::InvalidData {
                ProtocolError::BadAnswer(msg)
            } else {
                ProtocolError::Network(msg)
            }
        })
    }
}

/// `poll.json`'s `signed_config`, written by `svc-release publish`.
#[derive(serde::Deserialize)]
struct SignedMember {
    #[serde(default)]
    signed_config: Option<super::Target>,
}

/// Why a file the answer names was not read (Clone and PartialEq as the answer it is part
/// of: the read error kept as its text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberError {
    /// Not a plain relative path inside the directory (`..`, absolute, a URL).
    NotInside(String),
    Read {
        path: std::path::PathBuf,
        why: String,
    },
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemberError::NotInside(url) => {
                write!(f, "{url:?} is not a path inside the management directory")
            }
            MemberError::Read { path, why } => {
                write!(f, "cannot read {}: {why}", path.display())
            }
        }
    }
}

impl std::error::Error for MemberError {}

impl FileTransport {
    /// A file the answer names by a path relative to the directory (no `://`, no `..`, no
    /// absolute path): a regular file, not a link, at most [`MAX_ANSWER_BYTES`].
    fn read_member(&self, url: &str) -> Result<Vec<u8>, MemberError> {
        let rel = std::path::Path::new(url);
        let plain = !url.contains("://")
            && rel.components().count() > 0
            && rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain {
            return Err(MemberError::NotInside(url.to_string()));
        }
        let path = self.dir.join(rel);
        // No link followed on the way, no FIFO waited on, a regular file only (fsutil::Dir).
        crate::fsutil::Dir::open(&self.dir)
            .and_then(|d| d.read_beneath(rel, MAX_ANSWER_BYTES))
            .map_err(|e| MemberError::Read {
                path,
                why: e.to_string(),
            })
    }
}

impl Transport for FileTransport {
    fn poll(&mut self, status: &Value, etag: Option<&str>) -> Result<PollOutcome, ProtocolError> {
        if !std::mem::replace(&mut self.swept, true) {
            // The temps of status writes a kill or a power cut interrupted (a read-only
            // directory keeps its own; nothing here fails for it).
            crate::fsutil::remove_stale_temps(&self.dir);
        }
        let report = serde_json::to_vec_pretty(status).unwrap_or_default();
        // A read-only management directory (a USB stick, a factory share) is fine.
        let _ = crate::fsutil::atomic_write(&self.dir.join("status.json"), &report, 0o644);
        let body = self.read_answer()?;
        self.last_bytes = (report.len() as u64, body.len() as u64);
        let tag = format!("\"{}\"", hex(&Sha256::digest(&body)[..16]));
        if etag == Some(tag.as_str()) {
            return Ok(PollOutcome::NotModified);
        }
        let mut answer = PollAnswer::parse(&body)?;
        // Whatever config the directory offers goes to the agent's medium rule, never
        // straight into use: a directory proves nothing about who wrote it.
        let signed = serde_json::from_slice::<SignedMember>(&body)
            .map_err(|e| ProtocolError::BadAnswer(format!("/signed_config: {e}")))?
            .signed_config
            .map(|t| {
                let bytes = self.read_member(&t.url);
                (t, bytes)
            });
        let inline = answer.config.take();
        if inline.is_some() || signed.is_some() {
            answer.medium_config = Some(MediumConfig { inline, signed });
        }
        Ok(PollOutcome::Changed {
            answer: Box::new(answer),
            etag: Some(tag),
        })
    }

    /// One record object per line (docs/logs.md), through the one JSON-lines writer: a batch
    /// is one write and `fdatasync` before it counts as delivered, and a line torn by a crash
    /// is cut off before the next append.
    fn send_logs(&mut self, batch: &[u8]) -> Result<(), ProtocolError> {
        let path = self.dir.join("logs.jsonl");
        let lines = record_lines(batch).ok_or_else(|| ProtocolError::Http {
            // What an app answers a malformed batch: the shipper isolates the bad record.
            status: 400,
            retry_after_secs: None,
            body: "a log batch must be {\"records\": [objects]}".into(),
        })?;
        crate::fsutil::append_lines(&path, &lines).map_err(|e| {
            ProtocolError::Network(format!("cannot append to {}: {e}", path.display()))
        })
    }

    fn resolve_url(&self, url: &str) -> String {
        if url.contains("://") {
            url.to_string()
        } else {
            format!(
                "file://{}",
                self.dir.join(url.trim_start_matches('/')).display()
            )
        }
    }

    fn last_poll_bytes(&self) -> (u64, u64) {
        self.last_bytes
    }
}

/// A batch `{"records": [..]}` as JSON lines, one record object a line.
fn record_lines(batch: &[u8]) -> Option<Vec<u8>> {
    let v: Value = serde_json::from_slice(batch).ok()?;
    let mut out = Vec::with_capacity(batch.len() + 64);
    for rec in v.get("records")?.as_array()? {
        if !rec.is_object() {
            return None;
        }
        serde_json::to_writer(&mut out, rec).ok()?;
        out.push(b'\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_directorys_config_goes_to_the_medium_rule_and_names_only_plain_files_inside() {
        let dir = std::env::temp_dir().join(format!("svc-filemedium-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("artifacts")).unwrap();
        std::fs::write(dir.join("artifacts/c"), b"{}").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("artifacts/link")).unwrap();
        let mut t = FileTransport::new(dir.to_str().unwrap(), "p");
        let answer = |t: &mut FileTransport, url: &str| {
            let body = serde_json::json!({"config": {"agent": {}},
                "signed_config": {"version": "1", "url": url}});
            std::fs::write(dir.join("poll.json"), body.to_string()).unwrap();
            let PollOutcome::Changed { answer, .. } = t.poll(&Value::Null, None).unwrap() else {
                panic!("a new answer")
            };
            assert!(answer.config.is_none(), "never straight into use");
            let m = answer.medium_config.unwrap();
            assert!(m.inline.is_some());
            m.signed.unwrap().1
        };
        assert_eq!(answer(&mut t, "artifacts/c").unwrap(), b"{}");
        for bad in [
            "../x",
            "/etc/passwd",
            "file:///etc/passwd",
            "artifacts/link",
            "artifacts",
        ] {
            assert!(answer(&mut t, bad).is_err(), "{bad}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn answers_change_by_content_and_logs_append() {
        let dir = std::env::temp_dir().join(format!("svc-filetransport-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut t = FileTransport::new(dir.to_str().unwrap(), "p");
        assert!(matches!(
            t.poll(&Value::Null, None),
            Err(ProtocolError::Network(_))
        ));
        std::fs::write(dir.join("poll.json"), br#"{"poll_interval_secs": 5}"#).unwrap();
        let PollOutcome::Changed { answer, etag } =
            t.poll(&serde_json::json!({"a": 1}), None).unwrap()
        else {
            panic!("first poll must change")
        };
        assert_eq!(answer.poll_interval_secs, Some(5));
        assert_eq!(
            t.poll(&Value::Null, etag.as_deref()).unwrap(),
            PollOutcome::NotModified
        );
        std::fs::write(dir.join("poll.json"), b"{garbage").unwrap();
        assert!(matches!(
            t.poll(&Value::Null, etag.as_deref()),
            Err(ProtocolError::BadAnswer(_))
        ));
        assert!(std::fs::read_to_string(dir.join("status.json"))
            .unwrap()
            .contains("null"));
        t.send_logs(b"{\"records\":[]}").unwrap();
        t.send_logs(b"{\"records\":\n[{\"id\":1},{\"id\":2}]}")
            .unwrap();
        // A line torn by a crash mid-append is cut off; the next batch follows whole lines.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("logs.jsonl"))
            .unwrap();
        f.write_all(b"{\"id\":3,\"mess").unwrap();
        t.send_logs(b"{\"records\":[{\"id\":3}]}").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("logs.jsonl")).unwrap(),
            "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n"
        );
        // Not a batch: refused as an app would (400), nothing written.
        for bad in [&b"{\"records\":[1]}"[..], b"[]", b"{garbage"] {
            assert!(matches!(
                t.send_logs(bad),
                Err(ProtocolError::Http { status: 400, .. })
            ));
        }
        assert_eq!(
            t.resolve_url("svc-server-1.0"),
            format!("file://{}/svc-server-1.0", dir.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_first_poll_sweeps_temps_a_killed_writer_left() {
        let dir =
            std::env::temp_dir().join(format!("svc-filetransport-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // No process ever has a pid above pid_max.
        let max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let stale = dir.join(format!(".status.json.tmp.{}.1f", max + 1));
        std::fs::write(&stale, b"half").unwrap();
        let mine = dir.join(format!(".status.json.tmp.{}.2f", std::process::id()));
        std::fs::write(&mine, b"in use").unwrap();
        let mut t = FileTransport::new(dir.to_str().unwrap(), "p");
        assert!(stale.exists(), "swept before any poll");
        let _ = t.poll(&Value::Null, None);
        assert!(!stale.exists(), "a dead writer's temp stayed");
        assert!(mine.exists(), "a running writer's temp went");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
