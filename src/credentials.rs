//! The machine credentials file `/etc/svc.json` (shared/conventions.md):
//! `{"cloud": {"app_address": "...", "id": "<part id>", "secret": "..."}}` or with
//! `"api_key": {"id": "...", "key": "..."}` in place of `secret`.
use crate::paths::Paths;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    pub key: String,
}

/// How the machine proves who it is. Never printed by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    PartSecret(String),
    ApiKey(ApiKey),
}

#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub app_address: String,
    pub part_id: String,
    pub secret: Secret,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.secret {
            Secret::PartSecret(_) => "secret",
            Secret::ApiKey(_) => "api_key",
        };
        f.debug_struct("Credentials")
            .field("app_address", &self.app_address)
            .field("part_id", &self.part_id)
            .field("auth", &kind)
            .finish()
    }
}

#[derive(Debug)]
pub(crate) enum CredentialsError {
    Missing(PathBuf),
    Unreadable(PathBuf, std::io::Error),
    Invalid(PathBuf, Malformed),
}

/// What is wrong inside a credentials file. Never quotes a value: the file holds secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Malformed {
    /// Not JSON (serde_json's syntax message: a position, never the text).
    Json(String),
    CloudNotObject,
    NotString(&'static str),
    Missing(&'static str),
    ApiKeyMembers,
    ApiKeyNotObject,
    BothSecrets,
    NoSecret,
    EmptyPartId,
    AppAddress(crate::config::validate::UrlError),
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::Json(e) => f.write_str(e),
            Malformed::CloudNotObject => f.write_str("cloud must be an object"),
            Malformed::NotString(key) => write!(f, "cloud.{key} must be a string"),
            Malformed::Missing(what) => write!(f, "{what} is missing"),
            Malformed::ApiKeyMembers => {
                f.write_str("cloud.api_key needs string members id and key")
            }
            Malformed::ApiKeyNotObject => {
                f.write_str("cloud.api_key must be an object with id and key")
            }
            Malformed::BothSecrets => f.write_str("cloud has both secret and api_key; keep one"),
            Malformed::NoSecret => {
                f.write_str("cloud needs a non-empty secret, or api_key with id and key")
            }
            Malformed::EmptyPartId => f.write_str("cloud.id (the part id) is empty"),
            Malformed::AppAddress(e) => write!(f, "cloud.app_address: {e}"),
        }
    }
}

impl std::error::Error for Malformed {}

impl fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialsError::Missing(p) => write!(
                f,
                "no credentials file at {} (install with SVC_PART_ID, SVC_API_KEY_ID and SVC_API_KEY, or place the file from the management app)",
                p.display()
            ),
            CredentialsError::Unreadable(p, e) => write!(f, "cannot read {}: {e}", p.display()),
            CredentialsError::Invalid(p, why) => write!(f, "{} is not a valid credentials file: {why}", p.display()),
        }
    }
}

impl std::error::Error for CredentialsError {}

/// Far above any credentials file: only a planted one meets it.
pub(crate) const MAX_FILE_BYTES: u64 = 1024 * 1024;

impl Credentials {
    /// Reads and checks the credentials file; every secret in it is registered with the
    /// logger so that it can never appear in a log line.
    pub(crate) fn load(paths: &Paths) -> Result<Credentials, CredentialsError> {
        Self::load_file(&paths.credentials())
    }

