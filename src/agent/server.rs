//! svc-server under the agent: its command line and environment, and the signals that
//! stop or reload the agent. Supervision itself (process group, backoff, TERM→KILL) is
//! `crate::supervisor`'s.
use crate::paths::Paths;
use crate::supervisor::{ChildSpec, Supervisor};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long svc-server gets between SIGTERM and SIGKILL; the unit's TimeoutStopSec is
/// longer so that the agent's clean stop always finishes first.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

struct Flags {
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
}

fn flags() -> &'static Flags {
    static F: OnceLock<Flags> = OnceLock::new();
    F.get_or_init(|| Flags {
        stop: Arc::new(AtomicBool::new(false)),
        reload: Arc::new(AtomicBool::new(false)),
    })
}

/// SIGTERM/SIGINT ask the loop to stop; SIGHUP to re-read local files.
pub fn install_signal_handlers() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let f = flags();
    signal_hook::flag::register(SIGTERM, Arc::clone(&f.stop))?;
    signal_hook::flag::register(SIGINT, Arc::clone(&f.stop))?;
    signal_hook::flag::register(SIGHUP, Arc::clone(&f.reload))?;
    Ok(())
}

pub fn take_exit_signal() -> Option<super::Exit> {
    flags()
        .stop
        .load(Ordering::Relaxed)
        .then_some(super::Exit::Stop)
}

pub fn take_reload_signal() -> bool {
    flags().reload.swap(false, Ordering::Relaxed)
}

/// svc-server's process and what the agent knows of it.
pub struct ServerManager {
    paths: Paths,
    sup: Option<Supervisor>,
    started_at: Option<Instant>,
}

impl ServerManager {
    pub fn new(paths: &Paths) -> ServerManager {
        ServerManager {
            paths: paths.clone(),
            sup: None,
            started_at: None,
        }
    }

    /// The command line every svc-server build gets: the config file and `SVC_HOME`.
    fn spec(&self) -> ChildSpec {
        let config = super::cache::config_path(&self.paths);
        let home = self.paths.state_dir().join("home");
        let mut env: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| !k.starts_with("NOTIFY_SOCKET") && !k.starts_with("WATCHDOG_"))
            .collect();
        env.retain(|(k, _)| k != "SVC_HOME" && k != "SVC_CONFIG_FILE");
        env.push(("SVC_HOME".into(), home.display().to_string()));
        env.push(("SVC_CONFIG_FILE".into(), config.display().to_string()));
        ChildSpec {
            name: "svc-server".into(),
            program: self.paths.bin_link("svc-server"),
            args: vec!["--config".into(), config.display().to_string()],
            cwd: home,
            env,
        }
    }

    pub fn installed(&self) -> bool {
        self.paths.bin_link("svc-server").exists()
    }

    pub fn start(&mut self) {
        if !self.installed() {
            crate::warn!(
                "svc-server",
                "svc-server is not installed yet ({} missing); waiting for an update",
                self.paths.bin_link("svc-server").display()
            );
            return;
        }
        let spec = self.spec();
        let _ = std::fs::create_dir_all(&spec.cwd);
        let mut sup = Supervisor::new(spec);
        let _ = sup.start();
        self.sup = Some(sup);
        self.started_at = Some(Instant::now());
    }

    pub fn tick(&mut self) {
        if let Some(s) = self.sup.as_mut() {
            let _ = s.tick(Instant::now());
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut s) = self.sup.take() {
            s.stop(STOP_TIMEOUT);
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        self.start();
    }

    /// A new config: svc-server re-reads it on SIGHUP.
    pub fn reload(&mut self) {
        if let Some(s) = self.sup.as_ref() {
            s.signal(libc::SIGHUP);
        }
    }

    pub fn status(&self, managed: bool) -> super::status::ServerStatus {
        let (running, pid, state, restarts) = match &self.sup {
            Some(s) => (
                s.pid().is_some(),
                s.pid(),
                s.state_name().to_string(),
                s.restarts(),
            ),
            None => (false, None, "stopped".to_string(), 0),
        };
        super::status::ServerStatus {
            version: None,
            installed: self.installed(),
            running,
            state,
            pid,
            uptime_secs: self
                .sup
                .as_ref()
                .and_then(|s| s.uptime())
                .map(|d| d.as_secs()),
            restarts,
            managed,
        }
    }
}
