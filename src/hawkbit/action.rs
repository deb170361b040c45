//! The action being carried out and what has been told to the server about it:
//! `state_dir/hawkbit-action.json`, written atomically under `update::StateLock`, so that a
//! power cut anywhere ends in feedback that matches what runs (the record says which action
//! and versions; the version records say what happened to them; the next poll reports it).
//!
//! The feedback rule is one pure function, [`due`], over the record and the version records.
use super::HawkbitError;
use crate::osimage::{OsState, Phase};
use crate::paths::Paths;
use crate::update::{StateLock, VersionRecords};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How far the server has been told, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Stage {
    /// Accepted; nothing sent yet.
    New,
    /// `proceeding` sent (with how many of the targets run).
    Proceeding,
    /// `downloaded` sent: every target is verified and active, probation still running.
    Downloaded,
    /// `closed` sent, with success or failure: the action is over for this agent.
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ActionRecord {
    pub id: String,
    /// `(name, version)` of each target.
    pub targets: Vec<(String, String)>,
    pub stage: Stage,
    /// Targets counted as running at the last `proceeding` sent.
    #[serde(default)]
    pub progress: u32,
    /// Set when the action was refused before it began (a hostile or unusable deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The server asks to wait with the activation (its window, or download only).
    #[serde(default)]
    pub hold: bool,
    /// `update: skip`: a download-only action, over once every target is downloaded.
    #[serde(default)]
    pub download_only: bool,
    /// The `closed` feedback the server took, to tell it again when it offers the action
    /// again (gooseBit's Force update offers the same id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closing: Option<Closing>,
    /// The action failed because the downloaded bytes did not match the server's hash or
    /// size: offered again, it is downloaded again rather than told its failure again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transfer_failed: bool,
    /// Times the closed action was offered again (the operator's hint is logged once).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reoffers: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ActionRecord {
    /// A record of action `id` just taken (or refused, with `refused`).
    pub(crate) fn new(id: &str, targets: Vec<(String, String)>) -> ActionRecord {
        ActionRecord {
            id: id.to_string(),
            targets,
            stage: Stage::New,
            progress: 0,
            refused: None,
            hold: false,
            download_only: false,
            closing: None,
            transfer_failed: false,
            reoffers: 0,
        }
    }

    /// Over for this agent: closed, or refused before it began.
    pub(crate) fn is_over(&self) -> bool {
        self.stage == Stage::Closed || self.refused.is_some()
    }
}

/// The `closed` feedback an action ended with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Closing {
    pub success: bool,
    pub details: String,
}

impl Closing {
    pub(crate) fn of(fb: &Feedback) -> Option<Closing> {
        match fb {
            Feedback::Success => Some(Closing {
                success: true,
                details: String::new(),
            }),
            Feedback::Failure(why) => Some(Closing {
                success: false,
                details: why.clone(),
            }),
            _ => None,
        }
    }

    pub(crate) fn feedback(&self) -> Feedback {
        if self.success {
            Feedback::Success
        } else {
            Feedback::Failure(self.details.clone())
        }
    }
}

/// What the server is to be told now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Feedback {
    /// `proceeding`, `cnt` of `of` targets running.
    Proceeding { cnt: u32, of: u32 },
    /// Every target activated; at least one still in probation.
    Downloaded,
    /// The new versions run and passed probation.
    Success,
    /// A target was rolled back or refused: why, and what runs now.
    Failure(String),
    /// `proceeding`, nothing fetched: a wait the agent names (the byte budget's, and until
    /// when). Sent once per wait, not recorded (the action has not moved on).
    Waiting(String),
}

impl Feedback {
    pub(crate) fn stage(&self) -> Stage {
        match self {
            Feedback::Proceeding { .. } | Feedback::Waiting(_) => Stage::Proceeding,
            Feedback::Downloaded => Stage::Downloaded,
            Feedback::Success | Feedback::Failure(_) => Stage::Closed,
        }
    }

