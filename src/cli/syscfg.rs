//! `svc-agent syscfg-apply`: a hidden test command that runs agent-syscfg once, without the
//! daemon, on a config file. Used by the VM scenarios and for debugging on a device.
use super::args::Args;
use crate::config;

const HELP: &str = "\
usage: svc-agent syscfg-apply [--root DIR] [--json] --config FILE
  Applies the agent-syscfg section of a machine config once (journald drop-in, apt
  drop-ins), or reverts it when the section has disable_subsystem: true, and prints each
  setting's status. Under --root other than / no service is restarted.
  Exit 0 when no setting failed, 1 when one failed or the config is invalid, 2 usage.
";

/// Runs the command; `args` are the arguments after the command name. Returns the exit code.
pub(crate) fn cmd_syscfg(args: &[String]) -> i32 {
    let a = match Args::parse(args, &["help", "json"], &["root", "config"]) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("svc-agent syscfg-apply: {e}");
            return 2;
        }
    };
    if a.flag("help") {
        print!("{HELP}");
        return 0;
    }
    let Some(path) = a.value("config") else {
        eprintln!("svc-agent syscfg-apply: --config is required");
        return 2;
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("svc-agent syscfg-apply: cannot read {path}: {e}");
            return 2;
        }
    };
    let cfg = match config::parse_str(&text) {
        Ok((cfg, _)) => cfg,
        Err(report) => {
            eprint!("{report}");
            eprintln!("svc-agent syscfg-apply: {path} is not a valid machine config");
            return 1;
        }
    };
    let paths = match crate::cli::device_paths(&a) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("svc-agent syscfg-apply: {e}");
            return 2;
        }
    };
    let status = crate::syscfg::run(&cfg.agent.syscfg, &paths);
    if a.flag("json") {
        println!(
            "{}",
            serde_json::to_string(&status).unwrap_or_else(|_| "{}".into())
        );
    } else {
        for s in &status.settings {
            println!("{}: {} ({})", s.setting.as_str(), s.state, s.detail);
            for f in &s.changed {
                println!("  changed {f}");
            }
            for w in &s.warnings {
                println!("  warning: {w}");
            }
        }
        for s in &status.services {
            println!("services: {s}");
        }
    }
    if status.any_failed() {
        1
    } else {
        0
    }
}
