//! svc-server under the agent: its command line and environment. Supervision itself (process group, backoff, TERM→KILL) is
//! `crate::supervisor`'s.
use crate::paths::Paths;
use crate::supervisor::{ChildSpec, Env, Supervisor};
use std::time::{Duration, Instant};

/// How long svc-server gets between SIGTERM and SIGKILL; the unit's TimeoutStopSec is
/// longer so that the agent's clean stop always finishes first.
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// svc-server's process and what the agent knows of it.
pub(crate) struct ServerManager {
    paths: Paths,
    sup: Option<Supervisor>,
    /// A monotonic instant and the Unix time it stands for.
    origin: (Instant, u64),
    /// Crash restarts of earlier supervisors (a restart replaces the supervisor).
    restarts_before: u64,
    /// Crashes seen by earlier supervisors.
    crashes_before: u64,
    /// The module registry svc-server is told about (`SVC_REGISTRY`).
    registry: Option<String>,
}

impl ServerManager {
    pub(crate) fn new(paths: &Paths) -> ServerManager {
        ServerManager {
            paths: paths.clone(),
            sup: None,
            origin: (Instant::now(), super::unix_now()),
            restarts_before: 0,
            crashes_before: 0,
            registry: None,
        }
    }

    /// The module registry of the management app at `app_address` (`<app>/registry`,
    /// docs/registry.md); an `SVC_REGISTRY` in the agent's own environment (a systemd
    /// drop-in of the OEM) wins.
    /// On a device with a vendor key a `file://` directory (a USB stick) offers no registry:
    /// its index and the sha256s in it would come from the same unsigned medium (issue 40;
    /// docs/releases.md, *What a stick can change*).
    pub(crate) fn with_app(mut self, app_address: Option<&str>) -> ServerManager {
        let keyed = crate::update::verify::vendor_key_present(&self.paths);
        self.registry = std::env::var("SVC_REGISTRY")
            .ok()
            .filter(|r| !r.is_empty())
            .or_else(|| {
                let app = app_address?;
                if keyed && app.starts_with("file://") {
                    crate::info!(
                        "svc-server",
                        "no module registry from {app}: this device has a vendor key and a directory's registry modules are not signed"
                    );
                    return None;
                }
                Some(registry_of(app))
            });
        self
    }

    /// svc-server's `SVC_HOME` under the agent.
    fn svc_home(&self) -> std::path::PathBuf {
        self.paths.state_dir().join("home")
    }

    /// The command line every svc-server build gets: the config file and `SVC_HOME`.
    fn spec(&self) -> ChildSpec {
        let config = super::cache::config_path(&self.paths);
        let home = self.svc_home();
        // This process's environment with changes (std copies it once, at the spawn): without
        // systemd's notify socket and watchdog (they are the agent's), and with svc-server's
        // own variables set. Only the names are read here.
        let mut remove: Vec<std::ffi::OsString> = std::env::vars_os()
            .map(|(k, _)| k)
            .filter(|k| {
                let k = k.as_encoded_bytes();
                k.starts_with(b"NOTIFY_SOCKET") || k.starts_with(b"WATCHDOG_")
            })
            .collect();
        let mut set = Vec::with_capacity(4);
        match &self.registry {
            Some(r) => set.push(("SVC_REGISTRY".into(), r.clone())),
            None => remove.push("SVC_REGISTRY".into()),
        }
        set.push(("SVC_HOME".into(), home.display().to_string()));
        set.push(("SVC_CONFIG_FILE".into(), config.display().to_string()));
        // Our svc-server then writes `<N>` priorities, which keep their level in our log.
        set.push(("SVC_LOG_PRIORITY_PREFIX".into(), "1".into()));
        ChildSpec {
            name: "svc-server".into(),
            program: self.paths.bin_link("svc-server"),
            args: vec!["--config".into(), config.display().to_string()],
            cwd: home,
            env: Env::Inherit { remove, set },
        }
    }