    pub(crate) fn load_file(path: &Path) -> Result<Credentials, CredentialsError> {
        // A regular file only (no link, no FIFO that would hold the start), bounded.
        let bytes = match crate::fsutil::read_regular(path, MAX_FILE_BYTES) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CredentialsError::Missing(path.to_path_buf()))
            }
            Err(e) => return Err(CredentialsError::Unreadable(path.to_path_buf(), e)),
        };
        Self::parse(&bytes).map_err(|why| CredentialsError::Invalid(path.to_path_buf(), why))
    }

    /// The machine's own file: every string where a secret may stand is registered with the
    /// log scrubber before any check, so that no error or log line about a malformed file can
    /// carry it.
    pub fn parse(bytes: &[u8]) -> Result<Credentials, Malformed> {
        Self::parse_with(bytes, true)
    }

    /// Credentials from outside (pasted in the portal): nothing is registered with the log
    /// scrubber (whoever submits could otherwise blank any word in the logs); the errors
    /// never quote a value. `register_secret` once they are accepted.
    pub(crate) fn parse_untrusted(bytes: &[u8]) -> Result<Credentials, Malformed> {
        Self::parse_with(bytes, false)
    }

    /// Registers the secret (not the part id, not an API key's id) with the log scrubber.
    pub(crate) fn register_secret(&self) {
        match &self.secret {
            Secret::PartSecret(s) => crate::logging::register_secret(s),
            Secret::ApiKey(k) => crate::logging::register_secret(&k.key),
        }
    }

    fn parse_with(bytes: &[u8], register: bool) -> Result<Credentials, Malformed> {
        // serde_json's syntax errors name a position, never the text; its type errors quote
        // the value ("invalid type: string \"...\""), so shapes are checked by hand below.
        let v: Value = serde_json::from_slice(bytes).map_err(|e| Malformed::Json(e.to_string()))?;
        let cloud = v
            .get("cloud")
            .and_then(Value::as_object)
            .ok_or(Malformed::CloudNotObject)?;
        if register {
            if let Some(v) = cloud.get("secret") {
                register_strings(v);
            }
            // The key, however malformed the object is; an API key's id is not a secret.
            match cloud.get("api_key") {
                Some(Value::Object(o)) => o
                    .iter()
                    .filter(|(k, _)| k.as_str() != "id")
                    .for_each(|(_, v)| register_strings(v)),
                Some(v) => register_strings(v),
                None => {}
            }
        }
        let text = |key: &'static str| match cloud.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Malformed::NotString(key)),
        };
        let app_address = text("app_address")?.ok_or(Malformed::Missing("cloud.app_address"))?;
        let id = text("id")?.ok_or(Malformed::Missing("cloud.id (the part id)"))?;
        let api_key = match cloud.get("api_key") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) => match (o.get("id"), o.get("key")) {
                (Some(Value::String(id)), Some(Value::String(key))) => Some(ApiKey {
                    id: id.clone(),
                    key: key.clone(),
                }),
                _ => return Err(Malformed::ApiKeyMembers),
            },
            Some(_) => return Err(Malformed::ApiKeyNotObject),
        };
        let secret = match (text("secret")?, api_key) {
            (Some(s), None) if !s.is_empty() => Secret::PartSecret(s),
            (None, Some(k)) if !k.id.is_empty() && !k.key.is_empty() => Secret::ApiKey(k),
            (Some(_), Some(_)) => return Err(Malformed::BothSecrets),
            _ => return Err(Malformed::NoSecret),
        };
        if id.is_empty() {
            return Err(Malformed::EmptyPartId);
        }
        crate::config::validate::check_url(&app_address).map_err(Malformed::AppAddress)?;
        Ok(Credentials {
            app_address,
            part_id: id,
            secret,
        })
    }

    /// The headers that say who this machine is, on every request to the app.
    pub(crate) fn identity_headers(&self) -> Vec<(&'static str, String)> {
        let auth = match &self.secret {
            Secret::PartSecret(s) => format!("Secret {s}"),
            Secret::ApiKey(k) => format!("ApiKey {}:{}", k.id, k.key),
        };
        vec![
            ("Authorization", auth),
            ("X-Svc-Part-Id", self.part_id.clone()),
        ]
    }

    /// This machine's identity for downloads from the app's own origin: an app reached over
    /// http(s) only (a `file://` app has no origin to send it to).
    pub(crate) fn download_identity(&self) -> Option<crate::http::Identity> {
        let web =
            self.app_address.starts_with("https://") || self.app_address.starts_with("http://");
        web.then(|| crate::http::Identity {
            origin: crate::http::origin_of(&self.app_address).to_string(),
            headers: self.identity_headers(),
        })
    }

    /// The JSON form of the file.
    pub fn to_json(&self) -> serde_json::Value {
        let mut cloud = serde_json::json!({"app_address": self.app_address, "id": self.part_id});
        match &self.secret {
            Secret::PartSecret(s) => cloud["secret"] = s.clone().into(),
            Secret::ApiKey(k) => cloud["api_key"] = serde_json::json!({"id": k.id, "key": k.key}),
        }
        serde_json::json!({ "cloud": cloud })
    }
}

/// A credentials file that others may read is made 0600 (the agent runs as root and owns
/// it), and the warning says so: a secret readable by any local user is an open door. The
/// daemon does this each time it reads the file; `doctor` only reports. The file's metadata
/// as read (before any change of mode, which leaves size and times alone), so a caller that
/// also wants them stats the file once.
///
/// Through the open file (`fsutil::open_regular`), so that a link or a FIFO planted as the
/// file is never followed by the chmod nor blocks it (`load_file` then refuses it).
pub(crate) fn tighten_mode(path: &Path) -> Option<std::fs::Metadata> {
    let file = crate::fsutil::open_regular(path).ok()?;
    let meta = file.metadata().ok()?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 == 0 {
        return Some(meta);
    }
    match file.set_permissions(std::fs::Permissions::from_mode(0o600)) {
        Ok(()) => crate::warn!(
            "agent",
            "{} was readable by other users (mode {mode:o}); set to 0600",
            path.display()
        ),
        Err(e) => crate::error!(
            "agent",
            "{} is readable by other users (mode {mode:o}) and cannot be made 0600: {e}",
            path.display()
        ),
    }
    Some(meta)
}

