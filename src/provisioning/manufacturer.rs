//! The manufacturer defaults file (`/etc/svc-defaults.json`): read and checked here, merged
//! with the other layers by `defaults::effective`.
use crate::config::model::ProvisioningAttributes;
use crate::paths::Paths;
use std::fmt;
use std::path::PathBuf;

/// Why the manufacturer defaults file cannot be used; each names the file (and the key).
#[derive(Debug)]
pub enum DefaultsError {
    /// The file is there but cannot be read, or is not JSON.
    Unreadable { path: PathBuf, why: String },
    /// Keys that break the rules, each as `FILE: POINTER: message`.
    Invalid(Vec<String>),
}

impl fmt::Display for DefaultsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DefaultsError::Unreadable { path, why } => write!(f, "{}: {why}", path.display()),
            DefaultsError::Invalid(each) => f.write_str(&each.join("; ")),
        }
    }
}

impl std::error::Error for DefaultsError {}

/// The manufacturer defaults file (`/etc/svc-defaults.json`), checked by the same rules as
/// the config's `agent-provisioning.attributes` (errors name the key as a JSON pointer in
/// the file); missing means built-ins.
pub fn load_defaults(paths: &Paths) -> Result<ProvisioningAttributes, DefaultsError> {
    let p = paths.defaults();
    let unreadable = |why: String| DefaultsError::Unreadable {
        path: p.clone(),
        why,
    };
    let bytes = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| unreadable(e.to_string()))?;
    let wrapped = serde_json::json!({"agent": {"agent-provisioning": {"attributes": v}}});
    const PREFIX: &str = "/agent/agent-provisioning/attributes";
    match crate::config::parse_value(&wrapped) {
        Ok((cfg, report)) => {
            // For example a well-known default hotspot password: the rest of the file
            // applies, the hotspot stays off (`defaults::hotspot_password_problem`).
            for w in &report.warnings {
                let at = w.path.strip_prefix(PREFIX).unwrap_or(&w.path);
                crate::warn!("provisioning", "{}: {at}: {}", p.display(), w.message);
            }
            Ok(cfg.agent.provisioning.attributes)
        }
        Err(report) => Err(DefaultsError::Invalid(
            report
                .errors
                .iter()
                .map(|d| {
                    let at = d.path.strip_prefix(PREFIX).unwrap_or(&d.path);
                    format!(
                        "{}: {}: {}",
                        p.display(),
                        if at.is_empty() { "/" } else { at },
                        d.message
                    )
                })
                .collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_checked_like_config_attributes() {
        let dir = std::env::temp_dir().join(format!("svc-defaults-{}", std::process::id()));
        let p = Paths::new(&dir);
        assert_eq!(
            load_defaults(&p).unwrap(),
            ProvisioningAttributes::default()
        );
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::write(
            dir.join("etc/svc-defaults.json"),
            r#"{"hotspot_prefix": "acme", "hotspot_password": "long-enough-1", "offline_timeout_secs": 30}"#,
        )
        .unwrap();
        let d = load_defaults(&p).unwrap();
        assert_eq!(d.hotspot_prefix.as_deref(), Some("acme"));
        assert_eq!(d.offline_timeout_secs, Some(30));
        std::fs::write(
            dir.join("etc/svc-defaults.json"),
            r#"{"hotspot_password": "short"}"#,
        )
        .unwrap();
        let e = load_defaults(&p).unwrap_err().to_string();
        assert!(e.contains("/hotspot_password"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
