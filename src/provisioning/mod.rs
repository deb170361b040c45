//! agent-provisioning: first-boot Wi-Fi setup (hotspot + portal), networks by priority, roaming.
//!
//! Decisions are pure (`state::step`, `defaults::effective`); NetworkManager, the portal and the
//! internet check are effects wired around them.
pub(crate) mod ble;
#[cfg(test)]
mod ble_dbus_tests;
pub(crate) mod button;
pub(crate) mod check;
pub(crate) mod conflicts;
pub(crate) mod defaults;
pub(crate) mod dns;
pub(crate) mod dpp;
mod dpp_thread;
pub(crate) mod driver;
pub(crate) mod eap;
#[cfg(test)]
mod flaps_tests;
pub mod improv;
pub mod manufacturer;
mod netfacts;
pub(crate) mod nm;
pub mod portal;
mod portal_actions;
pub mod portal_http;
pub(crate) mod qr;
pub mod service;
pub(crate) mod state;
mod user_networks;
pub(crate) mod wpactrl;

use crate::config::model::ProvisioningSection;
use nm::WifiProfile;

/// Network profiles to apply from a config. Network credentials are only used from a config
/// fetched online (spec §5); `disable_subsystem` leaves the network untouched. Config
/// `networks` and `attributes.networks` both apply; an SSID in `networks` wins.
pub(crate) fn apply_networks(
    section: &ProvisioningSection,
    fetched_online: bool,
) -> Vec<WifiProfile> {
    if section.disable_subsystem || !fetched_online {
        return Vec::new();
    }
    let mut out: Vec<WifiProfile> = Vec::new();
    let attr = section.attributes.networks.iter().flatten();
    for n in section.networks.iter().chain(attr) {
        if n.net_type != "wifi" || out.iter().any(|p| p.ssid == n.ssid) {
            continue;
        }
        out.push(client_profile(n));
    }
    out
}

/// The NetworkManager client profile of a configured network: named `net-<ssid>`
/// (`nm::config_id`), with the network's priority as `autoconnect-priority`.
pub(crate) fn client_profile(n: &crate::config::model::Network) -> WifiProfile {
    WifiProfile {
        id: nm::config_id(&n.ssid),
        ssid: n.ssid.clone(),
        psk: n.psk.clone().unwrap_or_default(),
        priority: n.priority,
        hotspot: false,
        hidden: n.hidden,
        eap: n.eap.clone(),
        ifname: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Network;

    fn net(ssid: &str, prio: i32) -> Network {
        Network {
            net_type: "wifi".into(),
            ssid: ssid.into(),
            psk: Some("password1".into()),
            priority: prio,
            hidden: false,
            eap: None,
            extra: Default::default(),
        }
    }

    #[test]
    fn networks_only_from_online_config_and_not_when_disabled() {
        let mut s = ProvisioningSection {
            networks: vec![net("home", 10)],
            ..Default::default()
        };
        s.attributes.networks = Some(vec![net("home", 1), net("work", 5)]);
        let got = apply_networks(&s, true);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].ssid.as_str(), got[0].priority), ("home", 10));
        assert!(apply_networks(&s, false).is_empty());
        s.disable_subsystem = true;
        assert!(apply_networks(&s, true).is_empty());
    }
}
