//! The `svc-agent` command line: the daemon and the on-device tools of
//! `shared/conventions.md`. Every command has `--help`; exit codes follow the conventions.
pub(crate) mod args;
pub(crate) mod doctor;
pub(crate) mod hawkbit_join;
pub(crate) mod provision;
pub mod server;
pub(crate) mod status;
pub(crate) mod syscfg;

use crate::config::{self, env::HostEnv, version::Selector};
use args::{Args, UsageError};
use std::io::{Read, Write};

/// Exit codes of the tool commands.
pub(crate) const EXIT_OK: i32 = 0;
pub(crate) const EXIT_INVALID: i32 = 1;
pub(crate) const EXIT_USAGE: i32 = 2;

/// The most config text `validate` reads; a larger input is refused, not buffered.
const MAX_CONFIG_BYTES: u64 = 64 * 1024 * 1024;

const USAGE: &str = "\
svc-agent: self-updating service manager for svc-server

usage: svc-agent <command> [options]

commands:
  version [--json]                 print the version (binary_name, version, target)
  validate [--json] [--effective] FILE|-
                                   check a machine config; exit 0 valid, 1 invalid, 2 unreadable
  module-env --config FILE --module NAME [--machine-id ID]
                                   print a module's environment as sorted KEY=VALUE lines
  resolve-version --selector SEL --current VER --available V1,V2,...
                                   print the version a module moves to, or none
  apply-delta OLD DELTA OUT        make OUT from OLD and a delta (svc-delta-v1 or -v2, docs/updates.md)
  run [--root DIR]                 the daemon (systemd runs it so)
  install [--root DIR]             install this binary as the systemd service svc-agent
  uninstall [--purge] [--root DIR] remove the service and its files (--purge: credentials too)
  status [--json] [--root DIR]     what runs, versions, last contact, subsystem states
  hawkbit confirm|decline [--action ID] [--root DIR]
  hawkbit join --url URL --tenant T --controller-id ID|@machine-id --token-file FILE|-
                                   consent to (or refuse) the hawkBit action that waits for it
  doctor [--json] [--root DIR]     pre-flight checks of this machine
  provision [--until-online] [--force] [--root DIR]
                                   run agent-provisioning in the foreground: hotspot, portal, join
  boot-guard [--root DIR]          before each agent start (ExecStartPre, from the known-good
                                   binary): count starts of a new agent, roll back after 3
  seed [--root DIR]                before each agent start on a read-only image (ExecStartPre,
                                   from the image's binary): make the image's agent current
                                   when the state directory has none or an older one
  check-dirs [--root DIR]          before each agent start on a data partition (ExecStartPre,
                                   from the image's binary): the state and credentials
                                   directories are root's and writable by no one else
  help                             this text

Run `svc-agent <command> --help` for a command's details.
";

/// The version object printed by `version --json` (the update engine checks it).
pub(crate) fn version_json(binary_name: &str) -> serde_json::Value {
    serde_json::json!({
        "binary_name": binary_name,
        "version": env!("SVC_VERSION"),
        "target": env!("SVC_TARGET"),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

/// The device paths of a command: `--root` (default `/`), the build's state directory and
/// credentials file, and their run-time overrides `SVC_STATE_DIR` / `SVC_CREDENTIALS_FILE`.
pub(crate) fn device_paths(a: &Args) -> Result<crate::paths::Paths, UsageError> {
    crate::paths::Paths::from_env(a.value("root").unwrap_or("/"))
        .map_err(|e| UsageError(e.to_string()))
}

/// Entry point of the `svc-agent` binary; returns the process exit code.
pub fn agent_main(argv: Vec<String>) -> i32 {
    let cmd = argv.get(1).map(String::as_str).unwrap_or("help");
    let rest = argv.get(2..).unwrap_or(&[]);
    let result = match cmd {
        "version" | "--version" | "-V" => cmd_version(rest, "svc-agent"),
        "validate" => cmd_validate(rest),
        "module-env" => cmd_module_env(rest),
        "resolve-version" => cmd_resolve_version(rest),
        "apply-delta" => cmd_apply_delta(rest),
        "run" => cmd_run(rest),
        "install" => cmd_install(rest),
        "uninstall" => cmd_uninstall(rest),
        "status" => status::cmd_status(rest),
        "hawkbit" => status::cmd_hawkbit(rest),
        "doctor" => doctor::cmd_doctor(rest),
        "syscfg-apply" => Ok(syscfg::cmd_syscfg(rest)),
        "boot-guard" => cmd_boot_guard(rest),
        "seed" => cmd_seed(rest),
        "check-dirs" => cmd_check_dirs(rest),
        "provision" => provision::cmd_provision(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(EXIT_OK)
        }
        other => Err(UsageError(format!("unknown command {other:?}"))),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("svc-agent {cmd}: {e}");
            eprintln!("Run `svc-agent help` for usage.");
            EXIT_USAGE
        }
    }
}

/// Prints `help` and returns true when `--help` was given.
fn help_requested(args: &Args, text: &str) -> bool {
    if args.flag("help") {
        print!("{text}");
        true
    } else {
        false
    }
}

pub(crate) fn cmd_version(rest: &[String], binary_name: &str) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["json", "help"], &[])?;
    if help_requested(&a, "usage: version [--json]\n  Prints binary_name, version and target (as one JSON object with --json).\n") {
        return Ok(EXIT_OK);
    }
    let v = version_json(binary_name);
    if a.flag("json") {
        println!("{v}");
    } else {
        println!(
            "{binary_name} {} ({})",
            env!("SVC_VERSION"),
            env!("SVC_TARGET")
        );
    }
    Ok(EXIT_OK)
}

/// Reads a config file (or stdin for `-`), bounded in size. `Err`: the line `validate`
/// prints (the command line's outermost edge: printed and mapped to exit 2, nothing else).
fn read_input(path: &str) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    let res = if path == "-" {
        std::io::stdin()
            .take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut buf)
    } else {
        std::fs::File::open(path).and_then(|f| {
            // Size the buffer once: a doubling Vec would hold up to twice the file.
            let len = f
                .metadata()
                .map(|m| m.len())
                .unwrap_or(0)
                .min(MAX_CONFIG_BYTES);
            buf.reserve_exact(len as usize + 1);
            f.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut buf)
        })
    };
    res.map_err(|e| format!("cannot read {path}: {e}"))?;
    if buf.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!("{path} is larger than {MAX_CONFIG_BYTES} bytes"));
    }
    Ok(buf)
}