/// Registers every string inside `v` (at any depth) with the log scrubber.
fn register_strings(v: &Value) {
    match v {
        Value::String(s) => crate::logging::register_secret(s),
        Value::Array(a) => a.iter().for_each(register_strings),
        Value::Object(o) => o.values().for_each(register_strings),
        _ => {}
    }
}

/// The permission bits of the credentials file, for `doctor`.
pub(crate) fn file_mode(path: &Path) -> Option<u32> {
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms_and_hides_secrets() {
        let c = Credentials::parse(br#"{"cloud": {"app_address": "https://app.example", "id": "p1", "secret": "s3cr3t-value"}}"#).unwrap();
        assert_eq!(c.part_id, "p1");
        assert!(!format!("{c:?}").contains("s3cr3t"));
        assert_eq!(crate::logging::scrub("x s3cr3t-value y"), "x *** y");
        let k = Credentials::parse(br#"{"cloud": {"app_address": "file:///srv/app", "id": "p2", "api_key": {"id": "k", "key": "kkkk-1234"}}}"#).unwrap();
        assert!(matches!(k.secret, Secret::ApiKey(_)));
        assert_eq!(
            Credentials::parse(&serde_json::to_vec(&k.to_json()).unwrap()).unwrap(),
            k
        );
    }

    #[test]
    fn rejects_bad_files_with_reasons() {
        for (text, why) in [
            (
                r#"{"cloud": {"app_address": "https://a", "id": "p"}}"#,
                "needs a non-empty secret",
            ),
            (
                r#"{"cloud": {"app_address": "ftp://a", "id": "p", "secret": "x"}}"#,
                "app_address",
            ),
            (
                r#"{"cloud": {"app_address": "https://a", "id": "", "secret": "x"}}"#,
                "part id",
            ),
            (
                r#"{"cloud": {"app_address": "https://a", "id": "p", "secret": "x", "api_key": {"id": "a", "key": "b"}}}"#,
                "both",
            ),
            ("not json", "expected"),
            (r#"{"cloud": []}"#, "cloud must be an object"),
        ] {
            let e = Credentials::parse(text.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn a_malformed_file_never_puts_a_secret_in_the_error_or_the_logs() {
        // Wrong shapes that serde would quote in its message ("invalid type: string ...").
        for (text, secret) in [
            (
                r#"{"cloud": {"app_address": "https://a", "id": "p", "api_key": "sk-live-0123456789"}}"#,
                "sk-live-0123456789",
            ),
            (
                r#"{"cloud": {"app_address": "https://a", "id": "p", "api_key": {"id": "k", "key": 5}, "secret": "part-secret-9876"}}"#,
                "part-secret-9876",
            ),
            (
                r#"{"cloud": {"app_address": "https://a", "id": ["p"], "secret": "other-secret-5555"}}"#,
                "other-secret-5555",
            ),
            (
                r#"{"cloud": {"app_address": 7, "id": "p", "api_key": {"id": "k", "key": ["nested-key-4444"]}}}"#,
                "nested-key-4444",
            ),
        ] {
            let e = Credentials::parse(text.as_bytes()).unwrap_err().to_string();
            assert!(
                !e.contains(secret),
                "{text}: the error carries the secret: {e}"
            );
            assert_eq!(
                crate::logging::scrub(&format!("line {secret}")),
                "line ***",
                "{text}: the secret is not registered with the log scrubber"
            );
        }
    }

    #[test]
    fn a_credentials_file_others_can_read_is_made_0600() {
        let dir = std::env::temp_dir().join(format!("svc-creds-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("svc.json");
        std::fs::write(
            &p,
            br#"{"cloud": {"app_address": "https://a.example", "id": "p", "secret": "s3cret-mode"}}"#,
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        tighten_mode(&p);
        assert_eq!(file_mode(&p), Some(0o600));
        assert!(Credentials::load_file(&p).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_or_a_fifo_as_the_credentials_file_is_neither_followed_nor_waited_on() {
        let dir = std::env::temp_dir().join(format!("svc-creds-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let other = dir.join("other");
        std::fs::write(&other, b"root-only").unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o640)).unwrap();
        let p = dir.join("svc.json");
        std::os::unix::fs::symlink(&other, &p).unwrap();
        tighten_mode(&p);
        assert_eq!(
            file_mode(&other),
            Some(0o640),
            "chmod went through the link"
        );
        let e = Credentials::load_file(&p).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_file(&p).unwrap();
        let st = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
        // No writer ever opens the FIFO: a blocking open would hang this test.
        assert!(tighten_mode(&p).is_none());
        let e = Credentials::load_file(&p).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
