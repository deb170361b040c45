//! The machine credentials file `/etc/svc.json` (shared/conventions.md):
//! `{"cloud": {"app_address": "...", "id": "<part id>", "secret": "..."}}` or with
//! `"api_key": {"id": "...", "key": "..."}` in place of `secret`.
use crate::paths::Paths;
use serde::{Deserialize, Serialize};
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
pub enum CredentialsError {
    Missing(PathBuf),
    Unreadable(PathBuf, std::io::Error),
    Invalid(PathBuf, String),
}

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

#[derive(Deserialize)]
struct FileForm {
    cloud: CloudForm,
}

#[derive(Deserialize)]
struct CloudForm {
    app_address: String,
    id: String,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    api_key: Option<ApiKey>,
}

impl Credentials {
    /// Reads and checks the credentials file; every secret in it is registered with the
    /// logger so that it can never appear in a log line.
    pub fn load(paths: &Paths) -> Result<Credentials, CredentialsError> {
        Self::load_file(&paths.credentials())
    }

    pub fn load_file(path: &Path) -> Result<Credentials, CredentialsError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CredentialsError::Missing(path.to_path_buf()))
            }
            Err(e) => return Err(CredentialsError::Unreadable(path.to_path_buf(), e)),
        };
        Self::parse(&bytes).map_err(|why| CredentialsError::Invalid(path.to_path_buf(), why))
    }

    pub fn parse(bytes: &[u8]) -> Result<Credentials, String> {
        // serde's messages never quote values, so a secret cannot leak through them.
        let form: FileForm = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let c = form.cloud;
        let secret = match (c.secret, c.api_key) {
            (Some(s), None) if !s.is_empty() => Secret::PartSecret(s),
            (None, Some(k)) if !k.id.is_empty() && !k.key.is_empty() => Secret::ApiKey(k),
            (Some(_), Some(_)) => return Err("cloud has both secret and api_key; keep one".into()),
            _ => return Err("cloud needs a non-empty secret, or api_key with id and key".into()),
        };
        match &secret {
            Secret::PartSecret(s) => crate::logging::register_secret(s),
            Secret::ApiKey(k) => crate::logging::register_secret(&k.key),
        }
        if c.id.is_empty() {
            return Err("cloud.id (the part id) is empty".into());
        }
        crate::config::validate::check_url(&c.app_address)
            .map_err(|e| format!("cloud.app_address: {e}"))?;
        Ok(Credentials {
            app_address: c.app_address,
            part_id: c.id,
            secret,
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

/// The permission bits of the credentials file, for `doctor`.
pub fn file_mode(path: &Path) -> Option<u32> {
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
        ] {
            let e = Credentials::parse(text.as_bytes()).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