const VALIDATE_HELP: &str = "\
usage: svc-agent validate [--json] [--effective] FILE|-
  Checks a machine config against every rule of the spec and reports all problems,
  each with its JSON pointer. Exit 0 valid, 1 invalid, 2 unreadable or usage error.
  --json       print {\"valid\", \"errors\": [{\"path\", \"message\"}], \"warnings\"}
  --effective  print the effective agent object: all four subsystems, defaults filled in
";

fn cmd_validate(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["json", "effective", "help"], &[])?;
    if help_requested(&a, VALIDATE_HELP) {
        return Ok(EXIT_OK);
    }
    let [path] = a.positional.as_slice() else {
        return Err(UsageError(
            "validate takes exactly one FILE (or - for stdin)".into(),
        ));
    };
    let bytes = match read_input(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("svc-agent validate: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let (cfg, report) = match config::parse_slice(&bytes) {
        Ok((cfg, report)) => (Some(cfg), report),
        Err(report) => (None, report),
    };
    drop(bytes);
    let effective = cfg.as_ref().map(|c| &c.agent);
    // Buffered: stdout flushes each line, and a config can have 100,000s of diagnostics.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if a.flag("json") {
        let mut v = serde_json::json!({
            "valid": report.is_valid(),
            "errors": report.errors,
            "warnings": report.warnings,
        });
        if a.flag("effective") {
            v["effective"] = serde_json::to_value(effective).unwrap_or_default();
        }
        let _ = writeln!(out, "{v}");
    } else if a.flag("effective") && report.is_valid() {
        let text = serde_json::to_string_pretty(&effective).unwrap_or_default();
        let _ = writeln!(out, "{text}");
        eprint!("{report}");
    } else {
        let _ = write!(out, "{report}");
        let verdict = if report.is_valid() {
            "valid"
        } else {
            "invalid"
        };
        let _ = writeln!(
            out,
            "{path}: {verdict} ({} errors, {} warnings)",
            report.errors.len(),
            report.warnings.len()
        );
    }
    let _ = out.flush();
    Ok(if report.is_valid() {
        EXIT_OK
    } else {
        EXIT_INVALID
    })
}

