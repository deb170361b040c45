//! svc-server, the reference module host (docs/server.md): reads the machine config (a
//! file, or a `file://` management directory's `poll.json`), runs each module of it as a
//! supervised process with the spec's environment (§2.3), reloads on SIGHUP or when the
//! file changes (applying only the difference), moves registry modules by their update
//! type (§9.1) and stops every module on SIGTERM/SIGINT.
pub mod gate;
pub mod host;
pub mod plan;
pub mod registry;
pub mod source;

use crate::cli::args::{Args, UsageError};
use crate::config::env::HostEnv;
use crate::signals;
use crate::supervisor::Policy;
use host::{Host, Settings};
use source::Source;
use std::time::{Duration, Instant};

const LOG: &str = "svc-server";

const USAGE: &str = "\
svc-server: the reference module host

usage: svc-server [--config FILE | --app file://DIR | --app https://APP] [options]
       svc-server version [--json]

  --config FILE           the machine config (default: $SVC_CONFIG_FILE)
  --app file://DIR        read the config member of DIR/poll.json (management directory)
  --app https://APP       poll the management app for the config (docs/protocol.md), with
  --credentials FILE      the machine credentials (default /etc/svc.json); under svc-agent
                          the agent polls and hands svc-server a file (--config) instead
  --registry URL          module registry, file://DIR or https://... (default: $SVC_REGISTRY)
  --check-interval SECS   registry update checks (default 300)
  --watch-interval SECS   config file change checks (default 2)
  --stop-timeout SECS     SIGTERM to SIGKILL when a module stops (default 10)
  --machine-id ID         for SVC_MODULE_DATA (default: $SVC_MACHINE_ID, the credentials'
                          part id, /etc/machine-id, else local)

SIGHUP re-reads the config; SIGTERM or SIGINT stops every module, then svc-server.
See docs/server.md.
";

/// Command-line options of the host.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub source: Source,
    pub registry: Option<String>,
    pub check_interval: Duration,
    pub watch_interval: Duration,
    pub stop_timeout: Duration,
    pub machine_id: Option<String>,
}

fn secs(a: &Args, name: &str, default: f64) -> Result<Duration, UsageError> {
    match a.value(name) {
        None => Ok(Duration::from_secs_f64(default)),
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                UsageError(format!(
                    "--{name} {v:?}: expected a positive number of seconds"
                ))
            }),
    }
}

