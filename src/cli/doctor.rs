//! `svc-agent doctor`: a pre-flight check of the machine. Human-readable by default,
//! `--json` for tools.
use super::args::{Args, UsageError};
use crate::agent::unix_now;
use crate::credentials::{self, Credentials};
use crate::paths::Paths;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    pub name: &'static str,
    pub verdict: Verdict,
    pub detail: String,
}

fn check(name: &'static str, verdict: Verdict, detail: impl Into<String>) -> Check {
    Check {
        name,
        verdict,
        detail: detail.into(),
    }
}

/// Every pre-flight check, in order.
pub(crate) fn run_checks(paths: &Paths) -> Vec<Check> {
    let mut out = Vec::new();
    let creds_path = paths.credentials();
    let creds = Credentials::load(paths);
    let hawkbit = crate::agent::cache::load_config(paths).and_then(|(c, _)| c.agent.agent.hawkbit);
    out.push(match (&creds, credentials::file_mode(&creds_path)) {
        // A hawkBit-only device has no management app and needs no credentials.
        (Err(credentials::CredentialsError::Missing(_)), _) if hawkbit.is_some() => check(
            "credentials",
            Verdict::Ok,
            "none: the update server is hawkBit (the config's agent.svc-agent.hawkbit)",
        ),
        (Ok(_), Some(0o600)) => check(
            "credentials",
            Verdict::Ok,
            format!("{} readable, mode 0600", creds_path.display()),
        ),
        (Ok(_), Some(m)) => check(
            "credentials",
            Verdict::Fail,
            format!(
                "{} has mode {m:o}: must be 0600 (chmod 600)",
                creds_path.display()
            ),
        ),
        (Ok(_), None) => check("credentials", Verdict::Warn, "readable, mode unknown"),
        (Err(e), _) => check("credentials", Verdict::Fail, e.to_string()),
    });
    let built: u64 = env!("SVC_BUILD_EPOCH").parse().unwrap_or(0);
    out.push(if unix_now() >= built {
        check("clock", Verdict::Ok, format!("{} UTC", crate::logging::timestamp()))
    } else {
        check("clock", Verdict::Fail, "the clock is before this agent's build date: TLS will fail until time is synced (timedatectl)")
    });
    if let Ok(c) = &creds {
        out.extend(app_checks(&c.app_address));
    }
    if let Some(h) = &hawkbit {
        out.extend(hawkbit_checks(paths, h));
    }
    out.push(
        match crate::dirtrust::secure(paths, crate::dirtrust::Mode::Check) {
            Ok(_) => check(
                "dir-trust",
                Verdict::Ok,
                "the state and credentials directories are root's, writable by no one else",
            ),
            Err(e) => check("dir-trust", Verdict::Fail, e.to_string()),
        },
    );
    out.push(disk_check(&paths.state_dir()));
    out.extend(writable_checks(paths, &|p| {
        crate::sys::on_read_only_mount(p).unwrap_or(false)
    }));
    out.push(if paths.device("/run/systemd/system").is_dir() {
        check("systemd", Verdict::Ok, "systemd is the init system")
    } else {
        check(
            "systemd",
            Verdict::Warn,
            "systemd is not running as PID 1: svc-agent install cannot enable the service",
        )
    });
    out.push(match which("nmcli") {
        Some(p) => check("networkmanager", Verdict::Ok, format!("{}", p.display())),
        None => check(
            "networkmanager",
            Verdict::Warn,
            "nmcli not found: agent-provisioning cannot manage Wi-Fi",
        ),
    });
    out.push(radio_check());
    out.extend(hotspot_check(paths));
    out
}

/// The manufacturer's hotspot password (`/etc/svc-defaults.json`), when it sets one: a
/// short or well-known one keeps the provisioning hotspot off (a config may still set
/// another, so a warning).
fn hotspot_check(paths: &Paths) -> Option<Check> {
    let attrs = crate::provisioning::manufacturer::load_defaults(paths).ok()?;
    let pw = attrs.hotspot_password?;
    Some(
        match crate::provisioning::defaults::hotspot_password_problem(&pw) {
            Some(why) => check("hotspot", Verdict::Warn, why),
            None => check(
                "hotspot",
                Verdict::Ok,
                "the manufacturer's hotspot password is fit for a hotspot",
            ),
        },
    )
}