const MODULE_ENV_HELP: &str = "\
usage: svc-agent module-env --config FILE --module NAME [--machine-id ID]
  Prints the environment svc-server gives module NAME (SVC_HOME, SVC_MODULE_ROOT,
  SVC_MODULE_DATA, SVC_MODULE_ID and the module's env with ${environment.X} expanded
  from this process's environment) as sorted KEY=VALUE lines.
  The machine id defaults to the part id of the credentials file, else /etc/machine-id.
  SVC_MODULE_ROOT names the version svc-server deployed (its record under SVC_HOME), else
  the exact X.Y.Z of the selector; with neither it is left out (noted on stderr).
  The module's env cannot change SVC_HOME, SVC_MODULE_DATA, SVC_MODULE_ID (nor a registry
  module's SVC_MODULE_ROOT): such entries are ignored, with a warning.
  Exit 1 when the config is invalid, the module is unknown, a variable is unset, or a
  name or value holds a line break (it cannot be one KEY=VALUE line).
";

fn cmd_module_env(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help"], &["config", "module", "machine-id", "root"])?;
    if help_requested(&a, MODULE_ENV_HELP) {
        return Ok(EXIT_OK);
    }
    let path = a.required("config")?;
    let name = a.required("module")?;
    let paths = crate::cli::device_paths(&a)?;
    let bytes = match read_input(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("svc-agent module-env: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let (cfg, report) = match config::parse_slice(&bytes) {
        Ok(parsed) => parsed,
        Err(report) => {
            eprint!("{report}");
            eprintln!("svc-agent module-env: {path} is not a valid machine config");
            return Ok(EXIT_INVALID);
        }
    };
    let Some(index) = cfg.modules.iter().position(|m| m.name == name) else {
        let names: Vec<&str> = cfg.modules.iter().map(|m| m.name.as_str()).collect();
        eprintln!(
            "svc-agent module-env: no module named {name:?} in {path} (modules: {})",
            names.join(", ")
        );
        return Ok(EXIT_INVALID);
    };
    let module = &cfg.modules[index];
    // A valid config keeps every module, so the index is the one in the file.
    let here = format!("/modules/{index}/");
    for w in report.warnings.iter().filter(|w| w.path.starts_with(&here)) {
        eprintln!("warning: {w}");
    }
    let machine_id = a
        .value("machine-id")
        .map(str::to_string)
        .unwrap_or_else(|| default_machine_id(&paths));
    config::env::check_machine_id(&machine_id)
        .map_err(|e| UsageError(format!("--machine-id: {e}")))?;
    let lookup = |k: &str| std::env::var(k).ok();
    let host = HostEnv {
        lookup: &lookup,
        machine_id,
    };
    // The version svc-server deployed, as svc-server itself names SVC_MODULE_ROOT.
    let deployed = host
        .svc_home()
        .ok()
        .and_then(|home| crate::server::host::deployed_version(&home, module));
    match config::env::module_env(module, &host, deployed.as_ref()) {
        Ok(vars) => {
            // A line break would make one variable look like two lines (or like another
            // variable): refuse rather than print something misread.
            if let Some((k, _)) = vars
                .iter()
                .find(|(k, v)| k.contains(['\n', '\r']) || v.contains(['\n', '\r']))
            {
                eprintln!(
                    "svc-agent module-env: module {name:?}: variable {k:?} holds a newline or carriage return, which one KEY=VALUE line cannot carry"
                );
                return Ok(EXIT_INVALID);
            }
            if module.module_type == config::model::ModuleType::Registry
                && !vars.iter().any(|(k, _)| k == "SVC_MODULE_ROOT")
            {
                let sel = module.version.as_ref().map(|s| s.to_string());
                eprintln!(
                    "note: SVC_MODULE_ROOT is left out: module {name:?} has no version deployed yet and its selector {} names no single version",
                    sel.unwrap_or_default()
                );
            }
            let mut out = std::io::stdout().lock();
            for (k, v) in vars {
                let _ = writeln!(out, "{k}={v}");
            }
            Ok(EXIT_OK)
        }
        Err(e) => {
            eprintln!("svc-agent module-env: {e}");
            Ok(EXIT_INVALID)
        }
    }
}

/// The machine id: the credentials' part id, else `/etc/machine-id`, else `local`.
pub(crate) fn default_machine_id(paths: &crate::paths::Paths) -> String {
    let from_creds = std::fs::read(paths.credentials())
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| {
            v.pointer("/cloud/id")
                .and_then(|i| i.as_str())
                .map(str::to_string)
        });
    from_creds
        .or_else(|| {
            std::fs::read_to_string(paths.device("/etc/machine-id"))
                .ok()
                .map(|s| s.trim().to_string())
        })
        .filter(|s| config::env::check_machine_id(s).is_ok())
        .unwrap_or_else(|| "local".into())
}

const RESOLVE_HELP: &str = "\
usage: svc-agent resolve-version --selector SEL --current VER --available V1,V2,...
  Prints the version a module with selector SEL (X.Y.Z, X.Y.*, X.*, latest,
  latest-with-prerelease) moves to from VER (empty: nothing deployed), or `none`.
  Exit 2 on a malformed selector or version.
";

/// `apply-delta OLD DELTA OUT`: what the engine does with a delta, by hand (a delta carried
/// on a stick; benches/delta.sh measures the device's side with it). OUT is not verified:
/// compare its sha256 with the release's.
fn cmd_apply_delta(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help"], &[])?;
    if a.flag("help") || a.positional.len() != 3 {
        println!("usage: svc-agent apply-delta OLD DELTA OUT");
        return Ok(if a.flag("help") { EXIT_OK } else { EXIT_USAGE });
    }
    let p = &a.positional;
    match crate::update::delta::apply_files(
        std::path::Path::new(&p[0]),
        std::path::Path::new(&p[1]),
        std::path::Path::new(&p[2]),
        256 * 1024 * 1024,
    ) {
        Ok(done) => {
            println!("{} bytes, sha256 {}", done.size, done.sha256);
            Ok(EXIT_OK)
        }
        Err(e) => {
            let bad = if e.is_refusal() { "bad delta: " } else { "" };
            eprintln!("svc-agent apply-delta: {bad}{e}");
            Ok(1)
        }
    }
}

fn cmd_resolve_version(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help"], &["selector", "current", "available"])?;
    if help_requested(&a, RESOLVE_HELP) {
        return Ok(EXIT_OK);
    }
    let sel: Selector = a
        .required("selector")?
        .parse()
        .map_err(|e: config::version::SelectorError| UsageError(e.to_string()))?;
    let parse = |s: &str| {
        semver::Version::parse(s.trim())
            .map_err(|e| UsageError(format!("{s:?} is not a semantic version: {e}")))
    };
    let current = match a.value("current").map(str::trim) {
        None | Some("") => None,
        Some(v) => Some(parse(v)?),
    };
    let available = a
        .required("available")?
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse)
        .collect::<Result<Vec<_>, _>>()?;
    match sel.resolve(current.as_ref(), &available) {
        Some(v) => println!("{v}"),
        None => println!("none"),
    }
    Ok(EXIT_OK)
}

