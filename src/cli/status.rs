//! `svc-agent status`: what runs, read from the running agent's status file and checked
//! against the live system (a status file outlives the agent that wrote it). The human form
//! reads like `systemctl status`; `--json` prints the file's data.
use super::args::{Args, UsageError};
use crate::agent::status::StatusReport;
use crate::agent::unix_now;
use serde_json::Value;

const STATUS_HELP: &str = "\
usage: svc-agent status [--json] [--root DIR]
  What runs: agent and svc-server versions, states, uptimes, last contact with the
  management app, rejected config errors, versions and subsystems. Reads the running
  agent's status file and checks that the processes it names still run.
  Exit 0 when the agent runs, 3 when it does not (as systemctl status), 1 without a
  status file.
";

/// Exit code when the agent is not running (`systemctl status` uses 3 for inactive units).
const EXIT_NOT_RUNNING: i32 = 3;

pub(crate) fn cmd_status(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["json", "help"], &["root"])?;
    if a.flag("help") {
        print!("{STATUS_HELP}");
        return Ok(0);
    }
    let paths = crate::cli::device_paths(&a)?;
    let path = crate::agent::status::path(&paths);
    let Some(report) = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<StatusReport>(&b).ok())
    else {
        eprintln!(
            "svc-agent status: no status at {} (has the agent ever run?)",
            path.display()
        );
        return Ok(1);
    };
    let live = Live {
        agent: is_running(report.agent.pid, "svc-agent"),
        server: report
            .svc_server
            .pid
            .is_some_and(|p| is_running(p, "svc-server")),
    };
    if a.flag("json") {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        print!("{}", render(&report, live, unix_now()));
    }
    Ok(if live.agent { 0 } else { EXIT_NOT_RUNNING })
}

const HAWKBIT_HELP: &str = "\
usage: svc-agent hawkbit confirm|decline [--action ID] [--root DIR]
  Consent before install (hawkBit's confirmationBase, docs/hawkbit.md): confirm or decline
  the action the update server sent for confirmation (`svc-agent status` names it). With
  --action, only that action is decided; another one waiting is an error. The running
  agent is woken (SIGHUP) and tells the server at once.
  Exit 0 when decided, 1 when no such action waits.
";

/// `svc-agent hawkbit confirm|decline [--action ID]`.
pub(crate) fn cmd_hawkbit(rest: &[String]) -> Result<i32, UsageError> {
    let (verb, rest) = match rest.split_first() {
        Some((v, r)) if !v.starts_with('-') => (v.as_str(), r),
        _ => ("", rest),
    };
    if verb == "join" {
        return cmd_hawkbit_join(rest);
    }
    let a = Args::parse(rest, &["help"], &["root", "action"])?;
    if a.flag("help") || verb.is_empty() {
        print!("{HAWKBIT_HELP}");
        return Ok(if a.flag("help") {
            0
        } else {
            crate::cli::EXIT_USAGE
        });
    }
    use crate::hawkbit::consent::{decide, Decision};
    let decision = match verb {
        "confirm" => Decision::Confirmed,
        "decline" => Decision::Denied,
        other => {
            return Err(UsageError(format!(
                "unknown hawkbit command {other:?}: confirm or decline"
            )))
        }
    };
    let paths = crate::cli::device_paths(&a)?;
    match decide(&paths, a.value("action"), decision) {
        Ok(c) => {
            println!("action {}: {}", c.action, decision.word());
            // Wake the running agent: a SIGHUP makes it poll at once.
            wake_agent(&paths);
            Ok(0)
        }
        Err(e) => {
            eprintln!("svc-agent hawkbit {verb}: {e}");
            Ok(1)
        }
    }
}

/// `svc-agent hawkbit join ...` (`cli::hawkbit_join`).
fn cmd_hawkbit_join(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(
        rest,
        &["help", "auto-confirm"],
        &[
            "root",
            "url",
            "tenant",
            "controller-id",
            "token-file",
            "auth",
            "board",
        ],
    )?;
    if a.flag("help") {
        print!("{}", super::hawkbit_join::HELP);
        return Ok(0);
    }
    let paths = crate::cli::device_paths(&a)?;
    let get = |k: &str| a.value(k).map(str::to_string);
    match super::hawkbit_join::run(&paths, &get, a.flag("auto-confirm")) {
        Ok(done) => {
            println!("{done}");
            wake_agent(&paths);
            Ok(0)
        }
        Err(e) => {
            eprintln!("svc-agent hawkbit join: {e}");
            Ok(1)
        }
    }
}

/// A SIGHUP to the running agent (named by its status file): it re-reads its files and
/// polls at once.
fn wake_agent(paths: &crate::paths::Paths) {
    let pid = std::fs::read(crate::agent::status::path(paths))
        .ok()
        .and_then(|b| serde_json::from_slice::<StatusReport>(&b).ok())
        .map(|r| r.agent.pid)
        .filter(|p| is_running(*p, "svc-agent"));
    if let Some(pid) = pid {
        crate::sys::kill(pid as i32, libc::SIGHUP);
    }
}

/// Whether the processes the status file names are running now.
#[derive(Debug, Clone, Copy)]
struct Live {
    agent: bool,
    server: bool,
}

/// `pid` is alive and is the named program (its `comm` starts with the name: a self-updated
/// agent runs as `svc-agent-<version>`), not an unrelated process that got the pid.
fn is_running(pid: u32, name: &str) -> bool {
    let Ok(p) = i32::try_from(pid) else {
        return false;
    };
    if !crate::process::alive(p) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(comm) => comm.trim().starts_with(&name[..name.len().min(15)]),
        // No /proc: trust the pid check.
        Err(_) => true,
    }
}

