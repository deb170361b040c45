//! A poll's round: the status it reports, plain or held (`Connection` runs it), and what
//! its answer does: the config (from the app, or a management directory's, when this
//! device may take it), the commands, the subsystems the config drives.
use super::connection::PollResult;
use super::{cache, medium, status, unix_now, Agent, Exit, DEFAULT_POLL};
use crate::protocol::{self, CommandKind, PollOutcome};
use crate::{debug, error, info, warn};
use serde_json::Value;
use std::time::Duration;

impl Agent {
    /// Starts a held poll on its own thread when the app holds polls (`Connection`).
    pub(super) fn start_held_poll(&mut self) -> bool {
        if !self.conn.holds(self.cached.etag.as_deref()) {
            return false;
        }
        let sent = self.status_without_uptimes();
        let status = serde_json::to_value(self.status()).unwrap_or(Value::Null);
        let etag = self.cached.etag.clone();
        self.arm_budget();
        self.conn.start_held(etag.as_deref(), sent, || status)
    }

    /// Takes the answer of the held poll, when it has come.
    pub(super) fn take_held_answer(&mut self) {
        if let Some((result, sent)) = self.conn.take_held() {
            self.on_poll_result(result, sent);
        }
    }

    /// While a poll is held, a change of the status (svc-server stopped, a config error, a
    /// command done) is reported by a plain poll at once, at most one a `DEFAULT_POLL`.
    pub(super) fn report_status_change(&mut self) {
        if !self.conn.holding() {
            return;
        }
        let now = self.status_without_uptimes();
        if self.conn.status_changed(now, DEFAULT_POLL) {
            debug!(
                "agent",
                "the status changed during a held poll: reporting it"
            );
            self.poll_once();
        }
    }

    /// A poll may download (hawkBit's `.swu` images): under the config's byte budget as
    /// every download is.
    fn arm_budget(&mut self) {
        let budget = self
            .config
            .as_ref()
            .and_then(|c| c.agent.agent.updates.budget);
        self.conn.set_budget(budget);
    }

    /// Polls once; true on contact (an answer or 304).
    pub(super) fn poll_once(&mut self) -> bool {
        let status = serde_json::to_value(self.status()).unwrap_or(Value::Null);
        let sent = self.status_without_uptimes();
        let etag = self.cached.etag.clone();
        self.arm_budget();
        match self.conn.poll(&status, etag.as_deref()) {
            Some(result) => self.on_poll_result(result, sent),
            None => false,
        }
    }

    /// What a poll's answer does, plain or held; true on contact. `sent`: the status it
    /// reported.
    fn on_poll_result(&mut self, result: PollResult, sent: status::StatusReport) -> bool {
        if let (super::Backend::Hawkbit(_), Some(o)) = (self.conn.backend(), &mut self.observed) {
            // hawkBit's poll may have asked for consent: the report shows it at once.
            o.consent = crate::hawkbit::consent::load(&self.paths);
        }
        let reachable = result.is_ok();
        self.provisioning
            .app_reachable
            .store(reachable, std::sync::atomic::Ordering::SeqCst);
        match result {
            Ok((outcome, holds)) => {
                if self.conn.contact(holds, sent) {
                    info!("agent", "the server is reachable again");
                    self.events.reconnected = true;
                }
                self.events.polled = true;
                self.cached.last_contact = Some(unix_now());
                if let PollOutcome::Changed { answer, etag } = outcome {
                    self.apply_answer(*answer, etag);
                }
                let interval = self
                    .cached
                    .poll_interval_secs
                    .map(Duration::from_secs)
                    .unwrap_or(DEFAULT_POLL);
                self.conn.schedule_after_contact(interval);
                true
            }
            Err(e) => {
                self.conn.failed(&e);
                false
            }
        }
    }