    /// The DDI feedback document (`POST deploymentBase/{id}/feedback`).
    pub(crate) fn document(&self, id: &str) -> serde_json::Value {
        let (execution, finished, details, progress) = match self {
            Feedback::Proceeding { cnt, of } => (
                "proceeding",
                "none",
                format!("{cnt} of {of} running"),
                Some((cnt, of)),
            ),
            Feedback::Downloaded => (
                "downloaded",
                "none",
                "verified and activated; in probation".to_string(),
                None,
            ),
            Feedback::Success => (
                "closed",
                "success",
                "running and through probation".to_string(),
                None,
            ),
            Feedback::Failure(why) => ("closed", "failure", why.clone(), None),
            Feedback::Waiting(why) => ("proceeding", "none", why.clone(), None),
        };
        let mut result = serde_json::json!({ "finished": finished });
        if let Some((cnt, of)) = progress {
            result["progress"] = serde_json::json!({"cnt": cnt, "of": of});
        }
        serde_json::json!({
            "id": id,
            "status": {"execution": execution, "result": result, "details": [details]},
        })
    }
}

/// Where each target stands, read from the version records (the engine's truth). `Err`: the
/// failure's wording for the server's feedback (text, as `ddi`'s refusals).
fn state_of(versions: &VersionRecords, name: &str, version: &str) -> Result<bool, String> {
    let rec = versions.get(name).cloned().unwrap_or_default();
    let running = rec.current.as_deref().unwrap_or("none");
    if rec.bad.iter().any(|b| b == version) {
        return Err(format!(
            "{name} {version} was rolled back (it failed its probation); {name} {running} runs"
        ));
    }
    if let Some(r) = rec.refused.as_ref().filter(|r| r.version == version) {
        return Err(format!(
            "{name} {version} was refused: {}; {name} {running} runs",
            r.reason
        ));
    }
    // Ok(true): active and through probation; Ok(false): not yet.
    Ok(rec.current.as_deref() == Some(version) && rec.probation.as_deref() != Some(version))
}

/// Where the OS image `version` stands, read from the OS engine's state (`osimage`, its
/// truth, saved atomically and surviving the reboot): `(done, active)`, done once booted and
/// through its health gate, active while installed in the other slot, rebooting or in the
/// gate. `Err`: the failure's wording (a refusal, or the rollback the old slot's agent saw).
fn os_state_of(os: &OsState, version: &str) -> Result<(bool, bool), String> {
    // A failed gate marks the version bad on the new slot, before the reboot back: the
    // failure is the old slot's agent's to tell, once the rollback is done (phase idle).
    if matches!(&os.phase, Phase::RollingBack { version: v, .. } if v == version) {
        return Ok((false, true));
    }
    if os.bad.iter().any(|b| b == version) {
        let why = os.last_result.as_deref().unwrap_or("failed");
        let running = os.version.as_deref().unwrap_or("of the booted slot");
        return Err(format!("OS {version}: {why}; OS {running} runs"));
    }
    let done = os.version.as_deref() == Some(version) && os.phase == Phase::Idle;
    let active = matches!(&os.phase,
        Phase::Installed { version: v, .. }
        | Phase::Rebooting { version: v, .. }
        | Phase::Gate { version: v, .. } if v == version);
    Ok((done, active))
}

/// The feedback due now for `rec`, given the version records and whether a version is
/// downloaded and verified in the engine's cache (`staged`); `None` when the server knows
/// all there is to know. A download-only action ends with `downloaded` once every target
/// is staged (hawkBit closes such an action on that report).
pub(crate) fn due(
    rec: &ActionRecord,
    versions: &VersionRecords,
    os: &OsState,
    staged: &dyn Fn(&str, &str) -> bool,
) -> Option<Feedback> {
    // One reading of a target for both kinds of action: `(done, active)`, or why it failed.
    let state = |name: &str, version: &str| {
        if name == super::ddi::CHUNK_OS {
            return os_state_of(os, version);
        }
        state_of(versions, name, version).map(|done| {
            let current = versions.get(name).and_then(|r| r.current.as_deref());
            (done, !done && current == Some(version))
        })
    };
    if rec.stage == Stage::Closed {
        return None;
    }
    if let Some(why) = &rec.refused {
        return Some(Feedback::Failure(why.clone()));
    }
    if rec.download_only {
        if let Some(why) = rec.targets.iter().find_map(|(n, v)| state(n, v).err()) {
            return Some(Feedback::Failure(why));
        }
        let of = rec.targets.len() as u32;
        // An OS image is staged once its bundle is verified on the data partition
        // (`staged`; RAUC is not asked while the server holds it), or written to a slot.
        let cnt = rec
            .targets
            .iter()
            .filter(|(n, v)| {
                staged(n, v)
                    || (n == super::ddi::CHUNK_OS && state(n, v).is_ok_and(|(d, a)| d || a))
            })
            .count() as u32;
        let fb = if cnt == of {
            Feedback::Downloaded
        } else {
            Feedback::Proceeding { cnt, of }
        };
        return advances(rec, &fb).then_some(fb);
    }
    let of = rec.targets.len() as u32;
    let mut done = 0u32;
    let mut active = 0u32;
    for (name, version) in &rec.targets {
        if name == super::ddi::CHUNK_CONFIG {
            // The machine config: done once the agent applied it (`staged` says so).
            if staged(name, version) {
                done += 1;
            }
            continue;
        }
        match state(name, version) {
            Err(why) => return Some(Feedback::Failure(why)),
            Ok((true, _)) => done += 1,
            Ok((false, true)) => active += 1,
            Ok((false, false)) => {}
        }
    }
    let fb = if done == of {
        Feedback::Success
    } else if done + active == of {
        Feedback::Downloaded
    } else {
        Feedback::Proceeding { cnt: done, of }
    };
    advances(rec, &fb).then_some(fb)
}