impl Options {
    /// Parses the daemon's arguments; `env` is svc-server's environment (for fallbacks).
    pub fn parse(
        argv: &[String],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Options, UsageError> {
        let a = Args::parse(
            argv,
            &["help"],
            &[
                "config",
                "app",
                "credentials",
                "registry",
                "check-interval",
                "watch-interval",
                "stop-timeout",
                "machine-id",
            ],
        )?;
        if let Some(p) = a.positional.first() {
            return Err(UsageError(format!("unexpected argument {p:?}")));
        }
        let source =
            match (a.value("config"), a.value("app")) {
                (Some(_), Some(_)) => {
                    return Err(UsageError("give --config or --app, not both".into()))
                }
                (Some(f), None) => Source::File(f.into()),
                (None, Some(app)) => match app.strip_prefix("file://") {
                    Some(dir) => Source::App(dir.into()),
                    None if app.starts_with("https://") || app.starts_with("http://") => {
                        Source::Remote {
                            url: app.to_string(),
                            credentials: a.value("credentials").unwrap_or("/etc/svc.json").into(),
                        }
                    }
                    None => {
                        return Err(UsageError(format!(
                        "--app {app:?}: expected file://DIR, https://... or (explicit) http://..."
                    )))
                    }
                },
                (None, None) => match env("SVC_CONFIG_FILE").filter(|s| !s.is_empty()) {
                    Some(f) => Source::File(f.into()),
                    None => return Err(UsageError(
                        "no config: give --config FILE, --app file://DIR or set SVC_CONFIG_FILE"
                            .into(),
                    )),
                },
            };
        Ok(Options {
            source,
            registry: a
                .value("registry")
                .map(str::to_string)
                .or_else(|| env("SVC_REGISTRY").filter(|s| !s.is_empty())),
            check_interval: secs(&a, "check-interval", 300.0)?,
            watch_interval: secs(&a, "watch-interval", 2.0)?,
            stop_timeout: secs(&a, "stop-timeout", 10.0)?,
            machine_id: a
                .value("machine-id")
                .map(str::to_string)
                .or_else(|| env("SVC_MACHINE_ID").filter(|s| !s.is_empty())),
        })
    }
}

/// Entry point of the `svc-server` binary; returns the exit code.
pub fn server_main(argv: Vec<String>) -> i32 {
    let rest = argv.get(1..).unwrap_or(&[]);
    match rest.first().map(String::as_str) {
        Some("version") | Some("--version") | Some("-V") => {
            return match crate::cli::cmd_version(&rest[1..], "svc-server") {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("svc-server version: {e}");
                    crate::cli::EXIT_USAGE
                }
            }
        }
        Some("help") | Some("--help") | Some("-h") => {
            print!("{USAGE}");
            return crate::cli::EXIT_OK;
        }
        _ => {}
    }
    let env = |k: &str| std::env::var(k).ok();
    let opts = match Options::parse(rest, &env) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("svc-server: {e}\n\n{USAGE}");
            return crate::cli::EXIT_USAGE;
        }
    };
    match run(opts) {
        Ok(()) => 0,
        Err(e) => {
            crate::error!(LOG, "{e}");
            1
        }
    }
}

/// Errors that end svc-server before its loop runs.
#[derive(Debug)]
pub enum StartError {
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
pub fn run(opts: Options) -> Result<(), StartError> {
    signals::install().map_err(StartError::Signals)?;
    let base_env: Vec<(String, String)> = std::env::vars().collect();
    let lookup = |k: &str| std::env::var(k).ok();
    let machine_id = opts
        .machine_id
        .clone()
        .unwrap_or_else(|| crate::cli::default_machine_id(&crate::paths::Paths::default()));
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
    let mut host = Host::new(Settings {
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
                host: &mut Host,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Options, UsageError> {
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Options::parse(&argv, &|k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn config_source_and_fallbacks() {
        let o = parse(&["--config", "/c.json"], &[("SVC_CONFIG_FILE", "/other")]).unwrap();
        assert_eq!(o.source, Source::File("/c.json".into()));
        let o = parse(
            &[],
            &[
                ("SVC_CONFIG_FILE", "/env.json"),
                ("SVC_REGISTRY", "file:///r"),
            ],
        )
        .unwrap();
        assert_eq!(o.source, Source::File("/env.json".into()));
        assert_eq!(o.registry.as_deref(), Some("file:///r"));
        assert_eq!(o.check_interval, Duration::from_secs(300));
        let o = parse(&["--app", "file:///mgmt", "--check-interval", "0.5"], &[]).unwrap();
        assert_eq!(o.source, Source::App("/mgmt".into()));
        assert_eq!(o.check_interval, Duration::from_millis(500));
        assert!(parse(&[], &[]).is_err(), "no config at all");
        let o = parse(
            &["--app", "https://app.example", "--credentials", "/c"],
            &[],
        )
        .unwrap();
        assert_eq!(
            o.source,
            Source::Remote {
                url: "https://app.example".into(),
                credentials: "/c".into()
            }
        );
        assert!(parse(&["--app", "ftp://app.example"], &[]).is_err());
        assert!(parse(&["--config", "a", "--app", "file:///b"], &[]).is_err());
        assert!(parse(&["--config", "a", "--check-interval", "0"], &[]).is_err());
        assert!(parse(&["--config", "a", "extra"], &[]).is_err());
    }
}
