//! Consent before install (`confirmationBase`, hawkBit's answer to the EU's user-consent
//! rule): the action waiting for it and the local decision,
//! `state_dir/hawkbit-consent.json`, written atomically under `update::StateLock`.
//!
//! The transport records an action the server sends for confirmation; a person decides with
//! `svc-agent hawkbit confirm|decline [--action ID]` (or `auto_confirm` decides at once);
//! the transport tells the server at its next poll and records that it did. A decision
//! belongs to one action id: the server naming another action never inherits it.
use super::HawkbitError;
use crate::paths::Paths;
use crate::update::StateLock;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Confirmed,
    Denied,
}

impl Decision {
    /// The DDI word (`confirmation` of the feedback).
    pub(crate) fn word(self) -> &'static str {
        match self {
            Decision::Confirmed => "confirmed",
            Decision::Denied => "denied",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consent {
    /// The action id the server asks consent for.
    pub action: String,
    /// `(name, version)` of what it would install.
    pub targets: Vec<(String, String)>,
    /// The decision, once made.
    #[serde(default)]
    pub decision: Option<Decision>,
    /// Who decided: `auto_confirm` or the local command.
    #[serde(default)]
    pub by: Option<String>,
    /// The server took the decision (a `2xx` to the feedback).
    #[serde(default)]
    pub told: bool,
}

pub(crate) fn path(paths: &Paths) -> PathBuf {
    paths.state_dir().join("hawkbit-consent.json")
}

/// The consent record; missing or unreadable is none (the server asks again).
pub fn load(paths: &Paths) -> Option<Consent> {
    let bytes = std::fs::read(path(paths)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub(crate) fn save(paths: &Paths, c: &Consent, _held: &StateLock) -> Result<(), HawkbitError> {
    let p = path(paths);
    let bytes = serde_json::to_vec_pretty(c).map_err(HawkbitError::Encode)?;
    crate::fsutil::atomic_write(&p, &bytes, 0o644)
        .map_err(|source| HawkbitError::Write { path: p, source })
}

/// Records the local decision on the action that waits for consent; `action`, when given,
/// must be that action (a decision is never applied to another one).
pub fn decide(
    paths: &Paths,
    action: Option<&str>,
    decision: Decision,
) -> Result<Consent, HawkbitError> {
    let lock = StateLock::acquire(paths).map_err(HawkbitError::Lock)?;
    let Some(mut c) = load(paths) else {
        return Err(HawkbitError::NothingWaits);
    };
    if let Some(a) = action {
        if a != c.action {
            return Err(HawkbitError::OtherAction {
                asked: a.to_string(),
                waiting: c.action,
            });
        }
    }
    if c.decision != Some(decision) {
        c.told = false;
    }
    c.decision = Some(decision);
    c.by = Some("svc-agent hawkbit".into());
    save(paths, &c, &lock)?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_for_the_named_action_only() {
        let dir = std::env::temp_dir().join(format!("svc-hb-consent-{}", std::process::id()));
        let paths = Paths::new(&dir);
        std::fs::create_dir_all(paths.state_dir()).unwrap();
        assert!(decide(&paths, None, Decision::Confirmed)
            .unwrap_err()
            .to_string()
            .contains("no hawkBit action"));
        let lock = StateLock::acquire(&paths).unwrap();
        let c = Consent {
            action: "5".into(),
            targets: vec![("svc-server".into(), "2.0.0".into())],
            decision: None,
            by: None,
            told: false,
        };
        save(&paths, &c, &lock).unwrap();
        drop(lock);
        let e = decide(&paths, Some("6"), Decision::Confirmed)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("action 6 does not wait") && e.contains("action 5 does"),
            "{e}"
        );
        assert_eq!(load(&paths).unwrap().decision, None);
        let c = decide(&paths, Some("5"), Decision::Denied).unwrap();
        assert_eq!((c.decision, c.told), (Some(Decision::Denied), false));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
