//! Settings precedence: built-in < `/etc/svc-defaults.json` < config `attributes` < cloud config.
use crate::config::model::{Network, ProvisioningAttributes};

/// The effective provisioning settings after all layers are applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    pub hotspot_prefix: String,
    pub hotspot_password: String,
    pub roaming_mode: bool,
    pub networks: Vec<Network>,
    pub offline_timeout_secs: u64,
    pub user_idle_timeout_secs: u64,
    pub retry_networks_secs: u64,
    pub check_url: String,
    pub manufacturer: String,
    pub model: String,
    pub hotspot_enabled: bool,
    pub dpp_enabled: bool,
    pub ble_enabled: bool,
    /// The key that authorizes an Improv connection (`button.rs`); none: the label secret
    /// only.
    pub improv_button: Option<crate::config::model::ImprovButton>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            hotspot_prefix: "svc-setup".into(),
            hotspot_password: String::new(),
            roaming_mode: false,
            networks: Vec::new(),
            offline_timeout_secs: 120,
            user_idle_timeout_secs: 300,
            retry_networks_secs: 60,
            check_url: String::new(),
            manufacturer: String::new(),
            model: String::new(),
            hotspot_enabled: true,
            dpp_enabled: false,
            ble_enabled: false,
            improv_button: None,
        }
    }
}

/// Apply one layer of attributes over `base`: a key set in the layer wins.
pub(crate) fn overlay(mut base: Settings, layer: &ProvisioningAttributes) -> Settings {
    if let Some(v) = &layer.hotspot_prefix {
        base.hotspot_prefix = v.clone();
    }
    if let Some(v) = &layer.hotspot_password {
        base.hotspot_password = v.clone();
    }
    if let Some(v) = layer.roaming_mode {
        base.roaming_mode = v;
    }
    if let Some(v) = &layer.networks {
        base.networks = v.clone();
    }
    if let Some(v) = layer.offline_timeout_secs {
        base.offline_timeout_secs = v;
    }
    if let Some(v) = layer.user_idle_timeout_secs {
        base.user_idle_timeout_secs = v;
    }
    if let Some(v) = layer.retry_networks_secs {
        base.retry_networks_secs = v;
    }
    if let Some(v) = &layer.check_url {
        base.check_url = v.clone();
    }
    if let Some(v) = &layer.manufacturer {
        base.manufacturer = v.clone();
    }
    if let Some(v) = &layer.model {
        base.model = v.clone();
    }
    if let Some(v) = layer.hotspot_enabled {
        base.hotspot_enabled = v;
    }
    if let Some(v) = layer.dpp_enabled {
        base.dpp_enabled = v;
    }
    if let Some(v) = layer.ble_enabled {
        base.ble_enabled = v;
    }
    if let Some(v) = &layer.improv_button {
        base.improv_button = Some(v.clone());
    }
    base
}

/// Why the hotspot must not come up with this password, if it must not: shorter than 8
/// characters (the hotspot is never open) or a well-known default (anyone in radio range
/// knows it). The one check the daemon, `svc-agent provision` and the driver share.
pub(crate) fn hotspot_password_problem(pw: &str) -> Option<&'static str> {
    if pw.len() < 8 {
        Some("the hotspot password (defaults or config) is missing or shorter than 8 characters: the hotspot is never open")
    } else if crate::config::validate::is_well_known_password(pw) {
        Some("the hotspot password is a well-known default: the hotspot stays off until a per-device password is set (docs/provisioning.md)")
    } else {
        None
    }
}

/// Why provisioning cannot run with these settings, if it cannot: with the hotspot on, its
/// password must be fit (`hotspot_password_problem`); with it off, DPP or BLE must be on (or there
/// would be no way to hand the machine a network).
pub(crate) fn startup_problem(s: &Settings) -> Option<&'static str> {
    if s.hotspot_enabled {
        hotspot_password_problem(&s.hotspot_password)
    } else if !s.dpp_enabled && !s.ble_enabled {
        Some("the hotspot, DPP and BLE are all disabled (hotspot_enabled, dpp_enabled, ble_enabled): nothing to provision with")
    } else {
        None
    }
}

/// Layers in increasing precedence (manufacturer file, config attributes, cloud config).
pub(crate) fn effective(layers: &[&ProvisioningAttributes]) -> Settings {
    layers
        .iter()
        .fold(Settings::default(), |acc, l| overlay(acc, l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_layers_win_and_unset_keys_fall_through() {
        let manufacturer = ProvisioningAttributes {
            hotspot_prefix: Some("acme".into()),
            hotspot_password: Some("factory-pass".into()),
            offline_timeout_secs: Some(30),
            ..Default::default()
        };
        let local = ProvisioningAttributes {
            hotspot_password: Some("local-pass".into()),
            ..Default::default()
        };
        let cloud = ProvisioningAttributes {
            roaming_mode: Some(true),
            hotspot_password: Some("cloud-pass".into()),
            ..Default::default()
        };
        let s = effective(&[&manufacturer, &local, &cloud]);
        assert_eq!(s.hotspot_prefix, "acme");
        assert_eq!(s.hotspot_password, "cloud-pass");
        assert!(s.roaming_mode);
        assert_eq!(s.offline_timeout_secs, 30);
        assert_eq!(s.retry_networks_secs, 60, "built-in default");
        assert!(s.hotspot_enabled && !s.dpp_enabled, "built-in defaults");
        let s2 = effective(&[&manufacturer, &local]);
        assert_eq!(s2.hotspot_password, "local-pass");
    }

    #[test]
    fn the_hotspot_or_dpp_must_be_on_and_only_the_hotspot_needs_its_password() {
        let mut s = Settings::default();
        assert!(startup_problem(&s).is_some(), "no hotspot password");
        s.hotspot_enabled = false;
        assert!(startup_problem(&s).unwrap().contains("all disabled"));
        s.ble_enabled = true;
        assert_eq!(startup_problem(&s), None, "BLE alone needs no hotspot");
        s.ble_enabled = false;
        s.dpp_enabled = true;
        assert_eq!(
            startup_problem(&s),
            None,
            "DPP alone needs no hotspot password"
        );
        s.hotspot_enabled = true;
        s.hotspot_password = "k3Jq8vLw2pXz".into();
        assert_eq!(startup_problem(&s), None);
    }
}
