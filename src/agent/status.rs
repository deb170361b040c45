//! The status report: what the agent tells the app at each poll and prints for
//! `svc-agent status`. Also written to `/opt/svc/status.json` for the local tools.
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ServerStatus {
    pub version: Option<String>,
    pub installed: bool,
    pub running: bool,
    pub state: String,
    pub pid: Option<u32>,
    pub uptime_secs: Option<u64>,
    /// Unix time svc-server last started (the status file keeps this, not the uptime).
    pub started_at: Option<u64>,
    pub restarts: u64,
    pub managed: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct AgentStatus {
    pub version: String,
    pub target: String,
    pub pid: u32,
    pub uptime_secs: u64,
    /// Unix time the agent started.
    pub started_at: u64,
    pub fast_start: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct HostInfo {
    pub os: String,
    pub distro: String,
    pub arch: String,
    pub kernel: String,
    pub hostname: String,
}

impl HostInfo {
    pub(crate) fn detect(paths: &crate::paths::Paths) -> HostInfo {
        let os_release = std::fs::read_to_string(paths.device("/etc/os-release"))
            .or_else(|_| std::fs::read_to_string("/etc/os-release"))
            .unwrap_or_default();
        let distro = os_release
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default();
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        HostInfo {
            os: std::env::consts::OS.into(),
            distro,
            arch: std::env::consts::ARCH.into(),
            kernel: read("/proc/sys/kernel/osrelease"),
            hostname: read("/proc/sys/kernel/hostname"),
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct StatusReport {
    pub agent: AgentStatus,
    pub svc_server: ServerStatus,
    pub host: HostInfo,
    /// Why the last config from the app was rejected (JSON pointers), if it was.
    pub config_errors: Vec<crate::config::Diagnostic>,
    pub done_commands: Vec<String>,
    /// Unix time of the last successful contact with the app.
    pub last_contact: Option<u64>,
    /// The last error talking to the app, if the last poll failed.
    pub last_error: Option<String>,
    pub subsystems: serde_json::Map<String, serde_json::Value>,
    /// Per binary: current, previous and target versions, and the versions rolled back as
    /// bad (an svc-server that failed probation, an agent the boot guard rolled back).
    #[serde(default)]
    pub versions: crate::update::VersionRecords,
    /// The OS image (booted slot, version, previous, offered, bad), once OS images are in play.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<crate::osimage::OsStatus>,
    /// The byte budget's limits and the downloads it holds (and until when), when it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::update::budget::BudgetStatus>,
}

pub(crate) fn path(paths: &crate::paths::Paths) -> std::path::PathBuf {
    paths.state_dir().join("status.json")
}

/// What the report shows from outside the agent's memory: the version records (with every
/// kind's state, which the update steps use too), svc-server's handle (its link, its
/// process), and on the hawkBit backend the action waiting for consent. Read once per loop
/// pass, and again only after the pass changed one of them; the report is a view over it.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub versions: crate::update::Snapshot,
    pub server: ServerStatus,
    pub consent: Option<crate::hawkbit::consent::Consent>,
}

/// The hawkBit backend's entry among the subsystems: its server, and an action waiting
/// for consent (what `svc-agent hawkbit confirm|decline` decides on).
pub(crate) fn hawkbit_entry(
    h: &crate::config::model::HawkbitSettings,
    consent: Option<&crate::hawkbit::consent::Consent>,
) -> serde_json::Value {
    let (state, reason) = match consent {
        Some(c) if c.decision.is_none() => (
            "waiting for consent",
            Some(format!(
                "action {} would install {}: svc-agent hawkbit confirm|decline --action {0}",
                c.action,
                c.targets
                    .iter()
                    .map(|(n, v)| format!("{n} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ),
        _ => ("active", None),
    };
    serde_json::json!({
        "state": state,
        "reason": reason,
        "server_url": h.server_url,
        "controller_id": h.controller_id,
        "consent": consent,
    })
}
