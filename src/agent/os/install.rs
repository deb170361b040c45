//! The OS install's worker thread: the download and RAUC's install off the loop, and what
//! its outcome does to the track (installed, refused for good, or tried again later).
use super::{Facts, OsTrack, RETRY_PAUSE};
use crate::osimage::{self, OfferDecision, OsError, OsState, Phase, SUB};
use crate::paths::Paths;
use crate::update::UpdateError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The OS status's `waiting` while the byte budget holds the bundle.
const BUDGET_WAIT: &str = "the byte budget (status budget.waiting says until when)";

pub(super) struct Worker {
    pub(super) version: String,
    pub(super) rx: Receiver<Result<(), OsError>>,
    /// Set by the worker once the bundle is verified and handed to RAUC.
    pub(super) installing: Arc<AtomicBool>,
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
                crate::info!(
                    SUB,
                    "OS {v} offered: downloading, then installing through RAUC"
                );
                let (tx, rx) = channel();
                let installing = Arc::new(AtomicBool::new(false));
                let flag = installing.clone();
                let (paths2, offer, opts, mut st) =
                    (paths.clone(), o.clone(), f.download.clone(), state.clone());
                let (identity, from) = (f.identity.clone(), f.from);
                let spawned = crate::sys::thread("os-install").spawn(move || {
                    let r = osimage::fetch_bundle(&paths2, &offer, from, &opts, identity).and_then(
                        |b| {
                            flag.store(true, Ordering::Relaxed);
                            osimage::install(&paths2, &mut st, &offer.target.version, &b)
                        },
                    );
                    let _ = tx.send(r);
                });
                match spawned {
                    Ok(_) => {
                        self.worker = Some(Worker {
                            version: v.clone(),
                            rx,
                            installing,
                        })
                    }
                    Err(e) => crate::error!(SUB, "cannot start the OS install: {e}"),
                }
            }
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

    pub(super) fn finish_install(&mut self, paths: &Paths, version: &str, r: Result<(), OsError>) {
        // The worker wrote the phase; the file is the truth.
        let mut s = OsState::load(paths);
        match r {
            Ok(()) => {
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