const INSTALL_HELP: &str = "\
usage: svc-agent install [--root DIR]
  Copies this binary to /opt/svc/cache/svc-agent-<version>, links /opt/svc/bin/svc-agent,
  writes /etc/systemd/system/svc-agent.service and enables and starts it. Running it again
  changes nothing. The credentials file /etc/svc.json must be placed first (install.sh
  writes it from SVC_PART_ID, SVC_API_KEY_ID and SVC_API_KEY).
";

fn cmd_install(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help"], &["root"])?;
    if help_requested(&a, INSTALL_HELP) {
        return Ok(EXIT_OK);
    }
    let paths = crate::cli::device_paths(&a)?;
    if let Err(e) = crate::agent::platform_supported() {
        eprintln!("svc-agent install: {e}");
        return Ok(EXIT_INVALID);
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("svc-agent install: cannot find this program's path: {e}");
            return Ok(EXIT_INVALID);
        }
    };
    if !crate::dirtrust::trusted_or_logged(&paths, "install") {
        return Ok(EXIT_INVALID);
    }
    if !paths.credentials().exists() {
        eprintln!(
            "svc-agent install: warning: no credentials at {}; the agent will run from its cache until they are placed",
            paths.credentials().display()
        );
    }
    match crate::systemd::install(&paths, &exe, &mut crate::systemd::RealSystemctl) {
        Ok(r) => {
            println!(
                "installed {} ({}); unit {}{}",
                r.binary.display(),
                if r.changed { "updated" } else { "unchanged" },
                r.unit.display(),
                if r.enabled {
                    ", enabled and started"
                } else {
                    " (no systemd here: not enabled)"
                }
            );
            Ok(EXIT_OK)
        }
        Err(e) => {
            eprintln!("svc-agent install: {e}");
            Ok(EXIT_INVALID)
        }
    }
}

