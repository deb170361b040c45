//! The daemon's side of OS updates (`osimage`): takes the offer from the answer, downloads
//! and verifies the bundle ahead on a worker thread, and lets RAUC install it (which makes the
//! new slot the boot loader's next boot) only when the spec's restart rule for svc-server
//! allows the reboot (`policy::restart_gate`: maintenance window, svc-server idle, the update
//! server's hold), then reboots; after the boot it runs the health gate over the daemon's
//! facts. Installing ahead would let a power cut boot the new OS outside the window.
//! `facts`: what the loop gathers for a step; `install`: the worker thread that downloads
//! and hands the bundle to RAUC, and what its outcome does.
mod facts;
mod install;

use super::policy::{self, RestartGate};
use crate::config::model::{MaintenanceWindow, DAY_NAMES};
use crate::osimage::{self, BootFinding, GateFacts, GateVerdict};
use crate::osimage::{OsError, OsState, OsStatus, Phase, SUB};
use crate::paths::Paths;
pub(crate) use facts::Facts;
use install::Worker;
use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

/// After a failure that trying again may cure (network, RAUC down), the next attempt waits.
const RETRY_PAUSE: Duration = Duration::from_secs(600);
/// RAUC unreachable after a reboot: asked again this often.
const BOOT_CHECK_PAUSE: Duration = Duration::from_secs(30);

#[derive(Default)]
pub(crate) struct OsTrack {
    state: Option<OsState>,
    booted_slot: Option<String>,
    worker: Option<Worker>,
    /// The after-boot decision is made (once per process, when RAUC answers).
    boot_checked: bool,
    check_at: Option<Instant>,
    retry_at: Option<Instant>,
    /// What was logged last, so a waiting state is said once.
    said: Option<String>,
    waiting: Option<&'static str>,
    offered: Option<String>,
    /// svc-server's crash count when this process began watching the gate.
    crashes_at_gate: Option<u64>,
    /// Why the engine cannot go on now (RAUC unreachable), for the status.
    problem: Option<String>,
    compatible: Option<String>,
    /// The offered version's bundle, downloaded and verified, waiting for the restart rule
    /// before RAUC sees it (in memory: after a restart the file is checked again, not
    /// downloaded again).
    downloaded: Option<String>,
    /// An installed slot waits for the window: the old slot is the next boot again (RAUC's
    /// mark-active), asked once per process unless it failed (then again after this).
    kept_primary: bool,
    keep_retry_at: Option<Instant>,
}

/// Why the restart rule waits: the status's `waiting`, and the log's "installed when ...".
fn gate_wait(gate: RestartGate, f: &Facts<'_>) -> (&'static str, String) {
    match gate {
        RestartGate::OutsideWindow => (
            "outside the maintenance window",
            format!(
                "the maintenance window opens ({})",
                f.window.map(window_text).unwrap_or_default()
            ),
        ),
        RestartGate::UpdateServerHold => (
            "the update server asks to wait",
            format!(
                "the update server allows it ({})",
                f.update_server_hold.unwrap_or("")
            ),
        ),
        _ => (
            "svc-server is processing a config change",
            "svc-server has finished its config change".into(),
        ),
    }
}

/// `02:00-04:00`, with its days when not every day: `sat,sun 02:00-04:00`.
fn window_text(w: &MaintenanceWindow) -> String {
    let hhmm = |m: u16| format!("{:02}:{:02}", m / 60, m % 60);
    let times = format!("{}-{}", hhmm(w.start), hhmm(w.end));
    if w.days.len() >= 7 {
        return times;
    }
    let days: Vec<&str> = w.days.iter().map(|d| DAY_NAMES[*d as usize % 7]).collect();
    format!("{} {times}", days.join(","))
}

impl OsTrack {
    /// Says `msg` once while it stays the same.
    fn say_once(&mut self, msg: String, error: bool) {
        if self.said.as_ref() != Some(&msg) {
            if error {
                crate::error!(SUB, "{msg}");
            } else {
                crate::info!(SUB, "{msg}");
            }
            self.said = Some(msg);
        }
    }

    fn save(&self, paths: &Paths) {
        if let Some(s) = &self.state {
            if let Err(e) = s.save(paths) {
                crate::error!(SUB, "{e}");
            }
        }
    }