    /// The active version, from the link's target `../cache/svc-server-<version>`.
    pub(crate) fn installed_version(&self) -> Option<String> {
        let target = std::fs::read_link(self.paths.bin_link("svc-server")).ok()?;
        let name = target.file_name()?.to_str()?;
        name.strip_prefix("svc-server-").map(str::to_string)
    }

    /// Whether svc-server is processing a config change right now: it holds
    /// `$SVC_HOME/state/busy` (its pid inside) while it does (docs/server.md). A file left
    /// by a dead process does not count.
    pub(crate) fn busy(&self) -> bool {
        crate::server::gate::is_busy(&crate::server::gate::busy_path(&self.svc_home()))
    }

    pub(crate) fn installed(&self) -> bool {
        self.paths.bin_link("svc-server").exists()
    }

    pub(crate) fn start(&mut self) {
        if !self.installed() {
            crate::warn!(
                "svc-server",
                "svc-server is not installed yet ({} missing); waiting for an update",
                self.paths.bin_link("svc-server").display()
            );
            return;
        }
        let spec = self.spec();
        // One `stat` when it exists (nearly always); create_dir_all tries a mkdir first.
        if !spec.cwd.is_dir() {
            let _ = std::fs::create_dir_all(&spec.cwd);
        }
        let mut sup = Supervisor::new(spec);
        let _ = sup.start();
        self.sup = Some(sup);
    }

    pub(crate) fn tick(&mut self) {
        if let Some(s) = self.sup.as_mut() {
            let _ = s.tick(Instant::now());
        }
    }

    /// When the supervisor next needs a tick (a restart after backoff); an exit of the
    /// running child wakes the loop through SIGCHLD instead.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        match self.sup.as_ref()?.state() {
            crate::supervisor::ChildState::Backoff { until }
            | crate::supervisor::ChildState::CrashLoop { until } => Some(until),
            _ => None,
        }
    }

    pub(crate) fn stop(&mut self) {
        if let Some(mut s) = self.sup.take() {
            s.stop(STOP_TIMEOUT);
            self.restarts_before += s.restarts();
            self.crashes_before += s.crashes();
        }
    }

    pub(crate) fn restart(&mut self) {
        self.stop();
        self.start();
    }

    /// A new config: svc-server re-reads it on SIGHUP.
    pub(crate) fn reload(&mut self) {
        if let Some(s) = self.sup.as_ref() {
            s.signal(libc::SIGHUP);
        }
    }

    /// Crashes of svc-server since the agent started, counted as they happen (before the
    /// supervisor restarts it), so that probation judges a build before its next start.
    pub(crate) fn crashes(&self) -> u64 {
        self.crashes_before + self.sup.as_ref().map_or(0, |s| s.crashes())
    }

    /// How long svc-server has run, now.
    pub(crate) fn uptime_secs(&self) -> Option<u64> {
        self.sup
            .as_ref()
            .and_then(|s| s.uptime())
            .map(|d| d.as_secs())
    }

    pub(crate) fn status(&self, managed: bool) -> super::status::ServerStatus {
        let (running, pid, state, restarts) = match &self.sup {
            Some(s) => (
                s.pid().is_some(),
                s.pid(),
                s.state_name().to_string(),
                self.restarts_before + s.restarts(),
            ),
            None => (false, None, "stopped".to_string(), self.restarts_before),
        };
        super::status::ServerStatus {
            version: self.installed_version(),
            installed: self.installed(),
            running,
            state,
            pid,
            // From the monotonic start, so that the value is stable between ticks.
            started_at: self
                .sup
                .as_ref()
                .and_then(|s| s.since())
                .map(|t| self.origin.1 + t.saturating_duration_since(self.origin.0).as_secs()),
            uptime_secs: self.uptime_secs(),
            restarts,
            managed,
        }
    }
}
/// `<app>/registry`: beside the app's other files for `file://DIR`, under its URL otherwise.
pub(crate) fn registry_of(app_address: &str) -> String {
    format!("{}/registry", app_address.trim_end_matches('/'))
}
