//! agent-provisioning under the daemon: the provisioning service (hotspot, portal, joining,
//! retries) on a thread of its own while the subsystem is enabled and the machine has a
//! Wi-Fi device, and the config's networks saved as NetworkManager profiles when a config
//! was fetched online (spec §5). `disable_subsystem: true` leaves the network untouched.
use crate::config::model::ProvisioningSection;
use crate::paths::Paths;
use crate::provisioning::{defaults, nm::NetworkBackend, service};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct Runner {
    /// The running service's stop flag and its settings.
    running: Option<(Arc<AtomicBool>, defaults::Settings)>,
    /// Whether NetworkManager has a Wi-Fi device (asked once).
    wifi: Option<bool>,
    /// Set by the daemon after each poll: the management app answered.
    pub app_reachable: Arc<AtomicBool>,
    /// The running service's networks that failed, and why (`live`).
    failures: service::NetworkFailures,
}

impl Runner {
    /// Brings the subsystem in line with `section` (at start and on every config change);
    /// returns its status for the report.
    pub(crate) fn apply(
        &mut self,
        paths: &Paths,
        section: &ProvisioningSection,
        fetched_online: bool,
    ) -> Value {
        if section.disable_subsystem {
            self.stop();
            return json!({"state": "disabled"});
        }
        let wifi = *self
            .wifi
            .get_or_insert_with(crate::provisioning::nm::wifi_device_present);
        if !wifi {
            return json!({"state": "idle", "reason": "no Wi-Fi device managed by NetworkManager"});
        }
        if fetched_online {
            let mut nm = crate::provisioning::nm::Nmcli::new(
                paths.device("/etc/NetworkManager/system-connections"),
                crate::provisioning::eap::dir(paths),
            );
            for p in crate::provisioning::apply_networks(section, true) {
                match nm.save_wifi(&p) {
                    Ok(()) => crate::info!(
                        "provisioning",
                        "network {:?} saved (priority {})",
                        p.ssid,
                        p.priority
                    ),
                    Err(e) => crate::error!("provisioning", "network {:?} not saved: {e}", p.ssid),
                }
            }
        }
        let manufacturer = match crate::provisioning::manufacturer::load_defaults(paths) {
            Ok(d) => d,
            Err(e) => {
                crate::error!("provisioning", "manufacturer defaults ignored: {e}");
                Default::default()
            }
        };
        let settings = defaults::effective(&[&manufacturer, &section.attributes]);
        if self.running.as_ref().map(|(_, s)| s) == Some(&settings) {
            return json!({"state": "running"});
        }
        // New settings: the old service stops at its next tick and a new one starts.
        self.stop();
        if let Some(why) = defaults::startup_problem(&settings) {
            crate::error!("provisioning", "provisioning is off: {why}");
            return json!({"state": "error", "reason": why});
        }
        if let Err(e) = crate::provisioning::dns::install(paths.root()) {
            crate::warn!("provisioning", "DNS redirect for the portal: {e}");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (stop2, paths2, settings2, reach) = (
            Arc::clone(&stop),
            paths.clone(),
            settings.clone(),
            Arc::clone(&self.app_reachable),
        );
        // A new service, a new view: the old one's failures are not this one's.
        self.failures = service::NetworkFailures::default();
        let failures = Arc::clone(&self.failures);
        let spawned = crate::sys::thread("provisioning").spawn(move || {
            service::Service::new(paths2, settings2, Some(reach))
                .with_failures(failures)
                .run(&stop2, false);
        });
        match spawned {
            Ok(_) => {
                crate::info!("provisioning", "state: started");
                self.running = Some((stop, settings));
                json!({"state": "running"})
            }
            Err(e) => {
                crate::error!("provisioning", "cannot start: {e}");
                json!({"state": "error", "reason": e.to_string()})
            }
        }
    }

    /// The live part of the subsystem's status: while the service runs, `networks`, each
    /// known network whose last activation failed with the reason in words (a wrong
    /// password, an untrusted server certificate...), so that it is seen without the log.
    pub(crate) fn live(&self, entry: &mut Value) {
        let Some(obj) = entry.as_object_mut() else {
            return;
        };
        if self.running.is_none() {
            obj.remove("networks");
            return;
        }
        let failed = self.failures.lock().map(|f| f.clone()).unwrap_or_default();
        let nets: serde_json::Map<String, Value> = failed
            .into_iter()
            .map(|(id, why)| (id, json!({"state": "failed", "reason": why})))
            .collect();
        obj.insert("networks".into(), Value::Object(nets));
    }

    pub(crate) fn stop(&mut self) {
        if let Some((stop, _)) = self.running.take() {
            stop.store(true, Ordering::SeqCst);
            crate::info!("provisioning", "state: stopped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Before, a vendor's network that failed (a wrong 802.1X password, an untrusted server
    /// certificate) showed why only in the log: the status said "running".
    #[test]
    fn the_status_names_each_failed_network_and_why_while_the_service_runs() {
        let mut r = Runner::default();
        let mut entry = json!({"state": "running"});
        r.live(&mut entry);
        assert_eq!(entry.get("networks"), None, "nothing runs: no networks");
        r.running = Some((Arc::new(AtomicBool::new(false)), Default::default()));
        r.failures.lock().unwrap().extend([
            (
                "net-corp".to_string(),
                "802.1X authentication failed".to_string(),
            ),
            (
                "net-lab".to_string(),
                "the network is not in range".to_string(),
            ),
        ]);
        r.live(&mut entry);
        assert_eq!(
            entry["networks"],
            json!({"net-corp": {"state": "failed", "reason": "802.1X authentication failed"},
                   "net-lab": {"state": "failed", "reason": "the network is not in range"}})
        );
        r.failures.lock().unwrap().clear();
        r.live(&mut entry);
        assert_eq!(
            entry["networks"],
            json!({}),
            "came up since: no longer listed"
        );
        r.stop();
        r.live(&mut entry);
        assert_eq!(entry.get("networks"), None);
    }
}
