//! The typed machine config (spec §2). Built only by `validate::parse`, which has already
//! checked every rule, so the fields here hold values that are known to be well formed.
//! Unknown keys are kept in `extra` so that a config round-trips without loss.
use super::version::Selector;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use std::fmt;

/// A whole machine config: `components`, `modules`, `agent`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct MachineConfig {
    pub components: Vec<Component>,
    pub modules: Vec<Module>,
    pub agent: AgentConfig,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl MachineConfig {
    pub(crate) fn module(&self, name: &str) -> Option<&Module> {
        self.modules.iter().find(|m| m.name == name)
    }
}

/// A modular resource (spec §2.1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Component {
    pub name: String,
    pub model: String,
    #[serde(rename = "type")]
    pub api_type: String,
    pub namespace: String,
    /// The model's attributes, kept as their JSON text: opaque to the agent, passed on.
    pub attributes: RawJson,
    pub depends_on: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A JSON value kept as text (an object of attributes, say), compared by its text.
#[derive(Debug, Clone)]
pub struct RawJson(pub Box<serde_json::value::RawValue>);

impl RawJson {
    pub(crate) fn empty_object() -> RawJson {
        match serde_json::value::RawValue::from_string("{}".to_string()) {
            Ok(raw) => RawJson(raw),
            Err(_) => unreachable!("an empty object is valid JSON"),
        }
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Component {
    /// `<namespace>:<module-name>`, the module id part of the model triplet.
    pub(crate) fn module_id(&self) -> &str {
        match self.model.rfind(':') {
            Some(i) => &self.model[..i],
            None => &self.model,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleType {
    Registry,
    Local,
}

/// A module (spec §2.2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Module {
    #[serde(rename = "type")]
    pub module_type: ModuleType,
    pub name: String,
    pub module_id: String,
    /// The version selector; `None` only for a local module, which has no registry version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<Selector>,
    /// Environment entries in config order; values may hold `${environment.X}`.
    #[serde(serialize_with = "ser_pairs")]
    pub env: Vec<(String, String)>,
    /// The program of a `local` module.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executable_path: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn ser_pairs<S: Serializer>(pairs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(pairs.len()))?;
    for (k, v) in pairs {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

/// The `agent` object with all four subsystems, defaults filled in (the effective form).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct AgentConfig {
    #[serde(rename = "svc-agent")]
    pub agent: AgentSection,
    #[serde(rename = "svc-server")]
    pub server: ServerSection,
    #[serde(rename = "agent-provisioning")]
    pub provisioning: ProvisioningSection,
    #[serde(rename = "agent-syscfg")]
    pub syscfg: SyscfgSection,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// How a binary's version is chosen. `pin_url` beats `pin_version` beats the channel.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct VersionControl {
    pub release_channel: String,
    pub pin_version: String,
    pub pin_url: String,
}

/// What the version control asks for, in precedence order (spec §2.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionChoice<'a> {
    Url(&'a str),
    Version(&'a str),
    Channel(&'a str),
}

impl VersionControl {
    pub fn choice(&self) -> VersionChoice<'_> {
        if !self.pin_url.is_empty() {
            VersionChoice::Url(&self.pin_url)
        } else if !self.pin_version.is_empty() {
            VersionChoice::Version(&self.pin_version)
        } else {
            VersionChoice::Channel(&self.release_channel)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentSection {
    #[serde(flatten)]
    pub version: VersionControl,
    /// The Eclipse hawkBit backend (docs/hawkbit.md); `None`: updates come from the
    /// management app alone.
    pub hawkbit: Option<HawkbitSettings>,
    /// What the agent ships to the management app's LOGS tab, and when (docs/logs.md).
    pub logs: LogSettings,
    /// How the binaries' updates are obtained (docs/updates.md, *Deltas*).
    pub updates: UpdateSettings,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `svc-agent.updates`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpdateSettings {
    /// When an offer's deltas cannot be used: `full` downloads the full artifact (logged,
    /// and in the status with why), `never` downloads nothing.
    /// `budget` downloads the full artifact only within the byte budget.
    pub delta_fallback: String,
    /// The byte budget per UTC day and month; `None`: off (the default).
    pub budget: Option<BudgetSettings>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for UpdateSettings {
    fn default() -> Self {
        UpdateSettings {
            delta_fallback: "full".into(),
            budget: None,
            extra: Map::new(),
        }
    }
}

/// `svc-agent.updates.budget`: at least one of the two (docs/updates.md, *The byte budget*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BudgetSettings {
    pub day_bytes: Option<u64>,
    pub month_bytes: Option<u64>,
}

/// `svc-agent.logs`: the shipping policy. Levels are `error`, `warn`, `info`, `debug`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogSettings {
    /// The least severe level shipped (and queued); `debug` ships everything.
    pub level: String,
    /// Lines at least this severe go within seconds; the others ride the next poll cycle.
    pub urgent_level: String,
    /// The longest a line waits for a poll cycle, in seconds; 0: every line at once.
    pub max_wait_secs: u64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            level: "info".into(),
            urgent_level: "error".into(),
            max_wait_secs: 1800,
            extra: Map::new(),
        }
    }
}

/// Where and as whom the agent speaks hawkBit's DDI API. The token is not here: it is a
/// secret, kept in its own 0600 file beside the credentials (`Paths::hawkbit_token`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HawkbitSettings {
    /// `https://host[:port][/prefix]` (or `http://` written so), without a trailing `/`.
    pub server_url: String,
    pub tenant: String,
    pub controller_id: String,
    pub auth: HawkbitAuth,
    /// Consent (`confirmationBase`) is given without asking anyone; `false` (the default):
    /// an action the server sends for confirmation waits for `svc-agent hawkbit confirm`.
    pub auto_confirm: bool,
    /// The board this machine tells the server (`configData` `hw_boardname`), by which
    /// gooseBit assigns images: `None` (the default) sends the architecture, which
    /// `svc-release swu` images name; a RAUC machine on gooseBit names its RAUC `compatible`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub board: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The DDI authentication scheme the token file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HawkbitAuth {
    /// `Authorization: TargetToken <token>`: one token per device.
    TargetToken,
    /// `Authorization: GatewayToken <token>`: one token per tenant.
    GatewayToken,
}

impl HawkbitAuth {
    /// The scheme word of the `Authorization` header.
    pub(crate) fn scheme(self) -> &'static str {
        match self {
            HawkbitAuth::TargetToken => "TargetToken",
            HawkbitAuth::GatewayToken => "GatewayToken",
        }
    }
}

impl Default for AgentSection {
    fn default() -> Self {
        AgentSection {
            version: VersionControl {
                release_channel: "stable".into(),
                ..Default::default()
            },
            hawkbit: None,
            logs: LogSettings::default(),
            updates: UpdateSettings::default(),
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSection {
    #[serde(flatten)]
    pub version: VersionControl,
    pub disable_subsystem: bool,
    pub attributes: ServerAttributes,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            version: VersionControl {
                release_channel: "stable".into(),
                ..Default::default()
            },
            disable_subsystem: false,
            attributes: ServerAttributes::default(),
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ServerAttributes {
    pub fast_start: bool,
    /// When svc-server may be restarted for an update; `None`: at once (spec §3).
    pub maintenance_window: Option<MaintenanceWindow>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Days of the week and a local-time range; `end` before `start` crosses midnight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MaintenanceWindow {
    /// Allowed days, 0 = Monday .. 6 = Sunday; all days when the config names none.
    #[serde(serialize_with = "ser_days")]
    pub days: Vec<u8>,
    #[serde(serialize_with = "ser_hhmm")]
    pub start: u16,
    #[serde(serialize_with = "ser_hhmm")]
    pub end: u16,
}

pub(crate) const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

fn ser_days<S: Serializer>(days: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(days.iter().map(|d| DAY_NAMES[*d as usize % 7]))
}

fn ser_hhmm<S: Serializer>(minutes: &u16, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{:02}:{:02}", minutes / 60, minutes % 60))
}

impl MaintenanceWindow {
    /// Whether local time (`weekday` 0 = Monday, `minute` of the day) is inside the window.
    /// A window crossing midnight belongs to the day it starts on; `end == start` is the
    /// whole day from `start` (24 hours, so crossing midnight too).
    pub(crate) fn allows(&self, weekday: u8, minute: u16) -> bool {
        let day_ok = |d: u8| self.days.contains(&d);
        if self.start < self.end {
            day_ok(weekday) && minute >= self.start && minute < self.end
        } else {
            (day_ok(weekday) && minute >= self.start)
                || (day_ok((weekday + 6) % 7) && minute < self.end)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ProvisioningSection {
    pub disable_subsystem: bool,
    pub networks: Vec<Network>,
    pub attributes: ProvisioningAttributes,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Attributes that override the manufacturer defaults (`/etc/svc-defaults.json`).
/// `None` means "not set here": the manufacturer default applies.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ProvisioningAttributes {
    pub hotspot_password: Option<String>,
    pub roaming_mode: Option<bool>,
    pub networks: Option<Vec<Network>>,
    pub hotspot_prefix: Option<String>,
    pub offline_timeout_secs: Option<u64>,
    pub user_idle_timeout_secs: Option<u64>,
    pub retry_networks_secs: Option<u64>,
    pub check_url: Option<String>,
    pub manufacturer: Option<String>,
    pub model: Option<String>,
    /// The hotspot and portal (default on); off leaves DPP (and known networks) alone.
    pub hotspot_enabled: Option<bool>,
    /// The Wi-Fi Easy Connect (DPP) enrollee (default off).
    pub dpp_enabled: Option<bool>,
    /// Improv Wi-Fi over BLE through BlueZ (default off); independent of the hotspot.
    pub ble_enabled: Option<bool>,
    /// The key that authorizes an Improv connection (#45; the manufacturer's defaults file
    /// names it): an input device and a key code.
    pub improv_button: Option<ImprovButton>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An input device's key (`/dev/input/eventN`, Linux key codes as in
/// `linux/input-event-codes.h`). `device` is a path under `/dev/input/` (a `by-path` or
/// `by-id` link is stable across boots), or `name` the device's name (as in
/// `/sys/class/input/eventN/device/name`, e.g. `gpio-keys`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImprovButton {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub key: u16,
}

/// A Wi-Fi network entry. `psk` is a secret: never printed by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct Network {
    #[serde(rename = "type")]
    pub net_type: String,
    pub ssid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psk: Option<String>,
    pub priority: i32,
    /// The access point does not broadcast its SSID: NetworkManager must probe for it by
    /// name (`802-11-wireless.hidden`), or it never joins nor rejoins it. An extension of
    /// the spec's network entry; default false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    /// WPA2/WPA3-Enterprise (802.1X) in place of `psk`: an extension of the spec's entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eap: Option<Eap>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The 802.1X method of an enterprise network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EapMethod {
    /// EAP-TLS: a client certificate and key.
    Tls,
    /// PEAP with an inner method (MSCHAPv2 by default): identity and password.
    Peap,
    /// EAP-TTLS with an inner method (MSCHAPv2 by default): identity and password.
    Ttls,
}

impl EapMethod {
    /// NetworkManager's name (`802-1x.eap`).
    pub(crate) fn nm_name(self) -> &'static str {
        match self {
            EapMethod::Tls => "tls",
            EapMethod::Peap => "peap",
            EapMethod::Ttls => "ttls",
        }
    }
}

/// 802.1X settings (docs/config.md, "Enterprise Wi-Fi"). `password`, `private_key` and
/// `private_key_password` are secrets: never printed by `Debug`. Certificates and the key
/// are PEM text; the agent writes them to files of its own (0600) for NetworkManager.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct Eap {
    pub method: EapMethod,
    pub identity: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anonymous_identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// The inner method of PEAP and TTLS (`mschapv2` when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase2: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<String>,
    /// The server certificate's name must end in this domain (checked against the CA
    /// certificate, or the system's CAs without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key_password: Option<String>,
}

impl fmt::Debug for Eap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = |v: &Option<String>| v.as_ref().map(|_| "***");
        f.debug_struct("Eap")
            .field("method", &self.method)
            .field("identity", &self.identity)
            .field("password", &secret(&self.password))
            .field("phase2", &self.phase2)
            .field("ca_cert", &self.ca_cert.is_some())
            .field("domain", &self.domain)
            .field("client_cert", &self.client_cert.is_some())
            .field("private_key", &secret(&self.private_key))
            .finish()
    }
}

impl fmt::Debug for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Network")
            .field("type", &self.net_type)
            .field("ssid", &self.ssid)
            .field("psk", &self.psk.as_ref().map(|_| "***"))
            .field("priority", &self.priority)
            .field("hidden", &self.hidden)
            .field("eap", &self.eap)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SyscfgSection {
    pub disable_subsystem: bool,
    pub attributes: SyscfgAttributes,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SyscfgAttributes {
    pub logging: LoggingSettings,
    pub upgrades: UpgradeSettings,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LoggingSettings {
    pub disable: bool,
    /// journald `SystemMaxUse=`; `None` leaves journald's own default.
    pub system_max_use: Option<String>,
    /// journald `RuntimeMaxUse=`.
    pub runtime_max_use: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct UpgradeSettings {
    /// `None`: the agent leaves the OS's upgrade settings alone.
    #[serde(rename = "type")]
    pub upgrade_type: Option<UpgradeType>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `upgrades.type`: `all` (spec), plus `security` and `none` (ours, see docs/config.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UpgradeType {
    All,
    Security,
    None,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_within_a_day_and_across_midnight() {
        let w = MaintenanceWindow {
            days: vec![0],
            start: 120,
            end: 240,
        };
        assert!(w.allows(0, 120));
        assert!(!w.allows(0, 240));
        assert!(!w.allows(1, 150));
        let night = MaintenanceWindow {
            days: vec![4],
            start: 23 * 60,
            end: 60,
        };
        assert!(night.allows(4, 23 * 60 + 30));
        assert!(night.allows(5, 30), "Friday's window runs into Saturday");
        assert!(
            !night.allows(4, 30),
            "Thursday night is not in Friday's window"
        );
    }

    #[test]
    fn window_with_end_equal_to_start_is_the_whole_day_from_start() {
        let w = MaintenanceWindow {
            days: vec![5],
            start: 180,
            end: 180,
        };
        assert!(w.allows(5, 180) && w.allows(5, 23 * 60 + 59));
        assert!(w.allows(6, 179), "runs into Sunday until 03:00");
        assert!(!w.allows(6, 180) && !w.allows(5, 179));
    }

    #[test]
    fn pin_url_beats_pin_version_beats_channel() {
        let mut v = VersionControl {
            release_channel: "stable".into(),
            pin_version: "1.2.3".into(),
            pin_url: "https://x/y".into(),
        };
        assert_eq!(v.choice(), VersionChoice::Url("https://x/y"));
        v.pin_url.clear();
        assert_eq!(v.choice(), VersionChoice::Version("1.2.3"));
        v.pin_version.clear();
        assert_eq!(v.choice(), VersionChoice::Channel("stable"));
    }

    #[test]
    fn network_debug_hides_psk() {
        let n = Network {
            net_type: "wifi".into(),
            ssid: "home".into(),
            psk: Some("supersecret".into()),
            priority: 0,
            hidden: false,
            eap: None,
            extra: Map::new(),
        };
        assert!(!format!("{n:?}").contains("supersecret"));
    }
}
