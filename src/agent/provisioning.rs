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
        let spawned = std::thread::Builder::new()
            .name("provisioning".into())
            .spawn(move || {
                service::Service::new(paths2, settings2, Some(reach)).run(&stop2, false);
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

    pub(crate) fn stop(&mut self) {
        if let Some((stop, _)) = self.running.take() {
            stop.store(true, Ordering::SeqCst);
            crate::info!("provisioning", "state: stopped");
        }
    }
}
