//! journald limits: one drop-in the agent owns.
//!
//! journald reads `journald.conf`, then the `*.conf` drop-ins of `/etc`, `/run` and `/usr/lib`
//! `systemd/journald.conf.d/` sorted by file name, later ones overriding earlier ones. `60-`
//! sits after the distribution's and packages' low numbers and leaves `90-`/`99-` for an
//! administrator who wants the last word.
use crate::config::model::LoggingSettings;

/// Device path of the drop-in.
pub const DROPIN: &str = "/etc/systemd/journald.conf.d/60-svc-agent.conf";

/// The drop-in text for these settings, or `None` when the agent should impose nothing
/// (`logging.disable`, or neither size set): then the drop-in is removed.
pub(crate) fn render(l: &LoggingSettings) -> Option<String> {
    if l.disable || (l.system_max_use.is_none() && l.runtime_max_use.is_none()) {
        return None;
    }
    // Fixed order, only the keys that are set: the same config always gives the same bytes.
    let mut s = String::from(
        "# Managed by svc-agent (agent-syscfg attributes.logging): the agent writes and removes\n\
         # this file, and overwrites local edits. Put local settings in a file sorting after it.\n\
         [Journal]\n",
    );
    if let Some(v) = &l.system_max_use {
        s.push_str(&format!("SystemMaxUse={v}\n"));
    }
    if let Some(v) = &l.runtime_max_use {
        s.push_str(&format!("RuntimeMaxUse={v}\n"));
    }
    Some(s)
}

/// The command that makes journald read its configuration again. systemd 252's journald has
/// no reload: its unit has no `ExecReload=` (CanReload=no), and the daemon does not handle
/// SIGHUP (not in its caught or blocked signal sets), so SIGHUP would just kill it. A restart
/// is safe: journald keeps its sockets in systemd's file-descriptor store and the stdout
/// streams of services survive it; entries already written stay in the journal files.
pub(crate) const RESTART_ARGV: [&str; 3] = ["systemctl", "restart", "systemd-journald.service"];
