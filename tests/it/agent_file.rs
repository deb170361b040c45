//! The real `svc-agent run` against a file:// management directory: first contact, config
//! change, rejected config, commands, offline boot from cache, stop.
use crate::common;
use common::sandbox::*;
use serde_json::json;

fn config(module_env: &str) -> serde_json::Value {
    json!({
        "modules": [{"type": "local", "name": "tool", "module_id": "lab:tool",
                     "executable_path": "/bin/true", "env": {"MODE": module_env}}],
        "agent": {"svc-server": {"release_channel": "stable"}}
    })
}

#[test]
fn first_contact_config_change_and_clean_stop() {
    let sb = Sandbox::new("first-contact");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"config": config("one"), "poll_interval_secs": 1}));
    let mut agent = sb.spawn_agent(&[]);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    let cached = std::fs::read_to_string(sb.root.join("opt/svc/config.json")).unwrap();
    assert!(cached.contains("\"one\""), "{cached}");
    assert!(sb.fake("args").contains("--config"), "{}", sb.fake("args"));
    assert!(sb.fake("env").contains("SVC_HOME="));
    // svc-server finds registry modules beside the app's other files.
    let registry = format!("SVC_REGISTRY=file://{}/registry\n", sb.app.display());
    assert!(sb.fake("env").contains(&registry), "{}", sb.fake("env"));
    // The status report reaches the management directory.
    wait_for("status in the app dir", 30, || {
        std::fs::read_to_string(sb.app.join("status.json"))
            .is_ok_and(|s| s.contains("\"running\": true"))
    });

    sb.answer(json!({"config": config("two"), "poll_interval_secs": 1}));
    wait_for("svc-server to get SIGHUP", 30, || {
        sb.fake("events").contains("hup")
    });
    assert!(std::fs::read_to_string(sb.root.join("opt/svc/config.json"))
        .unwrap()
        .contains("\"two\""));
    assert!(sb.log().contains("config applied"), "{}", sb.log());

    let pid: i32 = sb
        .fake("pids")
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let st = terminate(&mut agent);
    assert!(st.success(), "agent exit {st:?}\n{}", sb.log());
    assert!(
        sb.fake("events").contains("term"),
        "svc-server was not stopped with SIGTERM"
    );
    assert!(!pid_alive(pid), "svc-server {pid} outlived the agent");
}

#[test]
fn invalid_config_is_rejected_and_the_last_good_one_kept() {
    let sb = Sandbox::new("reject");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"config": config("good"), "poll_interval_secs": 1}));
    let mut agent = sb.spawn_agent(&[]);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    let mut bad = config("bad");
    bad["modules"][0]["version"] = json!("1.2");
    bad["agent"]["svc-server"]["release_channel"] = json!("nightly");
    sb.answer(json!({"config": bad, "poll_interval_secs": 1}));
    wait_for("the rejection in status", 30, || {
        sb.status()["config_errors"]
            .as_array()
            .is_some_and(|e| e.len() == 2)
    });
    let errors = sb.status()["config_errors"].clone();
    assert_eq!(errors[0]["path"], "/modules/0/version", "{errors}");
    assert_eq!(errors[1]["path"], "/agent/svc-server/release_channel");
    assert!(std::fs::read_to_string(sb.root.join("opt/svc/config.json"))
        .unwrap()
        .contains("\"good\""));
    assert!(sb.log().contains("config rejected"));
    assert!(
        !sb.fake("events").contains("hup"),
        "a rejected config must not reach svc-server"
    );
    terminate(&mut agent);
}

#[test]
fn restart_command_is_carried_out_once() {
    let sb = Sandbox::new("command");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"config": config("x"), "poll_interval_secs": 1}));
    let mut agent = sb.spawn_agent(&[]);
    wait_for("svc-server to start", 60, || {
        sb.fake("pids").lines().count() == 1
    });
    sb.answer(json!({"config": config("x"), "poll_interval_secs": 1,
                     "commands": [{"id": "c-1", "kind": "restart-svc-server"}]}));
    wait_for("a second svc-server", 30, || {
        sb.fake("pids").lines().count() == 2
    });
    wait_for("the command acknowledged", 30, || {
        sb.status()["done_commands"] == json!(["c-1"])
    });
    // Further polls deliver the same command: it is not carried out again. Three more
    // polls: the last one began after the two before it were handled whole.
    sb.wait_polls(3, 60);
    assert_eq!(
        sb.fake("pids").lines().count(),
        2,
        "restart repeated:\n{}",
        sb.log()
    );
    terminate(&mut agent);
}