/// Always exits 0 so that the start goes ahead: with the previous version when it rolled
/// back, with the current one otherwise (a guard that fails must not keep the agent down).
fn cmd_boot_guard(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help"], &["root"])?;
    if help_requested(&a, "usage: svc-agent boot-guard [--root DIR]\n  Run by systemd (ExecStartPre) from bin/svc-agent.stable before each start of bin/svc-agent:\n  counts the starts of a newly installed agent version and, when it used up 3 starts\n  without one healthy loop, points bin/svc-agent back at the previous version.\n") {
        return Ok(EXIT_OK);
    }
    let paths = crate::cli::device_paths(&a)?;
    match crate::update::agent_boot_guard(&paths) {
        Ok(crate::update::GuardOutcome::RolledBack { from, to }) => {
            crate::error!(
                "update",
                "svc-agent {from} failed to start 3 times: rolled back to {to}"
            );
        }
        Ok(outcome) => crate::debug!("update", "boot guard: {outcome:?}"),
        Err(e) => crate::error!("update", "boot guard: {e}"),
    }
    Ok(EXIT_OK)
}

const SEED_HELP: &str = "\
usage: svc-agent seed [--root DIR]
  Run by systemd (ExecStartPre of the read-only image's drop-in) from the binary the image
  ships, before bin/svc-agent starts. With no agent in the state directory (an empty data
  partition) this binary becomes the first current version; when the image's agent is newer
  than the state's (an A/B switch to a newer image) it becomes current, on probation; an
  older image agent never replaces a newer one (no downgrade). Exit 0 when the state
  directory has an agent to start, 1 when seeding failed.
";

fn cmd_seed(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help"], &["root"])?;
    if help_requested(&a, SEED_HELP) {
        return Ok(EXIT_OK);
    }
    let paths = crate::cli::device_paths(&a)?;
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            crate::error!("update", "seed: cannot find this program's path: {e}");
            return Ok(EXIT_INVALID);
        }
    };
    if !crate::dirtrust::trusted_or_logged(&paths, "seed") {
        return Ok(EXIT_INVALID);
    }
    use crate::update::SeedOutcome::*;
    match crate::update::seed_from_image(&paths, &exe, env!("SVC_VERSION")) {
        Ok(Seeded { version }) => crate::info!(
            "update",
            "seeded {} with the image's svc-agent {version}",
            paths.state_dir().display()
        ),
        Ok(Upgraded { from, to }) => crate::info!(
            "update",
            "the image brings svc-agent {to}, newer than {from} in {}: {to} is current (on probation; {from} kept for a rollback)",
            paths.state_dir().display()
        ),
        Ok(Unchanged { version }) => {
            crate::debug!("update", "seed: svc-agent {version} is the image's")
        }
        Ok(KeptNewer { image, running }) => crate::warn!(
            "update",
            "the image's svc-agent {image} is not newer than {running} in {}: {running} keeps running (no downgrade)",
            paths.state_dir().display()
        ),
        Ok(ImageMarkedBad { image, running }) => crate::warn!(
            "update",
            "the image's svc-agent {image} was rolled back on this machine before: {running} keeps running"
        ),
        Err(e) => {
            crate::error!("update", "seed: {e}");
            return Ok(EXIT_INVALID);
        }
    }
    Ok(EXIT_OK)
}