    /// The OS part of the status, once the machine has had anything to do with OS images.
    pub(crate) fn status(&self) -> Option<OsStatus> {
        let s = self.state.as_ref()?;
        if *s == OsState::default() && self.offered.is_none() && self.booted_slot.is_none() {
            return None;
        }
        let state = match (&self.worker, &s.phase) {
            (Some(w), Phase::Idle) if w.installing => "installing",
            (Some(_), Phase::Idle) => "downloading",
            // Verified on the data partition; RAUC is asked when the restart rule allows.
            (None, Phase::Idle) if self.downloaded.is_some() && self.downloaded == self.offered => {
                "downloaded"
            }
            (_, p) => p.name(),
        };
        Some(OsStatus {
            compatible: self.compatible.clone(),
            booted_slot: self.booted_slot.clone(),
            version: s.version.clone(),
            previous: s.previous.clone(),
            offered: self.offered.clone(),
            bad: s.bad.clone(),
            state: state.into(),
            waiting: self.waiting.map(str::to_string),
            error: self.problem.clone(),
            last_result: s.last_result.clone(),
        })
    }

    /// While the gate waits for the app (not reached since the gate began): the longest the
    /// next poll may wait (`GatePolicy::app_poll_every`).
    pub(crate) fn gate_poll_within(
        &self,
        gate: osimage::GatePolicy,
        last_contact: Option<u64>,
    ) -> Option<Duration> {
        match self.state.as_ref()?.phase {
            Phase::Gate { since, .. } if last_contact.is_none_or(|t| t < since) => {
                Some(gate.app_poll_every())
            }
            _ => None,
        }
    }

    /// Nothing offered, nothing running, the state at rest and read: a step would change
    /// nothing, so the loop need not gather its facts (files, the clock) on every pass.
    pub(crate) fn at_rest(&self, offered: bool) -> bool {
        !offered
            && self.offered.is_none()
            && self.worker.is_none()
            && self.state.as_ref().is_some_and(|s| s.phase == Phase::Idle)
    }

    pub(crate) fn step(&mut self, paths: &Paths, f: Facts<'_>) {
        let state = self.state.get_or_insert_with(|| OsState::load(paths));
        self.offered = f.offered.map(|o| o.target.version.clone());
        let idle = state.phase == Phase::Idle;
        if let Some(w) = &self.worker {
            match w.rx.try_recv() {
                Err(TryRecvError::Empty) => {
                    if let Some(o) = f.offered.filter(|o| o.target.version != w.version) {
                        let (doing, job) = match w.installing {
                            true => ("installed", "install"),
                            false => ("downloaded", "download"),
                        };
                        let msg = format!(
                            "OS {} offered while OS {} is being {doing}: it waits until that {job} has ended",
                            o.target.version, w.version
                        );
                        self.say_once(msg, false);
                    }
                    return;
                }
                r => {
                    let version = w.version.clone();
                    self.worker = None;
                    self.finish_install(
                        paths,
                        &version,
                        r.unwrap_or_else(|_| {
                            Err(OsError::State(
                                "the install worker ended without an answer".into(),
                            ))
                        }),
                    );
                }
            }
        }
        if !self.boot_checked && (!idle || f.offered.is_some()) {
            if self.check_at.is_some_and(|t| f.clock.now < t) {
                return;
            }
            if !self.check_boot(paths, f.unix_now) {
                self.check_at = Some(f.clock.now + BOOT_CHECK_PAUSE);
                return;
            }
        }
        let Some(state) = self.state.clone() else {
            return;
        };
        match &state.phase {
            Phase::Idle => self.offer(paths, &state, &f),
            Phase::Installed {
                version,
                slot,
                from_slot,
            } => self.reboot_when_allowed(paths, &f, version, slot, from_slot),
            Phase::Gate {
                version,
                slot,
                from_slot,
                since,
                ..
            } => {
                let base = *self.crashes_at_gate.get_or_insert(f.server_crashes);
                let facts = GateFacts {
                    now: f.unix_now,
                    since: *since,
                    server_required: f.server_required,
                    server_up_secs: f.server_up_secs,
                    server_crashes: f.server_crashes.saturating_sub(base),
                    last_contact: f.last_contact,
                };
                match osimage::gate_verdict(facts, f.gate) {
                    GateVerdict::Waiting => {}
                    GateVerdict::Passed => match osimage::mark_good() {
                        Ok(()) => {
                            let mut s = state.clone();
                            s.previous = s.version.take();
                            s.version = Some(version.clone());
                            s.last_result = Some(format!("installed {version}"));
                            s.phase = Phase::Idle;
                            self.state = Some(s);
                            self.save(paths);
                            crate::info!(
                                SUB,
                                "OS {version} passed its health gate: slot {slot} marked good"
                            );
                        }
                        Err(e) => self.say_once(
                            format!("OS {version} passed its health gate but cannot be marked good: {e}"),
                            true,
                        ),
                    },
                    GateVerdict::Failed(why) => {
                        if let Err(e) = osimage::mark_bad(slot, from_slot) {
                            // The boot loader's own fallback still applies; say it.
                            crate::error!(SUB, "marking slot {slot} bad: {e}");
                        }
                        let mut s = state.clone();
                        s.add_bad(version);
                        s.phase = Phase::RollingBack {
                            version: version.clone(),
                            slot: slot.clone(),
                            from_slot: from_slot.clone(),
                            why: why.clone(),
                            reboots: 1,
                        };
                        self.state = Some(s);
                        self.save(paths);
                        crate::error!(
                            SUB,
                            "OS {version} failed its health gate: {why}; rolling back to slot {from_slot}"
                        );
                        if let Err(e) = osimage::reboot(&format!("back into slot {from_slot}")) {
                            crate::error!(SUB, "the reboot back into {from_slot} failed: {e}");
                        }
                    }
                }
            }
            // Waiting for the reboot asked for; the next start decides (`check_boot`).
            Phase::Installing { .. } | Phase::Rebooting { .. } | Phase::RollingBack { .. } => {}
        }
    }

