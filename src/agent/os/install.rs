//! The OS install's worker thread: the download, then (when the restart rule allows the
//! reboot) RAUC's install, off the loop; and what each outcome does to the track
//! (downloaded, installed, refused for good, or tried again later).
use super::{gate_wait, Facts, OsTrack, RETRY_PAUSE};
use crate::agent::policy::RestartGate;
use crate::osimage::{self, OfferDecision, OsError, OsState, Phase, SUB};
use crate::paths::Paths;
use crate::update::UpdateError;
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// The OS status's `waiting` while the byte budget holds the bundle.
const BUDGET_WAIT: &str = "the byte budget (status budget.waiting says until when)";

pub(super) struct Worker {
    pub(super) version: String,
    pub(super) rx: Receiver<Result<Done, OsError>>,
    /// RAUC's install (else the download).
    pub(super) installing: bool,
}

/// What a worker did: a download (the bundle verified on the data partition) or an install.
pub(super) enum Done {
    Downloaded,
    Installed,
}

impl OsTrack {
    pub(super) fn offer(&mut self, paths: &Paths, state: &OsState, f: &Facts<'_>) {
        let decision = osimage::offer_decision(state, f.offered, f.upgrades);
        // A bundle is kept only while an install may still use it: one left when its
        // version runs (a cut between RAUC's finish and `installed` saved: campaign seed
        // 4344 cut 6), was refused, or is no longer offered would hold the data partition's
        // space for good.
        if decision != OfferDecision::Install {
            osimage::remove_bundles(paths);
            self.downloaded = None;
        }
        let Some(o) = f.offered else {
            return;
        };
        let v = &o.target.version;
        match decision {
            OfferDecision::Keep => {}
            OfferDecision::UpgradesOff => {
                self.waiting = Some("agent-syscfg upgrades.type is none");
                self.say_once(
                    format!(
                        "OS {v} offered; not installed: agent-syscfg's upgrades.type is \"none\""
                    ),
                    false,
                );
            }
            OfferDecision::Bad => self.say_once(
                format!("OS {v} failed before; not retried until another version is offered"),
                false,
            ),
            OfferDecision::Unsupported(fmt) => self.say_once(
                format!(
                    "OS {v} offered as {fmt:?}: this agent installs {:?} only",
                    osimage::FORMAT_RAUC
                ),
                true,
            ),
            OfferDecision::Install => {
                if self.retry_at.is_some_and(|t| f.clock.now < t) {
                    return;
                }
                self.waiting = None;
                if let Err(e) =
                    crate::agent::updater::check_artifact_url(paths, f.app_address, &o.target.url)
                {
                    self.refuse(paths, v, &e.to_string());
                    return;
                }
                let gate = Self::restart_gate(f);
                let kept = self.downloaded.as_ref() == Some(v);
                let (paths2, offer, opts) = (paths.clone(), o.clone(), f.download.clone());
                let (identity, from) = (f.identity.clone(), f.from);
                // The kept bundle is checked again (size, sha256) just before RAUC reads it:
                // it may have waited on the data partition for days.
                let fetch = move || osimage::fetch_bundle(&paths2, &offer, from, &opts, identity);
                match (kept, gate) {
                    // RAUC makes the slot it writes the next boot: only when the reboot
                    // into it is allowed, so that no cut boots it outside the window.
                    (true, RestartGate::Now) => {
                        crate::info!(SUB, "OS {v}: installing through RAUC");
                        let (paths2, mut st, version) = (paths.clone(), state.clone(), v.clone());
                        self.spawn(v, true, move || {
                            let bundle = fetch()?;
                            osimage::install(&paths2, &mut st, &version, &bundle)
                                .map(|()| Done::Installed)
                        });
                    }
                    (true, gate) => {
                        let (why, when) = gate_wait(gate, f);
                        self.waiting = Some(why);
                        self.say_once(format!("OS {v} downloaded; installed when {when}"), false);
                    }
                    (false, _) => {
                        crate::info!(SUB, "OS {v} offered: downloading and verifying");
                        self.spawn(v, false, move || fetch().map(|_| Done::Downloaded));
                    }
                }
            }
        }
    }

    /// Runs `work` for OS `version` on the worker thread (`installing`: RAUC's install).
    fn spawn(
        &mut self,
        version: &str,
        installing: bool,
        work: impl FnOnce() -> Result<Done, OsError> + Send + 'static,
    ) {
        let (tx, rx) = channel();
        let spawned = crate::sys::thread("os-install").spawn(move || {
            let _ = tx.send(work());
        });
        match spawned {
            Ok(_) => {
                self.worker = Some(Worker {
                    version: version.to_string(),
                    rx,
                    installing,
                })
            }
            Err(e) => crate::error!(SUB, "cannot start the OS install: {e}"),
        }
    }

    /// `version` is refused for what it is: recorded as bad and reported.
    pub(super) fn refuse(&mut self, paths: &Paths, version: &str, why: &str) {
        if let Some(s) = self.state.as_mut() {
            s.add_bad(version);
            s.last_result = Some(format!("refused {version}: {why}"));
        }
        self.save(paths);
        crate::error!(SUB, "OS {version} refused: {why}; the booted slot stays");
    }

    pub(super) fn finish_install(
        &mut self,
        paths: &Paths,
        version: &str,
        r: Result<Done, OsError>,
    ) {
        // The next install reads the bundle this download left, and no other.
        self.downloaded = None;
        // The worker wrote the phase; the file is the truth.
        let mut s = OsState::load(paths);
        match r {
            Ok(Done::Downloaded) => {
                self.downloaded = Some(version.to_string());
                self.state = Some(s);
            }
            Ok(Done::Installed) => {
                s.last_result = None;
                self.state = Some(s);
                crate::info!(SUB, "OS {version} installed by RAUC into the other slot");
            }
            // Held by the byte budget: no failure, nothing fetched; asked again when its
            // period ends (the budget logged the wait once, and the status shows it).
            Err(OsError::Fetch(UpdateError::OverBudget { wait_secs, .. })) => {
                s.phase = Phase::Idle;
                self.state = Some(s);
                self.waiting = Some(BUDGET_WAIT);
                let after = Duration::from_secs(wait_secs.saturating_add(1));
                self.retry_at = Some(Instant::now() + after.min(RETRY_PAUSE));
            }
            Err(e) => {
                let refusal = match &e {
                    OsError::BadOffer(_) | OsError::NoNewSlot(_) => true,
                    OsError::Fetch(u) => u.is_refusal(),
                    OsError::Rauc(osimage::rauc::RaucError::InstallFailed(_)) => true,
                    _ => false,
                };
                s.phase = Phase::Idle;
                self.state = Some(s);
                if refusal {
                    self.refuse(paths, version, &e.to_string());
                } else {
                    if let Some(s) = self.state.as_mut() {
                        s.last_result = Some(format!("failed {version}: {e}"));
                    }
                    self.save(paths);
                    self.retry_at = Some(Instant::now() + RETRY_PAUSE);
                    crate::error!(
                        SUB,
                        "OS {version} not installed: {e}; the booted slot stays; trying again in {} min",
                        RETRY_PAUSE.as_secs() / 60
                    );
                }
            }
        }
    }
}
