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
    assert!(lines
        .iter()
        .any(|l| l.starts_with("SVC_MODULE_ROOT=/home/robot/.svc/packages/acme_sensors/")));
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