    /// The spec's rule for svc-server restarts (the maintenance window, no config change in
    /// progress, the update server's hold), which an OS's install and reboot follow.
    fn restart_gate(f: &Facts<'_>) -> RestartGate {
        policy::restart_gate(
            f.window,
            f.clock.local,
            f.server_busy,
            f.update_server_hold.is_some(),
        )
    }

    /// An installed OS waits for the restart rule, then the machine reboots into its slot.
    /// RAUC installs only when the rule allows, so this waits only when the window closed
    /// during the install: the old slot is made the next boot again meanwhile (a cut must
    /// not boot the new OS outside the window), and the new one just before the reboot.
    fn reboot_when_allowed(
        &mut self,
        paths: &Paths,
        f: &Facts<'_>,
        version: &str,
        slot: &str,
        from_slot: &str,
    ) {
        let gate = Self::restart_gate(f);
        if gate != RestartGate::Now {
            let (why, _) = gate_wait(gate, f);
            self.waiting = Some(why);
            self.say_once(
                format!("OS {version} is installed in slot {slot}; the reboot waits: {why}"),
                false,
            );
            if !self.kept_primary && self.keep_retry_at.is_none_or(|t| f.clock.now >= t) {
                match osimage::keep_primary(from_slot) {
                    Ok(marked) => {
                        self.kept_primary = true;
                        if marked {
                            crate::info!(
                                SUB,
                                "slot {from_slot} is the next boot again until OS {version}'s reboot is allowed"
                            );
                        }
                    }
                    Err(e) => {
                        self.keep_retry_at = Some(f.clock.now + BOOT_CHECK_PAUSE);
                        crate::error!(
                            SUB,
                            "cannot make slot {from_slot} the next boot again: {e}; a reboot now would start OS {version}"
                        );
                    }
                }
            }
            return;
        }
        self.waiting = None;
        if self.keep_retry_at.is_some_and(|t| f.clock.now < t) {
            return;
        }
        // Slot `slot` the next boot again (undoes `keep_primary`; a no-op after RAUC's own).
        if let Err(e) = osimage::keep_primary(slot) {
            self.keep_retry_at = Some(f.clock.now + BOOT_CHECK_PAUSE);
            self.say_once(
                format!(
                    "cannot make slot {slot} the next boot for OS {version}: {e}; not rebooting"
                ),
                true,
            );
            return;
        }
        self.kept_primary = false;
        let phase = Phase::Rebooting {
            version: version.to_string(),
            slot: slot.to_string(),
            from_slot: from_slot.to_string(),
            boot_id: osimage::boot_id(paths),
        };
        self.set_phase(paths, phase);
        crate::update::crash_point("os-rebooting");
        if let Err(e) = osimage::reboot(&format!("into slot {slot} for OS {version}")) {
            crate::error!(SUB, "the reboot for OS {version} failed: {e}");
        }
    }

