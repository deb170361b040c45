//! The tool commands of `shared/conventions.md`, run as the real `svc-agent` binary.
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_svc-agent"))
}

fn run(args: &[&str]) -> Output {
    agent().args(args).output().unwrap()
}

fn run_stdin(args: &[&str], input: &str) -> Output {
    let mut child = agent()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn example(name: &str) -> String {
    format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn tmpfile(name: &str, content: &str) -> String {
    let dir = std::env::temp_dir().join(format!("svc-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.display().to_string()
}

#[test]
fn version_json_has_the_contract_fields() {
    let o = run(&["version", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["binary_name"], "svc-agent");
    assert!(semver::Version::parse(v["version"].as_str().unwrap()).is_ok());
    assert!(v["target"].as_str().unwrap().contains("linux"), "{v}");
}

#[test]
fn validate_exit_codes_and_json_shape() {
    assert_eq!(
        run(&["validate", &example("sensor-and-camera.json")])
            .status
            .code(),
        Some(0)
    );
    let bad = tmpfile(
        "bad.json",
        r#"{"modules": [{"type": "registry", "name": "m", "module_id": "a:b", "version": "1.2"}], "x": 1}"#,
    );
    let o = run(&["validate", "--json", &bad]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"][0]["path"], "/modules/0/version");
    assert!(v["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("version selector"));
    assert_eq!(v["warnings"][0]["path"], "/x");
    // Unreadable file and usage errors: 2.
    assert_eq!(
        run(&["validate", "/nonexistent/cfg.json"]).status.code(),
        Some(2)
    );
    assert_eq!(run(&["validate"]).status.code(), Some(2));
    assert_eq!(run(&["validate", "--bogus", "x"]).status.code(), Some(2));
    // Not JSON: readable, but invalid.
    let o = run_stdin(&["validate", "--json", "-"], "{not json");
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("not valid JSON"));
}

#[test]
fn validate_effective_fills_every_default() {
    let o = run(&["validate", "--effective", &example("partial-agent.json")]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for sub in [
        "svc-agent",
        "svc-server",
        "agent-provisioning",
        "agent-syscfg",
    ] {
        assert!(v[sub].is_object(), "missing {sub}: {v}");
    }
    assert_eq!(v["svc-agent"]["release_channel"], "stable");
    assert_eq!(v["svc-agent"]["pin_url"], "");
    assert_eq!(v["svc-server"]["pin_version"], "0.52.0");
    assert_eq!(v["svc-server"]["disable_subsystem"], false);
    assert_eq!(v["svc-server"]["attributes"]["fast_start"], false);
    assert_eq!(v["agent-provisioning"]["networks"], serde_json::json!([]));
    assert_eq!(v["agent-syscfg"]["attributes"]["logging"]["disable"], false);
    assert_eq!(v["agent-syscfg"]["attributes"]["upgrades"]["type"], "all");
    let from_stdin = run_stdin(&["validate", "--effective", "-"], "{}");
    let v: serde_json::Value = serde_json::from_slice(&from_stdin.stdout).unwrap();
    assert_eq!(v["svc-server"]["release_channel"], "stable");
}

#[test]
fn a_machine_id_that_climbs_out_of_module_data_is_refused() {
    for bad in ["../../etc", "..", ".", "a/b"] {
        let o = agent()
            .args([
                "module-env",
                "--config",
                &example("sensor-and-camera.json"),
                "--module",
                "acme_sensors",
                "--machine-id",
                bad,
            ])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "--machine-id {bad:?}: {}",
            stdout(&o)
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--machine-id"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn module_env_prints_sorted_spec_variables() {
    let o = agent()
        .args([
            "module-env",
            "--config",
            &example("sensor-and-camera.json"),
            "--module",
            "acme_sensors",
            "--machine-id",
            "m1",
        ])
        .env_clear()
        .env("HOME", "/home/robot")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
    assert!(
        lines.contains(&"PATH=/opt/tools/bin:/usr/bin:/bin".to_string()),
        "{lines:?}"
    );
    assert!(lines.contains(&"SVC_HOME=/home/robot/.svc".to_string()));
    assert!(lines
        .contains(&"SVC_MODULE_DATA=/home/robot/.svc/module-data/m1/acme_sensors/".to_string()));
    assert!(lines.contains(&"SVC_MODULE_ID=acme:sensors".to_string()));
    // acme_sensors selects 1.2.*, which names no folder until a version is deployed (see
    // module_env_module_root_names_a_version_never_a_selector).
    assert!(
        !lines.iter().any(|l| l.starts_with("SVC_MODULE_ROOT=")),
        "{lines:?}"
    );
}

#[test]
fn module_env_names_an_unset_variable() {
    let o = agent()
        .args([
            "module-env",
            "--config",
            &example("sensor-and-camera.json"),
            "--module",
            "acme_sensors",
            "--machine-id",
            "m1",
        ])
        .env_clear()
        .env("HOME", "/home/robot")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("PATH is not set"));
    let o = run(&[
        "module-env",
        "--config",
        &example("sensor-and-camera.json"),
        "--module",
        "nope",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no module named \"nope\""));
}

#[test]
fn resolve_version_contract() {
    let avail = "1.2.3,1.2.4,1.2.5,1.3.0,2.0.0,2.1.0-rc.1";
    let cases = [
        ("1.2.3", "1.2.3", "none"),
        ("1.2.*", "1.2.3", "1.2.5"),
        ("1.*", "1.2.3", "1.3.0"),
        ("latest", "1.2.3", "2.0.0"),
        ("latest-with-prerelease", "1.2.3", "2.1.0-rc.1"),
        ("latest", "", "2.0.0"),
    ];
    for (sel, cur, want) in cases {
        let o = run(&[
            "resolve-version",
            "--selector",
            sel,
            "--current",
            cur,
            "--available",
            avail,
        ]);
        assert!(o.status.success());
        assert_eq!(stdout(&o).trim(), want, "{sel} from {cur}");
    }
    assert_eq!(
        run(&[
            "resolve-version",
            "--selector",
            "1.x",
            "--current",
            "",
            "--available",
            avail
        ])
        .status
        .code(),
        Some(2)
    );
    assert_eq!(
        run(&[
            "resolve-version",
            "--selector",
            "latest",
            "--current",
            "one",
            "--available",
            avail
        ])
        .status
        .code(),
        Some(2)
    );
    assert_eq!(
        run(&[
            "resolve-version",
            "--selector",
            "latest",
            "--current",
            "",
            "--available",
            "1.0,2"
        ])
        .status
        .code(),
        Some(2)
    );
}

#[test]
fn every_command_has_help() {
    for cmd in ["version", "validate", "module-env", "resolve-version"] {
        let o = run(&[cmd, "--help"]);
        assert!(o.status.success(), "{cmd} --help");
        assert!(stdout(&o).starts_with("usage:"), "{cmd}: {}", stdout(&o));
    }
    assert!(stdout(&run(&["help"])).contains("resolve-version"));
    assert_eq!(run(&["frobnicate"]).status.code(), Some(2));
}

/// svc-server refusing its start (here the machine id from its environment) says what and
/// where in one line and a pointer to the usage: under the agent the start repeats at every
/// restart, and the whole usage text each time filled the journal.
#[test]
fn a_refused_svc_server_start_is_two_lines_not_the_usage_text() {
    let o = Command::new(env!("CARGO_BIN_EXE_svc-server"))
        .args(["--config", "/nonexistent.json"])
        .env("SVC_MACHINE_ID", "..")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("svc-server: --machine-id / SVC_MACHINE_ID: "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(!err.contains("usage:"), "{err}");
}

// ---- issue #22 ------------------------------------------------------------------------

fn module_env_of(config: &str, module: &str, home: &str) -> Output {
    agent()
        .args([
            "module-env",
            "--config",
            config,
            "--module",
            module,
            "--machine-id",
            "m1",
        ])
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin")
        .output()
        .unwrap()
}

#[test]
fn module_env_refuses_a_value_with_a_newline_naming_the_variable() {
    let cfg = tmpfile(
        "newline.json",
        r#"{"modules": [{"type": "registry", "name": "m", "module_id": "a:m", "version": "1.2.3",
            "env": {"GREETING": "line one\nSVC_HOME=/evil"}}]}"#,
    );
    let o = module_env_of(&cfg, "m", "/home/robot");
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(stdout(&o), "", "nothing half-printed");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("GREETING") && err.contains("newline"), "{err}");
}

#[test]
fn module_env_keeps_the_hosts_svc_variables() {
    let cfg = tmpfile(
        "override.json",
        r#"{"modules": [{"type": "registry", "name": "m", "module_id": "a:m", "version": "1.2.3",
            "env": {"SVC_HOME": "/elsewhere", "SVC_MODULE_DATA": "/tmp/data", "SVC_MODULE_ID": "x:y", "OTHER": "1"}}]}"#,
    );
    let o = module_env_of(&cfg, "m", "/home/robot");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    assert!(out.contains("SVC_HOME=/home/robot/.svc\n"), "{out}");
    assert!(
        out.contains("SVC_MODULE_DATA=/home/robot/.svc/module-data/m1/m/\n"),
        "{out}"
    );
    assert!(out.contains("SVC_MODULE_ID=a:m\n"), "{out}");
    assert!(out.contains("OTHER=1\n"), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/modules/0/env/SVC_HOME") && err.contains("ignored"),
        "{err}"
    );
}

#[test]
fn module_env_module_root_names_a_version_never_a_selector() {
    let cfg = tmpfile(
        "roots.json",
        r#"{"modules": [
            {"type": "registry", "name": "exact", "module_id": "a:exact", "version": "1.2.3"},
            {"type": "registry", "name": "minor", "module_id": "a:minor", "version": "1.2.*"},
            {"type": "registry", "name": "newest", "module_id": "a:newest", "version": "latest"}]}"#,
    );
    let home = std::env::temp_dir().join(format!("svc-cli-home-{}", std::process::id()));
    let home = home.display().to_string();
    let o = module_env_of(&cfg, "exact", &home);
    assert!(
        stdout(&o).contains(&format!(
            "SVC_MODULE_ROOT={home}/.svc/packages/exact/1.2.3\n"
        )),
        "{}",
        stdout(&o)
    );
    for name in ["minor", "newest"] {
        let o = module_env_of(&cfg, name, &home);
        assert!(o.status.success());
        assert!(!stdout(&o).contains("SVC_MODULE_ROOT"), "{}", stdout(&o));
        assert!(!stdout(&o).contains('*'), "{}", stdout(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("SVC_MODULE_ROOT") && err.contains("no version"),
            "{err}"
        );
    }
    // Once svc-server has deployed a version, module-env names it, as svc-server does.
    let state = format!("{home}/.svc/state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        format!("{state}/deployed.json"),
        r#"{"modules": {"minor": {"module_id": "a:minor", "version": "1.2.7"}}}"#,
    )
    .unwrap();
    let o = module_env_of(&cfg, "minor", &home);
    assert!(
        stdout(&o).contains(&format!(
            "SVC_MODULE_ROOT={home}/.svc/packages/minor/1.2.7\n"
        )),
        "{}",
        stdout(&o)
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn resolve_version_build_metadata_has_no_precedence() {
    for (sel, cur, avail, want) in [
        ("latest", "1.2.3", "1.2.3+b2", "none"),
        ("latest", "1.2.3+b1", "1.2.3+b2,1.2.3", "none"),
        ("1.2.*", "1.2.3", "1.2.3+b9", "none"),
        (
            "latest-with-prerelease",
            "1.2.3-rc.1",
            "1.2.3-rc.1+b2",
            "none",
        ),
        ("latest", "1.2.3", "1.2.3+b2,1.2.4+b1", "1.2.4+b1"),
    ] {
        let o = run(&[
            "resolve-version",
            "--selector",
            sel,
            "--current",
            cur,
            "--available",
            avail,
        ]);
        assert!(o.status.success());
        assert_eq!(stdout(&o).trim(), want, "{sel} from {cur} with {avail}");
    }
}
