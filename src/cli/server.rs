//! The `svc-server` command line: its options, `version`, `help`, and the entry point that
//! hands parsed options to `server::run`.
use super::args::{Args, UsageError};
use super::{cmd_version, default_machine_id, EXIT_OK, EXIT_USAGE};
use crate::server::source::ConfigSource;
use crate::server::{run, Options, LOG};
use std::time::Duration;

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

/// Parses the daemon's arguments; `env` is svc-server's environment (for fallbacks).
fn parse_options(
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
    let source = match (a.value("config"), a.value("app")) {
        (Some(_), Some(_)) => return Err(UsageError("give --config or --app, not both".into())),
        (Some(f), None) => ConfigSource::File(f.into()),
        (None, Some(app)) => match app.strip_prefix("file://") {
            Some(dir) => ConfigSource::App(dir.into()),
            None if app.starts_with("https://") || app.starts_with("http://") => {
                ConfigSource::Remote {
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
            Some(f) => ConfigSource::File(f.into()),
            None => {
                return Err(UsageError(
                    "no config: give --config FILE, --app file://DIR or set SVC_CONFIG_FILE".into(),
                ))
            }
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
        machine_id: match a
            .value("machine-id")
            .map(str::to_string)
            .or_else(|| env("SVC_MACHINE_ID").filter(|s| !s.is_empty()))
        {
            Some(id) => {
                crate::config::env::check_machine_id(&id)
                    .map_err(|e| UsageError(format!("--machine-id / SVC_MACHINE_ID: {e}")))?;
                Some(id)
            }
            None => None,
        },
    })
}

/// Entry point of the `svc-server` binary; returns the exit code.
pub fn server_main(argv: Vec<String>) -> i32 {
    let rest = argv.get(1..).unwrap_or(&[]);
    match rest.first().map(String::as_str) {
        Some("version" | "--version" | "-V") => {
            return match cmd_version(&rest[1..], "svc-server") {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("svc-server version: {e}");
                    EXIT_USAGE
                }
            }
        }
        Some("help" | "--help" | "-h") => {
            print!("{USAGE}");
            return EXIT_OK;
        }
        _ => {}
    }
    let env = |k: &str| std::env::var(k).ok();
    let mut opts = match parse_options(rest, &env) {
        Ok(o) => o,
        // One line, as the agent's: under the agent a refused start repeats at every restart,
        // and the usage text would fill the journal.
        Err(e) => {
            eprintln!("svc-server: {e}");
            eprintln!("Run `svc-server help` for usage.");
            return EXIT_USAGE;
        }
    };
    opts.machine_id.get_or_insert_with(|| {
        default_machine_id(&crate::paths::Paths::from_env("/").unwrap_or_default())
    });
    match run(opts) {
        Ok(()) => 0,
        Err(e) => {
            crate::error!(LOG, "{e}");
            1
        }
    }
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
        parse_options(&argv, &|k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn config_source_and_fallbacks() {
        let o = parse(&["--config", "/c.json"], &[("SVC_CONFIG_FILE", "/other")]).unwrap();
        assert_eq!(o.source, ConfigSource::File("/c.json".into()));
        let o = parse(
            &[],
            &[
                ("SVC_CONFIG_FILE", "/env.json"),
                ("SVC_REGISTRY", "file:///r"),
            ],
        )
        .unwrap();
        assert_eq!(o.source, ConfigSource::File("/env.json".into()));
        assert_eq!(o.registry.as_deref(), Some("file:///r"));
        assert_eq!(o.check_interval, Duration::from_secs(300));
        let o = parse(&["--app", "file:///mgmt", "--check-interval", "0.5"], &[]).unwrap();
        assert_eq!(o.source, ConfigSource::App("/mgmt".into()));
        assert_eq!(o.check_interval, Duration::from_millis(500));
        assert!(parse(&[], &[]).is_err(), "no config at all");
        let o = parse(
            &["--app", "https://app.example", "--credentials", "/c"],
            &[],
        )
        .unwrap();
        assert_eq!(
            o.source,
            ConfigSource::Remote {
                url: "https://app.example".into(),
                credentials: "/c".into()
            }
        );
        assert!(parse(&["--app", "ftp://app.example"], &[]).is_err());
        assert!(parse(&["--config", "a", "--app", "file:///b"], &[]).is_err());
        assert!(parse(&["--config", "a", "--check-interval", "0"], &[]).is_err());
        assert!(parse(&["--config", "a", "extra"], &[]).is_err());
    }

    #[test]
    fn a_machine_id_that_climbs_is_a_usage_error() {
        for (args, env) in [
            (
                vec!["--config", "/c.json", "--machine-id", "../../etc"],
                vec![],
            ),
            (vec!["--config", "/c.json"], vec![("SVC_MACHINE_ID", "..")]),
        ] {
            let e = parse(&args, &env).unwrap_err();
            assert!(e.0.contains("machine id"), "{e}");
        }
    }
}