    fn set_phase(&mut self, paths: &Paths, phase: Phase) {
        if let Some(s) = self.state.as_mut() {
            s.phase = phase;
        }
        self.save(paths);
    }

    /// The after-boot decision; false when RAUC cannot say which slot booted (asked again
    /// later).
    fn check_boot(&mut self, paths: &Paths, now: u64) -> bool {
        let booted = osimage::rauc::Rauc::connect()
            .map_err(OsError::from)
            .and_then(|r| osimage::booted(&r));
        let (slot, bundle_version) = match booted {
            Ok(b) => {
                self.compatible = Some(b.compatible);
                (b.slot, b.version)
            }
            Err(e) => {
                let msg = format!("cannot tell which slot booted: {e}");
                self.problem = Some(msg.clone());
                self.say_once(msg, true);
                return false;
            }
        };
        self.problem = None;
        self.boot_checked = true;
        self.booted_slot = Some(slot.clone());
        let Some(state) = self.state.as_mut() else {
            return true;
        };
        if state.version.is_none() && state.phase == Phase::Idle {
            state.version = bundle_version;
        }
        let boot = osimage::boot_id(paths);
        let phase = state.phase.clone();
        match osimage::after_boot(&phase, &slot, &boot, now) {
            BootFinding::Same => {}
            BootFinding::Next(p) => {
                if let Phase::Gate { version, slot, .. } = &p {
                    crate::info!(
                        SUB,
                        "OS {version} booted from slot {slot}: its health gate begins"
                    );
                    // Its slot is written: the bundle is of no more use (a cut between RAUC's
                    // finish and `installed` saved skipped the install's own removal).
                    osimage::remove_bundles(paths);
                }
                state.phase = p;
            }
            BootFinding::Failed {
                version,
                why,
                bad,
                mark_other_bad,
            } => {
                if mark_other_bad {
                    let new = match &phase {
                        Phase::Rebooting { slot, .. } | Phase::Gate { slot, .. } => slot.clone(),
                        _ => String::new(),
                    };
                    if let Err(e) = osimage::mark_bad(&new, &slot) {
                        crate::error!(SUB, "marking slot {new} bad: {e}");
                    }
                }
                if bad {
                    state.add_bad(&version);
                    state.last_result = Some(format!("rolled back: {why}"));
                    crate::error!(SUB, "OS {version} rolled back: {why}");
                } else {
                    state.last_result = Some(format!("not installed: {why}"));
                    crate::warn!(SUB, "OS {version}: {why}");
                }
                state.phase = Phase::Idle;
            }
            BootFinding::RolledBack { version, why } => {
                state.add_bad(&version);
                state.last_result = Some(format!("rolled back: {why}"));
                state.phase = Phase::Idle;
                crate::error!(
                    SUB,
                    "OS {version} rolled back: {why}; slot {slot} runs; not retried until another version is offered"
                );
            }
            BootFinding::RebootAgain => {
                // A rollback marks the new slot bad again first: without that mark the boot
                // loader would start it again.
                let again = match &mut state.phase {
                    Phase::RollingBack {
                        slot: new,
                        from_slot,
                        reboots,
                        ..
                    } => match osimage::mark_bad(new, from_slot) {
                        Ok(()) => {
                            *reboots += 1;
                            true
                        }
                        Err(e) => {
                            crate::error!(SUB, "marking slot {new} bad: {e}; not rebooting");
                            false
                        }
                    },
                    _ => true,
                };
                if again {
                    if let Err(e) = state.save(paths) {
                        crate::error!(SUB, "{e}");
                    } else if let Err(e) =
                        osimage::reboot("the reboot asked for earlier did not happen")
                    {
                        crate::error!(SUB, "{e}");
                    }
                }
            }
            BootFinding::RollbackStuck { version, why } => {
                state.last_result = Some(format!("rollback failed: {why}"));
                state.phase = Phase::Idle;
                crate::error!(SUB, "OS {version}: rollback failed: {why}");
            }
        }
        self.save(paths);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait's wording names the window as configured: its days only when not all.
    #[test]
    fn the_window_is_named_with_its_days_when_not_every_day() {
        let w = |days: Vec<u8>| MaintenanceWindow {
            days,
            start: 120,
            end: 240,
        };
        assert_eq!(window_text(&w((0..7).collect())), "02:00-04:00");
        assert_eq!(window_text(&w(vec![5, 6])), "sat,sun 02:00-04:00");
    }
}
