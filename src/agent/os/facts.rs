//! What the loop gathers for one step of the OS track.
use crate::agent::updates::Clock;
use crate::config::model::MaintenanceWindow;
use crate::osimage::{GatePolicy, Provenance};
use crate::protocol::OsTarget;
use crate::update::DownloadOptions;

/// The facts of one step, read by the loop.
pub(crate) struct Facts<'a> {
    pub offered: Option<&'a OsTarget>,
    /// The health gate's policy (`agent::tuning`, read once at start).
    pub gate: GatePolicy,
    pub window: Option<&'a MaintenanceWindow>,
    pub clock: Clock,
    pub unix_now: u64,
    pub server_busy: bool,
    /// The update server's hold on activations (hawkBit: `update: skip`, its window), why.
    pub update_server_hold: Option<&'a str>,
    pub server_required: bool,
    pub server_up_secs: Option<u64>,
    pub server_crashes: u64,
    pub last_contact: Option<u64>,
    /// Where downloads come from: `file_root` for a `file://` app; relative URLs resolved.
    pub download: DownloadOptions,
    /// The app's address: the URLs it may hand out follow the binaries' rule
    /// (`updater::check_artifact_url`).
    pub app_address: Option<&'a str>,
    /// The machine's identity for downloads from the app's own origin (an https app).
    pub identity: Option<crate::http::Identity>,
    /// agent-syscfg's `upgrades.type`.
    pub upgrades: Option<crate::config::model::UpgradeType>,
    /// The backend the offer came from: what vouches for the bundle before RAUC does.
    pub from: Provenance,
}

impl crate::agent::Agent {
    /// One step of the OS update, with the loop's facts.
    pub(in crate::agent) fn step_os(&mut self) {
        if self.os.at_rest(self.cached.targets.os.is_some()) {
            return;
        }
        let offered = self.cached.targets.os.as_ref().map(|o| {
            let mut o = o.clone();
            o.target.url = self.conn.resolve_url(&o.target.url);
            o
        });
        // hawkBit's offers come from its server, downloaded with its token (to its origin
        // only), as the binaries are; the app's from the app.
        let (app, identity, from) = match self.conn.hawkbit_origin() {
            Some((server, id)) => (Some(server.as_str()), Some(id.clone()), Provenance::Hawkbit),
            None => (
                self.conn.credentials().map(|c| c.app_address.as_str()),
                self.conn.credentials().and_then(|c| c.download_identity()),
                Provenance::App,
            ),
        };
        let download = DownloadOptions {
            file_root: app
                .and_then(|a| a.strip_prefix("file://"))
                .map(std::path::PathBuf::from),
            // The byte budget holds an OS bundle as it holds a binary (no OS pin exists).
            budget: crate::agent::budget_gate(&self.paths, self.config.as_ref()),
            ..DownloadOptions::default()
        };
        let server = self.server.status(self.server_managed());
        let facts = Facts {
            offered: offered.as_ref(),
            gate: self.tuning.os_gate,
            window: self
                .config
                .as_ref()
                .and_then(|c| c.agent.server.attributes.maintenance_window.as_ref()),
            clock: Clock::read(),
            unix_now: crate::agent::unix_now(),
            server_busy: self.server.busy(),
            update_server_hold: self.cached.hold.as_deref(),
            server_required: server.managed && server.installed,
            server_up_secs: server.running.then_some(server.uptime_secs).flatten(),
            server_crashes: self.server.crashes(),
            last_contact: self.cached.last_contact,
            download,
            app_address: app,
            identity,
            upgrades: self
                .config
                .as_ref()
                .filter(|c| !c.agent.syscfg.disable_subsystem)
                .and_then(|c| c.agent.syscfg.attributes.upgrades.upgrade_type),
            from,
        };
        self.os.step(&self.paths, facts);
        if let Some(w) = self
            .os
            .gate_poll_within(self.tuning.os_gate, self.cached.last_contact)
        {
            self.conn.poll_within(w);
        }
    }
}