#[test]
fn offline_boot_runs_from_the_cache() {
    let sb = Sandbox::new("offline");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"config": config("cached"), "poll_interval_secs": 1}));
    let mut agent = sb.spawn_agent(&[]);
    wait_for("first run", 60, || !sb.fake("pids").is_empty());
    terminate(&mut agent);
    // The app is gone: the next boot starts svc-server with the cached config anyway.
    std::fs::remove_file(sb.app.join("poll.json")).unwrap();
    let before = sb.fake("pids").lines().count();
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_FAST_START", "1")]);
    wait_for("svc-server from cache", 30, || {
        sb.fake("pids").lines().count() > before
    });
    assert!(std::fs::read_to_string(sb.root.join("opt/svc/config.json"))
        .unwrap()
        .contains("\"cached\""));
    wait_for("the poll failure logged", 30, || {
        sb.log().contains("poll failed")
    });
    terminate(&mut agent);
}

#[test]
fn a_second_agent_on_the_same_machine_is_refused() {
    let sb = Sandbox::new("single");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"config": config("x"), "poll_interval_secs": 1}));
    let mut first = sb.spawn_agent(&[("SVC_AGENT_FAST_START", "1")]);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    // With fast start the first agent names itself in the lock file right after svc-server's
    // start (docs/agent.md); the lock itself is held from before.
    let lock = sb.root.join("opt/svc/agent.lock");
    wait_for("the lock file to name the first agent", 30, || {
        std::fs::read_to_string(&lock).is_ok_and(|t| t.trim() == first.id().to_string())
    });
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_svc-agent"))
        .args(["run", "--root", sb.root.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains(&format!("already running (pid {}", first.id())),
        "{err}"
    );
    terminate(&mut first);
}

/// Fast start moves the housekeeping after svc-server's start (docs/agent.md, start-up):
/// it still happens, and it still spares a live process's temps, svc-server's home included.
#[test]
fn fast_start_still_names_the_holder_and_sweeps_stale_temps_after_svc_server_starts() {
    let sb = Sandbox::new("fast-housekeeping");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"config": config("x"), "poll_interval_secs": 1}));
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let state = sb.root.join("opt/svc");
    let home = state.join("home");
    std::fs::create_dir_all(&home).unwrap();
    // An old agent's longer lock file content is replaced, not appended to.
    std::fs::write(state.join("agent.lock"), "4194303 left by an older agent\n").unwrap();
    let stale = [
        state.join(format!(".answer.json.tmp.{dead_pid}.1")),
        home.join(format!(".record.json.tmp.{dead_pid}.4")),
    ];
    let live = home.join(format!(".record.json.tmp.{}.2", std::process::id()));
    for f in stale.iter().chain([&live]) {
        std::fs::write(f, b"{\"torn").unwrap();
    }
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_FAST_START", "1")]);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    let lock = state.join("agent.lock");
    wait_for("the lock file to name the agent", 30, || {
        std::fs::read_to_string(&lock).is_ok_and(|t| t.trim() == agent.id().to_string())
    });
    wait_for("the stale temps removed", 30, || {
        stale.iter().all(|f| !f.exists())
    });
    assert!(live.exists(), "a live process's temp was removed");
    terminate(&mut agent);
}

