//! svc-server, the reference module host (docs/server.md): reads the machine config (a
//! file, or a `file://` management directory's `poll.json`), runs each module of it as a
//! supervised process with the spec's environment (§2.3), reloads on SIGHUP or when the
//! file changes (applying only the difference), moves registry modules by their update
//! type (§9.1) and stops every module on SIGTERM/SIGINT.
pub(crate) mod gate;
pub(crate) mod host;
pub(crate) mod plan;
pub(crate) mod registry;
pub(crate) mod source;

use crate::config::env::HostEnv;
use crate::signals;
use crate::supervisor::Policy;
use host::{HostSettings, ModuleHost};
use source::ConfigSource;
use std::time::{Duration, Instant};

/// The subsystem tag of svc-server's log lines.
pub(crate) const LOG: &str = "svc-server";

/// Command-line options of the host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Options {
    pub source: ConfigSource,
    pub registry: Option<String>,
    pub check_interval: Duration,
    pub watch_interval: Duration,
    pub stop_timeout: Duration,
    pub machine_id: Option<String>,
}

/// Errors that end svc-server before its loop runs.
#[derive(Debug)]
pub(crate) enum StartError {
    Signals(std::io::Error),
    Home(crate::config::env::EnvError),
    Registry(registry::RegistryError),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Signals(e) => write!(f, "cannot install signal handlers: {e}"),
            StartError::Home(e) => write!(f, "{e}"),
            StartError::Registry(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// The daemon: load, apply, then react to signals, file changes and registry checks.
pub(crate) fn run(opts: Options) -> Result<(), StartError> {
    signals::install().map_err(StartError::Signals)?;
    let base_env: Vec<(String, String)> = std::env::vars().collect();
    let lookup = |k: &str| std::env::var(k).ok();
    let machine_id = opts.machine_id.clone().unwrap_or_else(|| "local".into());
    let svc_home = HostEnv {
        lookup: &lookup,
        machine_id: machine_id.clone(),
    }
    .svc_home()
    .map_err(StartError::Home)?;
    let registry = match opts.registry.as_deref() {
        Some(r) => Some(registry::Registry::new(r).map_err(StartError::Registry)?),
        None => None,
    };
    crate::info!(
        LOG,
        "svc-server {} up: config {}, SVC_HOME {}, registry {}, machine id {machine_id}",
        env!("SVC_VERSION"),
        opts.source,
        svc_home.display(),
        registry.as_ref().map(|r| r.base()).unwrap_or("none")
    );
    let mut host = ModuleHost::new(HostSettings {
        svc_home,
        machine_id,
        registry,
        policy: Policy::default(),
        stop_timeout: opts.stop_timeout,
        base_env,
        stop: signals::stop_flag(),
    });
    let mut watcher = source::Watcher::new(opts.source.clone());
    let mut applied: Option<[u8; 32]> = None;
    let load = |watcher: &mut source::Watcher,
                host: &mut ModuleHost,
                forced: bool,
                applied: &mut Option<[u8; 32]>| {
        match watcher.load() {
            Ok(loaded) => {
                if *applied == Some(loaded.hash) {
                    if forced {
                        crate::info!(
                            LOG,
                            "config unchanged; retrying modules that are not running"
                        );
                        host.retry_failed();
                    }
                    return;
                }
                *applied = Some(loaded.hash);
                match loaded.config {
                    Ok((cfg, report)) => {
                        for w in &report.warnings {
                            crate::warn!(LOG, "config warning: {w}");
                        }
                        host.apply(cfg);
                    }
                    Err(report) => {
                        crate::error!(
                            LOG,
                            "config rejected with {} errors; the previous config keeps running",
                            report.errors.len()
                        );
                        for e in &report.errors {
                            crate::error!(LOG, "config error: {e}");
                        }
                    }
                }
            }
            Err(e) => crate::error!(
                LOG,
                "cannot read the config: {e}; the previous config keeps running"
            ),
        }
    };
    load(&mut watcher, &mut host, false, &mut applied);
    let mut next_watch = Instant::now() + opts.watch_interval;
    let mut next_check = Instant::now() + opts.check_interval;
    while !signals::stop_requested() {
        let now = Instant::now();
        if signals::take_reload() {
            crate::info!(LOG, "SIGHUP: re-reading the config");
            load(&mut watcher, &mut host, true, &mut applied);
        } else if now >= next_watch {
            if watcher.changed() {
                crate::info!(LOG, "config file changed");
                load(&mut watcher, &mut host, false, &mut applied);
            }
            next_watch = Instant::now() + opts.watch_interval;
        }
        if Instant::now() >= next_check {
            host.check_updates();
            next_check = Instant::now() + opts.check_interval;
        }
        host.tick(Instant::now());
        let mut until = next_watch.min(next_check);
        if let Some(d) = host.next_deadline() {
            until = until.min(d);
        }
        if signals::stop_requested() || signals::reload_pending() {
            continue;
        }
        signals::wait(until.saturating_duration_since(Instant::now()));
    }
    crate::info!(LOG, "svc-server stopping");
    host.shutdown();
    crate::info!(LOG, "svc-server stopped");
    Ok(())
}