/// The human status: a headline per process, then indented detail lines.
fn render(r: &StatusReport, live: Live, now: u64) -> String {
    let mut out = String::new();
    let ago = |t: u64| human_duration(now.saturating_sub(t));
    let a = &r.agent;
    if live.agent {
        out += &format!(
            "● svc-agent {} ({}): active (running) since {}; {} ago\n    Main PID: {}\n",
            a.version,
            a.target,
            utc(a.started_at),
            ago(a.started_at),
            a.pid
        );
    } else {
        out += &format!(
            "○ svc-agent {} ({}): inactive (not running; pid {} is gone)\n    The lines below are its last report, from before it stopped.\n",
            a.version, a.target, a.pid
        );
    }
    let s = &r.svc_server;
    let version = s.version.as_deref().unwrap_or("(version unknown)");
    if !s.managed {
        out += &format!("○ svc-server {version}: not managed (disable_subsystem)\n");
    } else if live.server {
        let pid = s.pid.unwrap_or_default();
        let since = s
            .started_at
            .map(|t| format!(" since {}; {} ago", utc(t), ago(t)))
            .unwrap_or_default();
        out += &format!(
            "● svc-server {version}: active (running){since}\n    Main PID: {pid}, restarts: {}\n",
            s.restarts
        );
    } else {
        out += &format!(
            "○ svc-server {version}: {}, restarts: {}\n",
            if live.agent {
                s.state.as_str()
            } else {
                "not running"
            },
            s.restarts
        );
    }
    out += &match r.last_contact {
        Some(t) => format!("    Server: last contact {} ago\n", ago(t)),
        None => "    Server: never contacted\n".to_string(),
    };
    if let Some(e) = &r.last_error {
        out += &format!("    Last error: {e}\n");
    }
    for e in &r.config_errors {
        out += &format!("    Config rejected: {e}\n");
    }
    for (name, rec) in &r.versions.0 {
        let mut line = format!(
            "    Versions of {name}: {}",
            rec.current.as_deref().unwrap_or("none")
        );
        if let Some(p) = &rec.previous {
            line += &format!(", previous {p}");
        }
        if let Some(t) = rec
            .target
            .as_ref()
            .filter(|t| Some(*t) != rec.current.as_ref())
        {
            line += &format!(", updating to {t}");
        }
        if !rec.bad.is_empty() {
            line += &format!(", rolled back: {}", rec.bad.join(" "));
        }
        out += &line;
        out.push('\n');
    }
    if let Some(b) = &r.budget {
        for (name, w) in &b.waiting {
            out += &format!(
                "    Byte budget: {name} {} waits until {} (in {}): it needs {} bytes, {} are left\n",
                w.version,
                utc(w.until),
                human_duration(w.until.saturating_sub(now)),
                w.bytes,
                w.left
            );
        }
    }
    for (name, v) in &r.subsystems {
        for line in subsystem_lines(v) {
            out += &format!("    {name}: {line}\n");
        }
    }
    out
}

/// A subsystem's status object in words: its state (and reason), or one line per setting
/// (agent-syscfg), with warnings.
fn subsystem_lines(v: &Value) -> Vec<String> {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let with_reason = |v: &Value| {
        let state = text(v, "state").unwrap_or_else(|| "unknown".into());
        match text(v, "reason") {
            Some(r) => format!("{state} ({r})"),
            None => state,
        }
    };
    if let Some(settings) = v.get("settings").and_then(Value::as_array) {
        let mut lines = Vec::new();
        for s in settings {
            let mut line = format!(
                "{} {}",
                text(s, "setting").unwrap_or_default(),
                with_reason(s)
            );
            if let Some(d) = text(s, "detail").filter(|d| !d.is_empty()) {
                line += &format!(": {d}");
            }
            lines.push(line);
            for w in s
                .get("warnings")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                lines.push(format!("warning: {}", w.as_str().unwrap_or_default()));
            }
        }
        return lines;
    }
    if v.get("state").is_some() {
        return vec![with_reason(v)];
    }
    vec![v.to_string()]
}