/// `fb` tells the server something new: a later stage, or more progress.
fn advances(rec: &ActionRecord, fb: &Feedback) -> bool {
    fb.stage() > rec.stage
        || matches!(fb, Feedback::Proceeding { cnt, .. } if rec.stage == Stage::Proceeding && *cnt > rec.progress)
}

pub(crate) fn path(paths: &Paths) -> PathBuf {
    paths.state_dir().join("hawkbit-action.json")
}

/// The record; a missing file is none, an unreadable one is set aside and counted as none
/// (the server offers the action again, and the version records say what ran).
pub(crate) fn load(paths: &Paths) -> Option<ActionRecord> {
    let p = path(paths);
    let bytes = std::fs::read(&p).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(r) => Some(r),
        Err(e) => {
            crate::warn!(super::SUB, "{} is corrupt ({e}); set aside", p.display());
            let _ = std::fs::rename(&p, p.with_extension("json.corrupt"));
            None
        }
    }
}

/// Writes the record atomically; the lock is the token that the caller holds it.
pub(crate) fn save(
    paths: &Paths,
    rec: &ActionRecord,
    _held: &StateLock,
) -> Result<(), HawkbitError> {
    let p = path(paths);
    let bytes = serde_json::to_vec_pretty(rec).map_err(HawkbitError::Encode)?;
    crate::fsutil::atomic_write(&p, &bytes, 0o644)
        .map_err(|source| HawkbitError::Write { path: p, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update::NameRecord;

    fn none(_: &str, _: &str) -> bool {
        false
    }

    /// The rule for actions of binaries alone (no OS image in play).
    fn due(
        r: &ActionRecord,
        v: &VersionRecords,
        staged: &dyn Fn(&str, &str) -> bool,
    ) -> Option<Feedback> {
        super::due(r, v, &OsState::default(), staged)
    }

    fn rec(stage: Stage) -> ActionRecord {
        ActionRecord {
            stage,
            ..ActionRecord::new("7", vec![("svc-server".into(), "2.0.0".into())])
        }
    }

    fn versions(current: &str, probation: Option<&str>, bad: &[&str]) -> VersionRecords {
        let mut v = VersionRecords::default();
        *v.entry("svc-server") = NameRecord {
            current: Some(current.into()),
            probation: probation.map(str::to_string),
            bad: bad.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        v
    }

    #[test]
    fn success_only_after_probation() {
        let r = rec(Stage::New);
        assert_eq!(
            due(&r, &versions("1.0.0", None, &[]), &none),
            Some(Feedback::Proceeding { cnt: 0, of: 1 })
        );
        assert_eq!(
            due(&r, &versions("2.0.0", Some("2.0.0"), &[]), &none),
            Some(Feedback::Downloaded)
        );
        assert_eq!(
            due(
                &rec(Stage::Downloaded),
                &versions("2.0.0", Some("2.0.0"), &[]),
                &none,
            ),
            None,
            "nothing new to say while the probation runs"
        );
        assert_eq!(
            due(
                &rec(Stage::Downloaded),
                &versions("2.0.0", None, &[]),
                &none
            ),
            Some(Feedback::Success)
        );
    }

    #[test]
    fn a_rollback_is_a_failure_naming_what_runs() {
        let fb = due(
            &rec(Stage::Downloaded),
            &versions("1.0.0", None, &["2.0.0"]),
            &none,
        )
        .unwrap();
        let Feedback::Failure(why) = &fb else {
            panic!("{fb:?}")
        };
        assert!(
            why.contains("rolled back") && why.contains("svc-server 1.0.0 runs"),
            "{why}"
        );
        assert_eq!(
            due(
                &rec(Stage::Closed),
                &versions("1.0.0", None, &["2.0.0"]),
                &none
            ),
            None
        );
    }

    #[test]
    fn a_download_only_action_ends_with_downloaded_once_staged() {
        let mut r = rec(Stage::New);
        r.download_only = true;
        let v = versions("1.0.0", None, &[]);
        assert_eq!(
            due(&r, &v, &none),
            Some(Feedback::Proceeding { cnt: 0, of: 1 })
        );
        let staged = |_: &str, v: &str| v == "2.0.0";
        assert_eq!(due(&r, &v, &staged), Some(Feedback::Downloaded));
        r.stage = Stage::Downloaded;
        assert_eq!(due(&r, &v, &staged), None, "said once");
        // Never `success`: nothing was installed.
        r.stage = Stage::Proceeding;
        assert_ne!(due(&r, &v, &staged), Some(Feedback::Success));
    }

    /// An OS image: `proceeding` while it downloads and installs, `downloaded` once in the
    /// other slot (reboot and gate to come), `success` only once its health gate passed on
    /// the new slot; a rollback or RAUC's refusal is a `failure` with the engine's reason.
    #[test]
    fn an_os_image_succeeds_only_after_its_health_gate() {
        let r = ActionRecord::new("9", vec![("os".into(), "2.0".into())]);
        let v = VersionRecords::default();
        let os = |phase: Phase, version: &str| OsState {
            phase,
            version: Some(version.into()),
            ..OsState::default()
        };
        let idle = os(Phase::Idle, "1.0");
        assert_eq!(
            super::due(&r, &v, &idle, &none),
            Some(Feedback::Proceeding { cnt: 0, of: 1 })
        );
        let gate = os(
            Phase::Gate {
                version: "2.0".into(),
                slot: "rootfs.1".into(),
                from_slot: "rootfs.0".into(),
                since: 1,
                boot_id: "b".into(),
            },
            "1.0",
        );
        assert_eq!(super::due(&r, &v, &gate, &none), Some(Feedback::Downloaded));
        let passed = os(Phase::Idle, "2.0");
        assert_eq!(super::due(&r, &v, &passed, &none), Some(Feedback::Success));
        let rolling = os(
            Phase::RollingBack {
                version: "2.0".into(),
                slot: "rootfs.1".into(),
                from_slot: "rootfs.0".into(),
                why: "svc-server crashed 3 times".into(),
                reboots: 1,
            },
            "1.0",
        );
        let mut rolling_bad = rolling.clone();
        rolling_bad.bad = vec!["2.0".into()];
        assert_eq!(
            super::due(&r, &v, &rolling_bad, &none),
            Some(Feedback::Downloaded),
            "the failing slot tells nothing final: the old slot's agent does"
        );
        let mut rolled = os(Phase::Idle, "1.0");
        rolled.bad = vec!["2.0".into()];
        rolled.last_result = Some("rolled back: svc-server crashed 3 times".into());
        let Some(Feedback::Failure(why)) = super::due(&r, &v, &rolled, &none) else {
            panic!("no failure")
        };
        assert!(
            why.contains("rolled back: svc-server crashed") && why.contains("OS 1.0 runs"),
            "{why}"
        );
    }

    #[test]
    fn documents_follow_the_ddi_feedback_shape() {
        let d = Feedback::Proceeding { cnt: 1, of: 2 }.document("7");
        assert_eq!(d["status"]["execution"], "proceeding");
        assert_eq!(d["status"]["result"]["progress"]["of"], 2);
        let d = Feedback::Waiting("waiting for the byte budget until t".into()).document("7");
        assert_eq!(d["status"]["execution"], "proceeding");
        assert_eq!(d["status"]["result"]["finished"], "none");
        assert_eq!(
            d["status"]["details"][0],
            "waiting for the byte budget until t"
        );
        let d = Feedback::Failure("x".into()).document("7");
        assert_eq!(d["status"]["result"]["finished"], "failure");
        assert_eq!(d["status"]["details"][0], "x");
    }
}