/// The hawkBit backend the cached config names (docs/hawkbit.md): its token file (mode
/// 0600, one printable token), the server's name and TLS, the server's answer to the
/// token, and the backend the daemon then runs.
fn hawkbit_checks(paths: &Paths, h: &crate::config::model::HawkbitSettings) -> Vec<Check> {
    let token = paths.hawkbit_token();
    let mut out = vec![match credentials::file_mode(&token) {
        Some(0o600) => match crate::hawkbit::load_token(paths) {
            Ok(_) => check(
                "hawkbit-token",
                Verdict::Ok,
                format!("{} readable, mode 0600", token.display()),
            ),
            Err(e) => check("hawkbit-token", Verdict::Fail, e.to_string()),
        },
        Some(m) => check(
            "hawkbit-token",
            Verdict::Fail,
            format!(
                "{} has mode {m:o}: must be 0600 (chmod 600)",
                token.display()
            ),
        ),
        None => check(
            "hawkbit-token",
            Verdict::Fail,
            format!(
                "no token file at {}: the agent keeps its management app (svc-agent hawkbit join)",
                token.display()
            ),
        ),
    }];
    if out[0].verdict == Verdict::Fail {
        return out;
    }
    out.extend(app_checks(&h.server_url).into_iter().map(|c| Check {
        name: if c.name == "dns" {
            "hawkbit-dns"
        } else {
            "hawkbit-tls"
        },
        ..c
    }));
    out.push(match crate::hawkbit::probe(paths, h) {
        Ok(said) => check("hawkbit", Verdict::Ok, said),
        Err(e) => check("hawkbit", Verdict::Fail, e),
    });
    out.push(check(
        "backend",
        Verdict::Ok,
        format!(
            "Eclipse hawkBit DDI at {} (tenant {}, controller {})",
            h.server_url, h.tenant, h.controller_id
        ),
    ));
    out
}

fn which(cmd: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(cmd))
        .find(|p| p.is_file())
}

fn app_checks(addr: &str) -> Vec<Check> {
    let Some(rest) = addr
        .strip_prefix("https://")
        .or_else(|| addr.strip_prefix("http://"))
    else {
        let dir = addr.trim_start_matches("file://");
        return vec![if std::path::Path::new(dir).join("poll.json").is_file() {
            check("app", Verdict::Ok, format!("management directory {dir}"))
        } else {
            check(
                "app",
                Verdict::Fail,
                format!("no poll.json in the management directory {dir}"),
            )
        }];
    };
    let hostport = rest.split('/').next().unwrap_or("");
    let with_port = if hostport.contains(':') {
        hostport.to_string()
    } else if addr.starts_with("https") {
        format!("{hostport}:443")
    } else {
        format!("{hostport}:80")
    };
    let mut out = Vec::new();
    use std::net::ToSocketAddrs;
    match with_port.to_socket_addrs() {
        Ok(mut a) => match a.next() {
            Some(ip) => out.push(check(
                "dns",
                Verdict::Ok,
                format!("{hostport} is {}", ip.ip()),
            )),
            None => out.push(check(
                "dns",
                Verdict::Fail,
                format!("{hostport} has no address"),
            )),
        },
        Err(e) => {
            out.push(check(
                "dns",
                Verdict::Fail,
                format!("cannot resolve {hostport}: {e}"),
            ));
            return out;
        }
    }
    // Any HTTP answer means the TLS handshake and certificate check passed.
    // The body is never read: only the status line and headers come in.
    match crate::http::get(addr, 10).send() {
        Ok(r) => out.push(check(
            "tls",
            Verdict::Ok,
            format!("{addr} answered HTTP {}", r.status()),
        )),
        Err(e) => out.push(check("tls", Verdict::Fail, format!("{addr}: {e}"))),
    }
    out
}

/// What the agent must (or may want to) write, on a read-only mount: the state directory
/// (fail: no update, no log queue), the credentials directory (the portal cannot save
/// credentials), the Wi-Fi keyfiles' and agent-syscfg's directories (warnings: those
/// features report their own status). docs/packaging.md "Read-only root file systems".
fn writable_checks(paths: &Paths, read_only: &dyn Fn(&std::path::Path) -> bool) -> Vec<Check> {
    let state = paths.state_dir();
    let mut out = vec![if read_only(&state) {
        check(
            "state-dir",
            Verdict::Fail,
            format!(
                "{} is on a read-only mount: versions, updates, the log queue and records cannot be written (set SVC_STATE_DIR to a directory on a writable data partition)",
                state.display()
            ),
        )
    } else {
        check(
            "state-dir",
            Verdict::Ok,
            format!("{} is writable", state.display()),
        )
    }];
    let creds = paths.device(paths.credentials_dir_device_path());
    if read_only(&creds) {
        out.push(check(
            "credentials-dir",
            Verdict::Warn,
            format!(
                "{} is on a read-only mount: credentials from the portal cannot be saved (set SVC_CREDENTIALS_DIR to a directory on a writable data partition)",
                creds.display()
            ),
        ));
    }
    for (name, dir, what) in [
        (
            "wifi-keyfiles",
            "/etc/NetworkManager/system-connections",
            "Wi-Fi networks joined through the portal are not saved (bind-mount the directory from the data partition)",
        ),
        (
            "syscfg-dropins",
            "/etc/systemd/journald.conf.d",
            "agent-syscfg's journald and upgrade drop-ins report read-only (bake the settings into the image)",
        ),
    ] {
        let p = paths.device(dir);
        if read_only(&p) {
            out.push(check(name, Verdict::Warn, format!("{} is on a read-only mount: {what}", p.display())));
        }
    }
    out
}

