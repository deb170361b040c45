//! What the agent keeps on disk between runs, so that a machine that boots offline runs
//! with the last good config and targets. All writes are atomic.
use crate::config::MachineConfig;
use crate::paths::Paths;
use crate::protocol::Targets;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// The last good machine config, as received (svc-server reads this file too).
pub(crate) fn config_path(paths: &Paths) -> PathBuf {
    paths.state_dir().join("config.json")
}

fn answer_path(paths: &Paths) -> PathBuf {
    paths.state_dir().join("answer.json")
}

/// The parts of the last answer that the loop needs after a restart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CachedAnswer {
    pub etag: Option<String>,
    pub targets: Targets,
    /// The update server asks to wait with activating the targets (`PollAnswer::hold`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
    pub poll_interval_secs: Option<u64>,
    /// Commands already carried out, so that a repeated delivery does not repeat them.
    pub done_commands: Vec<String>,
    /// Unix time of the last successful poll.
    pub last_contact: Option<u64>,
}

/// Loads the cached config; a damaged or invalid cache is reported and ignored.
pub(crate) fn load_config(paths: &Paths) -> Option<(MachineConfig, Value)> {
    let bytes =
        crate::fsutil::read_regular(&config_path(paths), crate::fsutil::STATE_FILE_LIMIT).ok()?;
    let raw: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            crate::warn!(
                "agent",
                "ignoring the cached config {}: {e}",
                config_path(paths).display()
            );
            return None;
        }
    };
    match crate::config::parse_value(&raw) {
        Ok((cfg, _)) => Some((cfg, raw)),
        Err(report) => {
            crate::warn!(
                "agent",
                "ignoring the cached config, it no longer validates: {}",
                report.errors.len()
            );
            None
        }
    }
}

pub(crate) fn save_config(paths: &Paths, raw: &Value) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(raw).unwrap_or_default();
    // The config may hold network pass keys: only root reads it.
    crate::fsutil::atomic_write(&config_path(paths), &text, 0o600)
}

pub(crate) fn load_answer(paths: &Paths) -> CachedAnswer {
    crate::fsutil::read_regular(&answer_path(paths), crate::fsutil::STATE_FILE_LIMIT)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

pub(crate) fn save_answer(paths: &Paths, a: &CachedAnswer) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(a).unwrap_or_default();
    crate::fsutil::atomic_write(&answer_path(paths), &text, 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_ignores_damage() {
        let root = std::env::temp_dir().join(format!("svc-cache-{}", std::process::id()));
        let paths = Paths::new(&root);
        assert!(load_config(&paths).is_none());
        let raw =
            serde_json::json!({"agent": {"svc-server": {"attributes": {"fast_start": true}}}});
        save_config(&paths, &raw).unwrap();
        let (cfg, back) = load_config(&paths).unwrap();
        assert!(cfg.agent.server.attributes.fast_start);
        assert_eq!(back, raw);
        std::fs::write(config_path(&paths), b"{torn").unwrap();
        assert!(load_config(&paths).is_none());
        let a = CachedAnswer {
            etag: Some("\"x\"".into()),
            done_commands: vec!["c1".into()],
            ..Default::default()
        };
        save_answer(&paths, &a).unwrap();
        assert_eq!(load_answer(&paths), a);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