const CHECK_DIRS_HELP: &str = "\
usage: svc-agent check-dirs [--root DIR]
  Run by systemd (ExecStartPre of the data-partition drop-in) from the binary the image
  ships, before anything runs from the state directory. Makes the state and credentials
  directories when missing (0700), takes group and other write off those root owns, and
  fails, naming the path, its owner and its mode, when one (or bin/, cache/, home/ in the
  state directory, or a parent of either) is owned by another user or writable by others.
  Exit 0 when they can be trusted, 1 otherwise (the unit does not start).
";

fn cmd_check_dirs(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help"], &["root"])?;
    if help_requested(&a, CHECK_DIRS_HELP) {
        return Ok(EXIT_OK);
    }
    let paths = crate::cli::device_paths(&a)?;
    Ok(
        if crate::dirtrust::trusted_or_logged(&paths, "check-dirs") {
            EXIT_OK
        } else {
            EXIT_INVALID
        },
    )
}

fn cmd_uninstall(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help", "purge"], &["root"])?;
    if help_requested(&a, "usage: svc-agent uninstall [--purge] [--root DIR]\n  Stops and removes the service, /opt/svc and the unit; --purge also removes /etc/svc.json.\n") {
        return Ok(EXIT_OK);
    }
    let paths = crate::cli::device_paths(&a)?;
    match crate::systemd::uninstall(&paths, a.flag("purge"), &mut crate::systemd::RealSystemctl) {
        Ok(()) => {
            println!(
                "svc-agent uninstalled{}",
                if a.flag("purge") {
                    " (credentials removed)"
                } else {
                    ""
                }
            );
            Ok(EXIT_OK)
        }
        Err(e) => {
            eprintln!("svc-agent uninstall: {e}");
            Ok(EXIT_INVALID)
        }
    }
}

const RUN_HELP: &str = "\
usage: svc-agent run [--root DIR]
  Runs the agent in the foreground (systemd starts it so). --root re-roots every device
  path under DIR, for sandboxes and tests; no root privileges are needed then.
";

/// `svc-agent run`.
fn cmd_run(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help"], &["root"])?;
    if a.flag("help") {
        print!("{RUN_HELP}");
        return Ok(0);
    }
    if option_env!("SVC_LAB_BROKEN_RUN").is_some() {
        // A deliberately broken build for the lab's boot-guard scenario: it passes every
        // check of a download (it is a real ELF answering `version --json`) but cannot run.
        // Release builds never set SVC_LAB_BROKEN_RUN.
        eprintln!("svc-agent: this build was made broken on purpose (SVC_LAB_BROKEN_RUN)");
        return Ok(70);
    }
    let paths = crate::cli::device_paths(&a)?;
    Ok(crate::agent::run(paths))
}