fn disk_check(dir: &std::path::Path) -> Check {
    let probe = std::iter::successors(Some(dir), |p| p.parent()).find(|p| p.exists());
    let Some(free) = probe.and_then(|p| crate::sys::free_bytes(p).ok()) else {
        return check(
            "disk",
            Verdict::Warn,
            "cannot read the free space of the state directory's file system",
        );
    };
    let mib = free / (1024 * 1024);
    // Two binaries of a few MiB plus the log queue's cap need room.
    if mib < 64 {
        check(
            "disk",
            Verdict::Fail,
            format!(
                "{mib} MiB free under {}: updates need at least 64 MiB",
                dir.display()
            ),
        )
    } else {
        check(
            "disk",
            Verdict::Ok,
            format!("{mib} MiB free under {}", dir.display()),
        )
    }
}

fn radio_check() -> Check {
    let phys: Vec<_> = std::fs::read_dir("/sys/class/ieee80211")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if phys.is_empty() {
        return check(
            "radio",
            Verdict::Warn,
            "no Wi-Fi radio: the provisioning hotspot is not possible",
        );
    }
    let ap = which("iw").and_then(|iw| {
        let mut cmd = std::process::Command::new(iw);
        cmd.arg("list");
        crate::process::run(cmd, std::time::Duration::from_secs(10)).ok()
    });
    match ap {
        Some(o)
            if String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == "* AP") =>
        {
            check(
                "radio",
                Verdict::Ok,
                format!("{} can run an access point", phys.join(", ")),
            )
        }
        Some(_) => check(
            "radio",
            Verdict::Warn,
            format!("{}: no AP mode reported by iw", phys.join(", ")),
        ),
        None => check(
            "radio",
            Verdict::Warn,
            format!("{} present; iw not found to check AP mode", phys.join(", ")),
        ),
    }
}

const DOCTOR_HELP: &str = "\
usage: svc-agent doctor [--json] [--root DIR]
  Pre-flight checks: credentials readable and 0600, clock sane, DNS and TLS to the app,
  free disk, systemd, NetworkManager, an AP-capable radio. Exit 1 when any check fails.
";

pub(crate) fn cmd_doctor(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["json", "help"], &["root"])?;
    if a.flag("help") {
        print!("{DOCTOR_HELP}");
        return Ok(0);
    }
    let paths = crate::cli::device_paths(&a)?;
    let checks = run_checks(&paths);
    let failed = checks.iter().any(|c| c.verdict == Verdict::Fail);
    if a.flag("json") {
        println!("{}", serde_json::json!({"ok": !failed, "checks": checks}));
    } else {
        for c in &checks {
            let mark = match c.verdict {
                Verdict::Ok => "ok  ",
                Verdict::Warn => "warn",
                Verdict::Fail => "FAIL",
            };
            println!("[{mark}] {:15} {}", c.name, c.detail);
        }
    }
    Ok(if failed { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_directory_on_a_read_only_mount_fails_the_doctor() {
        let paths = Paths::new("/sandbox")
            .with_locations(Some("/data/svc"), Some("/data/etc"))
            .unwrap();
        let all_writable = writable_checks(&paths, &|_| false);
        assert_eq!(all_writable.len(), 1, "{all_writable:?}");
        assert_eq!(all_writable[0].verdict, Verdict::Ok);
        // A read-only root with the data partition not mounted: everything lands on /.
        let c = writable_checks(&paths, &|_| true);
        let by = |n: &str| c.iter().find(|c| c.name == n).unwrap();
        assert_eq!(by("state-dir").verdict, Verdict::Fail);
        assert!(by("state-dir")
            .detail
            .contains("/sandbox/data/svc is on a read-only mount"));
        assert_eq!(by("credentials-dir").verdict, Verdict::Warn);
        assert_eq!(by("wifi-keyfiles").verdict, Verdict::Warn);
        assert_eq!(by("syscfg-dropins").verdict, Verdict::Warn);
        // Only the root is read-only, the data partition is not.
        let c = writable_checks(&paths, &|p| !p.starts_with("/sandbox/data"));
        assert_eq!(c[0].verdict, Verdict::Ok);
        assert!(c.iter().all(|c| c.name != "credentials-dir"));
    }

    #[test]
    fn a_well_known_hotspot_password_is_reported() {
        let dir = std::env::temp_dir().join(format!("svc-doctor-hot-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        let paths = Paths::new(&dir);
        assert!(
            hotspot_check(&paths).is_none(),
            "no defaults file: nothing to say"
        );
        for (pw, verdict) in [
            ("change-me-per-device", Verdict::Warn),
            ("q7-Rt2mKx9pL", Verdict::Ok),
        ] {
            std::fs::write(
                dir.join("etc/svc-defaults.json"),
                format!(r#"{{"hotspot_password": "{pw}"}}"#),
            )
            .unwrap();
            let c = hotspot_check(&paths).unwrap();
            assert_eq!(c.verdict, verdict, "{pw}: {}", c.detail);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