    fn apply_answer(&mut self, answer: protocol::PollAnswer, etag: Option<String>) {
        let config = match answer.medium_config {
            Some(offered) => self.config_from_medium(offered),
            None => answer.config,
        };
        if let Some(raw) = config {
            self.apply_config(raw);
        }
        self.cached.etag = etag;
        self.cached.targets = answer.targets;
        self.cached.hold = answer.hold;
        self.cached.poll_interval_secs = answer.poll_interval_secs;
        for c in &answer.commands {
            if self.cached.done_commands.contains(&c.id) {
                continue;
            }
            match c.kind {
                CommandKind::RestartSvcServer => self.restart_server_requested = true,
                CommandKind::RestartAgent => {
                    info!("agent", "restarting the agent as the management app asked");
                    self.exit = Some(Exit::Restart);
                }
                CommandKind::Unknown => {
                    warn!("agent", "ignoring command {} of an unknown kind", c.id)
                }
            }
            self.cached.done_commands.push(c.id.clone());
        }
        // Ids the app no longer sends are acknowledged; forget them.
        let live: Vec<&str> = answer.commands.iter().map(|c| c.id.as_str()).collect();
        self.cached
            .done_commands
            .retain(|id| live.contains(&id.as_str()));
        if let Err(e) = cache::save_answer(&self.paths, &self.cached) {
            warn!("agent", "cannot save the answer cache: {e}");
        }
    }

    /// The config a management directory offers, when this device may take it
    /// (`medium::accept`); a refusal is reported like a rejected config and the last good
    /// one stays.
    fn config_from_medium(&mut self, offered: protocol::MediumConfig) -> Option<Value> {
        let dir = self
            .conn
            .credentials()
            .and_then(|c| c.app_address.strip_prefix("file://"))
            .unwrap_or_default()
            .to_string();
        match medium::accept(&self.paths, std::path::Path::new(&dir), offered) {
            Ok(config) => config,
            Err(refusal) => {
                error!(
                    "config",
                    "config refused, keeping the last good one: {refusal}"
                );
                self.config_errors = vec![refusal];
                None
            }
        }
    }

    fn apply_config(&mut self, raw: Value) {
        match crate::config::parse_value(&raw) {
            Ok((cfg, report)) => {
                for w in &report.warnings {
                    warn!("config", "{w}");
                }
                if self.config.as_ref() == Some(&cfg) {
                    return;
                }
                if let Err(e) = cache::save_config(&self.paths, &raw) {
                    error!(
                        "config",
                        "cannot save the new config, keeping the old one: {e}"
                    );
                    return;
                }
                info!(
                    "config",
                    "config applied: {} components, {} modules",
                    cfg.components.len(),
                    cfg.modules.len()
                );
                let was_managed = self.server_managed();
                self.config = Some(cfg);
                // svc-server and the backend may change: the next report reads them again.
                self.observed = None;
                self.config_errors.clear();
                self.choose_backend();
                self.apply_syscfg();
                // A config from a poll was fetched online: its networks may be applied.
                self.apply_provisioning(true);
                match (was_managed, self.server_managed()) {
                    (true, false) => {
                        info!(
                            "svc-server",
                            "svc-server management disabled by config: stopping it"
                        );
                        self.server.stop();
                    }
                    (false, true) => self.server.start(),
                    _ => self.server.reload(),
                }
            }
            Err(report) => {
                error!(
                    "config",
                    "config rejected, keeping the last good one: {} errors",
                    report.errors.len()
                );
                for e in &report.errors {
                    error!("config", "{e}");
                }
                self.config_errors = report.errors;
            }
        }
    }

    /// agent-syscfg: applies the config's system settings (or reverts them when disabled);
    /// idempotent, so it runs at start and on every config change.
    pub(super) fn apply_syscfg(&mut self) {
        let section = self
            .config
            .as_ref()
            .map(|c| c.agent.syscfg.clone())
            .unwrap_or_default();
        let status = crate::syscfg::run(&section, &self.paths);
        self.subsystems.insert(
            "agent-syscfg".into(),
            serde_json::to_value(&status).unwrap_or(Value::Null),
        );
    }

    /// agent-provisioning: started, re-configured or stopped as the config says.
    pub(super) fn apply_provisioning(&mut self, fetched_online: bool) {
        let section = self
            .config
            .as_ref()
            .map(|c| c.agent.provisioning.clone())
            .unwrap_or_default();
        let status = self
            .provisioning
            .apply(&self.paths, &section, fetched_online);
        self.subsystems.insert("agent-provisioning".into(), status);
    }
}