/// `YYYY-MM-DD HH:MM:SS UTC`.
fn utc(t: u64) -> String {
    let stamp = crate::logging::format_timestamp_ms(t.saturating_mul(1000));
    format!("{} UTC", stamp[..19].replacen('T', " ", 1))
}

/// `44s`, `3min 5s`, `2h 10min`, `3d 4h`.
fn human_duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}min {s}s"),
        (0, _, _) => format!("{h}h {m}min"),
        _ => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report() -> StatusReport {
        serde_json::from_value(json!({
            "agent": {"version": "0.1.0", "target": "x86_64", "pid": 100, "uptime_secs": 0,
                      "started_at": 1_000, "fast_start": false},
            "svc_server": {"version": "1.2.3", "installed": true, "running": true,
                           "state": "running", "pid": 200, "uptime_secs": null,
                           "started_at": 1_010, "restarts": 2, "managed": true},
            "host": {"os": "linux", "distro": "", "arch": "x86_64", "kernel": "", "hostname": ""},
            "config_errors": [], "done_commands": [], "last_contact": 1_040,
            "last_error": null,
            "subsystems": {
                "agent-syscfg": {"settings": [
                    {"setting": "logging", "state": "applied", "detail": "journal at most 64M",
                     "changed": [], "warnings": ["journald not restarted"]},
                    {"setting": "upgrades", "state": "unsupported", "reason": "no apt",
                     "detail": "", "changed": [], "warnings": []}],
                    "services": []},
                "agent-provisioning": {"state": "idle", "reason": "no Wi-Fi device"}
            },
            "versions": {"svc-server": {"current": "1.2.3", "previous": "1.2.2",
                                        "target": "1.2.3", "bad": ["1.3.0"]}},
            "budget": {"day_limit": 1000, "month_limit": null, "waiting": {"svc-agent":
                {"version": "2.0.0", "bytes": 3_000, "left": 40, "until": 86_400}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_running_agent_reads_like_systemctl_status_and_subsystems_are_words() {
        let out = render(
            &report(),
            Live {
                agent: true,
                server: true,
            },
            1_044,
        );
        assert!(
            out.starts_with("● svc-agent 0.1.0 (x86_64): active (running) since 1970-01-01 00:16:40 UTC; 44s ago\n    Main PID: 100\n"),
            "{out}"
        );
        assert!(
            out.contains("● svc-server 1.2.3: active (running) since 1970-01-01 00:16:50 UTC; 34s ago\n    Main PID: 200, restarts: 2\n"),
            "{out}"
        );
        assert!(out.contains("    Server: last contact 4s ago\n"), "{out}");
        assert!(
            out.contains("    Versions of svc-server: 1.2.3, previous 1.2.2, rolled back: 1.3.0\n"),
            "{out}"
        );
        assert!(
            out.contains("    agent-syscfg: logging applied: journal at most 64M\n    agent-syscfg: warning: journald not restarted\n    agent-syscfg: upgrades unsupported (no apt)\n"),
            "{out}"
        );
        assert!(
            out.contains("    agent-provisioning: idle (no Wi-Fi device)\n"),
            "{out}"
        );
        assert!(
            out.contains("    Byte budget: svc-agent 2.0.0 waits until 1970-01-02 00:00:00 UTC (in 23h 42min): it needs 3000 bytes, 40 are left\n"),
            "{out}"
        );
        assert!(!out.contains('{'), "raw JSON in the human status: {out}");
    }

    #[test]
    fn a_stopped_agent_is_shown_as_not_running_whatever_its_file_says() {
        let out = render(
            &report(),
            Live {
                agent: false,
                server: false,
            },
            5_000,
        );
        assert!(
            out.starts_with("○ svc-agent 0.1.0 (x86_64): inactive (not running; pid 100 is gone)"),
            "{out}"
        );
        assert!(!out.contains("Main PID"), "{out}");
        assert!(!out.contains("up "), "{out}");
        assert!(
            out.contains("○ svc-server 1.2.3: not running, restarts: 2\n"),
            "{out}"
        );
    }

    #[test]
    fn durations_read_like_systemd() {
        assert_eq!(human_duration(44), "44s");
        assert_eq!(human_duration(185), "3min 5s");
        assert_eq!(human_duration(7_800), "2h 10min");
        assert_eq!(human_duration(273_600), "3d 4h");
    }
}