/// Fast start reads the cached answer, the host's details and the app's address only after
/// svc-server's start (docs/agent.md, start-up): they are all still taken into use.
#[test]
fn fast_start_still_takes_the_cached_answer_and_the_host_into_use() {
    let sb = Sandbox::new("fast-deferred");
    sb.file_app();
    sb.install_fake_server();
    // The app has no answer (offline); the last run's answer is cached.
    let cached = json!({"etag": null, "targets": {}, "poll_interval_secs": 1,
                        "done_commands": ["earlier-1"], "last_contact": 1234});
    std::fs::write(
        sb.root.join("opt/svc/answer.json"),
        serde_json::to_vec(&cached).unwrap(),
    )
    .unwrap();
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_FAST_START", "1")]);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    wait_for("a status with the cached answer and the host", 30, || {
        let s = sb.status();
        s["done_commands"] == json!(["earlier-1"])
            && s["last_contact"] == json!(1234)
            && s["host"]["kernel"].as_str().is_some_and(|k| !k.is_empty())
    });
    wait_for("the app named in the log", 30, || {
        sb.log().contains("management app: file://")
    });
    terminate(&mut agent);
}

/// With fast start the agent installs its signal handlers only after svc-server's start,
/// with a handler that only notes a stop request from before (docs/agent.md, start-up): a
/// SIGTERM that arrives in between (here sent by the agent to itself through a test hook,
/// right after the spawn) is honoured as any other: svc-server is stopped, the agent exits
/// 0. Without that handler it would end the agent by its default action and leave
/// svc-server behind; taken in by nothing, it would be lost and the agent would run on.
#[test]
fn fast_start_a_sigterm_before_the_signal_handlers_is_honoured() {
    let sb = Sandbox::new("fast-early-term");
    sb.file_app();
    sb.install_fake_server();
    let mut agent = sb.spawn_agent(&[
        ("SVC_AGENT_FAST_START", "1"),
        ("SVC_TEST_SIGNAL_AT", "svc-server-started"),
    ]);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let st = loop {
        if let Some(st) = agent.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > end {
            let _ = agent.kill();
            panic!("the agent did not stop on its early SIGTERM\n{}", sb.log());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let log = sb.log();
    assert!(st.success(), "agent exit {st:?}\n{log}");
    // svc-server was started, then stopped by the agent (it may not have got as far as
    // writing its own files: the SIGTERM came at once).
    let pid: i32 = log
        .split("svc-server started pid=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("svc-server was not started\n{log}"));
    assert!(log.contains("svc-agent stopping"), "{log}");
    assert!(
        log.contains(&format!("svc-server stopped pid={pid}")),
        "{log}"
    );
    assert!(!pid_alive(pid), "svc-server {pid} outlived the agent");
}

/// svc-server gets the agent's environment without systemd's notify socket and watchdog
/// variables (any name with those prefixes), with its own variables set over any the agent
/// was given, and with everything else inherited.
#[test]
fn svc_server_environment_is_the_agents_with_its_own_variables() {
    let sb = Sandbox::new("server-env");
    sb.file_app();
    sb.install_fake_server();
    let mut agent = sb.spawn_agent(&[
        ("SVC_AGENT_FAST_START", "1"),
        ("NOTIFY_SOCKET", "/run/systemd/notify"),
        ("NOTIFY_SOCKET_EXTRA", "x"),
        ("WATCHDOG_USEC", "30000000"),
        ("WATCHDOG_PID", "1"),
        ("SVC_HOME", "/elsewhere"),
        ("SVC_CONFIG_FILE", "/elsewhere/config.json"),
        ("SVC_LOG_PRIORITY_PREFIX", "0"),
        ("SVC_TEST_INHERITED", "kept value"),
    ]);
    // The stand-in writes its environment before its pid.
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    let env = sb.fake("env");
    let has = |line: &str| env.lines().any(|l| l == line);
    let named = |name: &str| env.lines().any(|l| l.starts_with(&format!("{name}=")));
    for gone in [
        "NOTIFY_SOCKET",
        "NOTIFY_SOCKET_EXTRA",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
    ] {
        assert!(!named(gone), "{gone} reached svc-server: {env}");
    }
    let state = sb.root.join("opt/svc");
    assert!(
        has(&format!("SVC_HOME={}", state.join("home").display())),
        "{env}"
    );
    assert!(
        has(&format!(
            "SVC_CONFIG_FILE={}",
            state.join("config.json").display()
        )),
        "{env}"
    );
    assert!(has("SVC_LOG_PRIORITY_PREFIX=1"), "{env}");
    assert!(has("SVC_TEST_INHERITED=kept value"), "{env}");
    assert!(has("SVC_AGENT_FAST_START=1"), "{env}");
    terminate(&mut agent);
}

#[test]
fn disable_subsystem_stops_managing_svc_server_and_status_says_so() {
    let sb = Sandbox::new("disable");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"config": config("x"), "poll_interval_secs": 1}));
    let mut agent = sb.spawn_agent(&[]);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    let pid: i32 = sb.fake("pids").trim().parse().unwrap();
    let mut cfg = config("x");
    cfg["agent"]["svc-server"]["disable_subsystem"] = json!(true);
    sb.answer(json!({"config": cfg, "poll_interval_secs": 1}));
    wait_for("svc-server stopped", 30, || !pid_alive(pid));
    wait_for("status: not managed", 30, || {
        sb.status()["svc_server"]["managed"] == json!(false)
    });
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_svc-agent"))
        .args(["status", "--root", sb.root.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("not managed"),
        "{text}"
    );
    let json_out = std::process::Command::new(env!("CARGO_BIN_EXE_svc-agent"))
        .args(["status", "--json", "--root", sb.root.to_str().unwrap()])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(v["svc_server"]["running"], false);
    assert!(v["last_contact"].is_u64());
    terminate(&mut agent);
    // The status file outlives the agent: status checks the pid, says so, exits 3.
    let after = std::process::Command::new(env!("CARGO_BIN_EXE_svc-agent"))
        .args(["status", "--root", sb.root.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&after.stdout);
    assert_eq!(after.status.code(), Some(3), "{text}");
    assert!(text.contains("inactive (not running"), "{text}");
    assert!(!text.contains("Main PID"), "{text}");
}

#[test]
fn doctor_reports_each_check() {
    let sb = Sandbox::new("doctor");
    sb.file_app();
    sb.answer(json!({}));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        sb.root.join("etc/svc.json"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_svc-agent"))
            .args(["doctor", "--json", "--root", sb.root.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let out = run();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a 0644 credentials file must fail the doctor"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = |name: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(check("credentials")["verdict"], "fail");
    assert!(check("credentials")["detail"]
        .as_str()
        .unwrap()
        .contains("644"));
    assert_eq!(check("clock")["verdict"], "ok");
    assert_eq!(check("app")["verdict"], "ok");
    for name in ["disk", "systemd", "networkmanager", "radio"] {
        assert!(
            ["ok", "warn", "fail"].contains(&check(name)["verdict"].as_str().unwrap()),
            "{name}"
        );
    }
    std::fs::set_permissions(
        sb.root.join("etc/svc.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&run().stdout).unwrap();
    assert_eq!(v["checks"][0]["verdict"], "ok", "{v}");
}

fn shipped(sb: &Sandbox) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(sb.app.join("logs.jsonl")).unwrap_or_default();
    // One record object a line (docs/logs.md); every line complete.
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a complete record line"))
        .inspect(|r| assert!(r["id"].is_u64(), "not a record: {r}"))
        .collect()
}

#[test]
fn logs_reach_the_app_in_order_after_an_outage() {
    let sb = Sandbox::new("logs");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"config": config("a"), "poll_interval_secs": 1}));
    let mut agent = sb.spawn_agent(&[]);
    let has = |sb: &Sandbox, m: &str| {
        shipped(sb)
            .iter()
            .any(|r| r["message"].as_str().is_some_and(|s| s.contains(m)))
    };
    wait_for("svc-server's own output shipped", 60, || {
        has(&sb, "fake svc-server up")
    });
    let rec = shipped(&sb)
        .into_iter()
        .find(|r| {
            r["message"]
                .as_str()
                .unwrap()
                .contains("fake svc-server up")
        })
        .unwrap();
    assert_eq!(rec["subsystem"], "svc-server");
    // The receiver goes away (its log file cannot be opened): lines wait in the queue.
    std::fs::remove_file(sb.app.join("logs.jsonl")).unwrap();
    std::fs::create_dir(sb.app.join("logs.jsonl")).unwrap();
    sb.answer(json!({"config": config("b"), "poll_interval_secs": 1}));
    wait_for("the config change", 30, || {
        sb.fake("events").contains("hup")
    });
    // The outage is real: the shipper tried and kept the lines (it says so once).
    wait_for("the shipper's failure to append", 60, || {
        sb.log().contains("cannot append to")
    });
    std::fs::remove_dir(sb.app.join("logs.jsonl")).unwrap();
    wait_for("the queued lines delivered", 60, || {
        has(&sb, "config applied")
    });
    let ids: Vec<u64> = shipped(&sb)
        .iter()
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "out of order or duplicated: {ids:?}"
    );
    assert!(!std::fs::read_to_string(sb.app.join("logs.jsonl"))
        .unwrap()
        .contains("sandbox-secret-123"));
    terminate(&mut agent);
}

#[test]
fn the_daemon_applies_and_reverts_syscfg_from_the_config() {
    let sb = Sandbox::new("syscfg");
    sb.file_app();
    sb.install_fake_server();
    let mut cfg = config("x");
    cfg["agent"]["agent-syscfg"] = json!({"attributes": {"logging": {"system_max_use": "64M"}}});
    sb.answer(json!({"config": cfg, "poll_interval_secs": 1}));
    // The sandbox is a machine with journald.
    let journald = sb.root.join("usr/lib/systemd/systemd-journald");
    std::fs::create_dir_all(journald.parent().unwrap()).unwrap();
    std::fs::write(&journald, "").unwrap();
    let mut agent = sb.spawn_agent(&[]);
    let dropin = sb
        .root
        .join("etc/systemd/journald.conf.d/60-svc-agent.conf");
    wait_for("the journald drop-in", 60, || {
        std::fs::read_to_string(&dropin).is_ok_and(|t| t.contains("SystemMaxUse=64M"))
    });
    wait_for("syscfg in the status", 30, || {
        sb.status()["subsystems"]["agent-syscfg"]["settings"].is_array()
    });
    cfg["agent"]["agent-syscfg"]["disable_subsystem"] = json!(true);
    sb.answer(json!({"config": cfg, "poll_interval_secs": 1}));
    wait_for("the drop-in reverted", 30, || !dropin.exists());
    terminate(&mut agent);
}

#[test]
fn secrets_in_a_config_reach_neither_the_log_nor_the_app() {
    let sb = Sandbox::new("secrets");
    sb.file_app();
    sb.install_fake_server();
    let mut cfg = config("x");
    cfg["agent"]["agent-provisioning"] = json!({
        "networks": [{"ssid": "home", "psk": "wifi-psk-SECRET-123"}],
        "attributes": {"hotspot_password": "hotspot-SECRET-456"}
    });
    sb.answer(json!({"config": cfg.clone(), "poll_interval_secs": 1}));
    let mut agent = sb.spawn_agent(&[]);
    wait_for("svc-server", 60, || !sb.fake("pids").is_empty());
    // The same secrets inside a config that is rejected (the errors are logged).
    cfg["agent"]["agent-provisioning"]["networks"][0]["priority"] = json!(5000);
    cfg["agent"]["agent-provisioning"]["networks"]
        .as_array_mut()
        .unwrap()
        .push(json!({"ssid": "x", "psk": "short-SECRET"}));
    sb.answer(json!({"config": cfg, "poll_interval_secs": 1}));
    wait_for("the rejection", 30, || sb.log().contains("config rejected"));
    wait_for("logs shipped", 30, || {
        std::fs::read_to_string(sb.app.join("logs.jsonl"))
            .is_ok_and(|l| l.contains("config rejected"))
    });
    let shipped = std::fs::read_to_string(sb.app.join("logs.jsonl")).unwrap();
    for secret in [
        "wifi-psk-SECRET-123",
        "hotspot-SECRET-456",
        "short-SECRET",
        "sandbox-secret-123",
    ] {
        assert!(!sb.log().contains(secret), "{secret} in the agent's log");
        assert!(!shipped.contains(secret), "{secret} in the shipped logs");
        assert!(
            !std::fs::read_to_string(sb.app.join("status.json"))
                .unwrap()
                .contains(secret),
            "{secret} in the status report"
        );
    }
    terminate(&mut agent);
}
