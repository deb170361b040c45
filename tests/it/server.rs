//! svc-server with real module processes: the real binary, the example module
//! (`examples/modules/logenv/bin/module`), a `file://` registry of real tar artifacts,
//! real signals. No timed assertions: every wait is for an observable state, bounded only
//! to fail instead of hang.
use crate::common::https::{Behavior, HttpsServer};
use crate::common::sandbox::{pid_alive as alive, wait_for};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MODULE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/modules/logenv/bin/module"
);
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Every live process whose environment holds `TEST_MARK=<mark>`.
fn marked_processes(mark: &str) -> Vec<i32> {
    let needle = format!("TEST_MARK={mark}");
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .map(|b| b.split(|c| *c == 0).any(|v| v == needle.as_bytes()))
                .unwrap_or(false)
                && alive(*pid)
        })
        .collect()
}

struct Sandbox {
    dir: PathBuf,
    mark: String,
    server: Option<Child>,
    /// Another registry than the `file://` one of `registry/` (the loopback HTTP one).
    registry: Option<String>,
}

impl Sandbox {
    fn new(name: &str) -> Sandbox {
        let dir = std::env::temp_dir().join(format!("svc-server-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("registry")).unwrap();
        fs::create_dir_all(dir.join("user")).unwrap();
        Sandbox {
            mark: format!("{name}-{}", std::process::id()),
            dir,
            server: None,
            registry: None,
        }
    }

    fn home(&self) -> PathBuf {
        self.dir.join("svc-home")
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("config.json")
    }

    fn data(&self, module: &str) -> PathBuf {
        self.home().join("module-data/m-test").join(module)
    }

    fn read(&self, module: &str, file: &str) -> Option<String> {
        fs::read_to_string(self.data(module).join(file))
            .ok()
            .map(|s| s.trim_end().to_string())
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Writes the config atomically (a rename, as the agent does).
    fn write_config(&self, v: serde_json::Value) {
        let tmp = self.dir.join(".config.tmp");
        fs::write(&tmp, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
        fs::rename(&tmp, self.config_path()).unwrap();
    }

    /// svc-server's own environment, exactly (the test compares the module's with it).
    fn server_env(&self) -> Vec<(String, String)> {
        vec![
            ("PATH".into(), PATH.into()),
            ("HOME".into(), self.dir.join("user").display().to_string()),
            ("USER".into(), "robot".into()),
            ("SVC_HOME".into(), self.home().display().to_string()),
            ("TEST_MARK".into(), self.mark.clone()),
        ]
    }

    fn spawn_with(&mut self, source: &[&str], extra: &[&str]) {
        let log = fs::File::create(self.dir.join("server.log")).unwrap();
        let registry = self
            .registry
            .clone()
            .unwrap_or_else(|| format!("file://{}", self.dir.join("registry").display()));
        let mut args: Vec<String> = source.iter().map(|s| s.to_string()).collect();
        args.extend(
            [
                "--registry",
                &registry,
                "--check-interval",
                "0.5",
                "--watch-interval",
                "0.3",
                "--stop-timeout",
                "2",
                "--machine-id",
                "m-test",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(env!("CARGO_BIN_EXE_svc-server"))
            .args(&args)
            .env_clear()
            .envs(self.server_env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.server = Some(child);
    }

    fn spawn(&mut self) {
        let cfg = self.config_path().display().to_string();
        self.spawn_with(&["--config", &cfg], &[]);
    }

    fn signal(&self, sig: i32) {
        let pid = self.server.as_ref().unwrap().id() as i32;
        assert!(svc::sys::kill(pid, sig));
    }

    /// Sends SIGTERM and waits for svc-server to exit.
    fn stop(&mut self) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        let mut child = self.server.take().unwrap();
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < end, "svc-server did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn module_pid(&self, module: &str) -> Option<i32> {
        self.read(module, "pid")?.parse().ok()
    }

    /// Waits until `module` runs (its pid file names a live process) and returns the pid.
    fn wait_running(&self, module: &str) -> i32 {
        let mut pid = 0;
        wait_for(&format!("module {module} running"), 60, || {
            pid = self.module_pid(module).unwrap_or(0);
            pid > 0 && alive(pid)
        });
        pid
    }

    /// Publishes `versions` of `ns:name` in the registry (a tar of the example module each;
    /// `bad_sha` lists versions announced with a wrong sha256).
    fn publish(&self, ns: &str, name: &str, versions: &[&str], bad_sha: &[&str]) {
        let folder = self.dir.join("registry/modules").join(ns).join(name);
        fs::create_dir_all(&folder).unwrap();
        let mut entries = Vec::new();
        for v in versions {
            let stage = self.dir.join("stage").join(name).join(v);
            fs::create_dir_all(stage.join("bin")).unwrap();
            fs::copy(MODULE, stage.join("bin/module")).unwrap();
            fs::write(stage.join("VERSION"), format!("{v}\n")).unwrap();
            let tar = folder.join(format!("{name}-{v}.tar"));
            if !tar.exists() {
                let st = Command::new("tar")
                    .arg("-cf")
                    .arg(&tar)
                    .arg("-C")
                    .arg(&stage)
                    .args(["bin", "VERSION"])
                    .status()
                    .unwrap();
                assert!(st.success());
            }
            let bytes = fs::read(&tar).unwrap();
            let mut sha = hex(&Sha256::digest(&bytes));
            if bad_sha.contains(v) {
                sha = "0".repeat(64);
            }
            entries.push(serde_json::json!({
                "version": v,
                "platforms": {
                    platform(): {
                        "url": format!("{name}-{v}.tar"),
                        "sha256": sha,
                        "size": bytes.len(),
                        "entrypoint": "bin/module"
                    },
                    "linux/riscv64": {"url": "nope.tar", "sha256": "00", "size": 1, "entrypoint": "x"}
                }
            }));
        }
        let index = serde_json::json!({ "versions": entries });
        let tmp = folder.join(".index.tmp");
        fs::write(&tmp, serde_json::to_vec_pretty(&index).unwrap()).unwrap();
        fs::rename(&tmp, folder.join("index.json")).unwrap();
    }

    /// The deployed version of `module` as svc-server records it.
    fn deployed(&self, module: &str) -> Option<String> {
        let b = fs::read(self.home().join("state/deployed.json")).ok()?;
        let v: serde_json::Value = serde_json::from_slice(&b).ok()?;
        Some(v["modules"][module]["version"].as_str()?.to_string())
    }

    /// How many registry checks svc-server has finished.
    fn checks(&self) -> usize {
        self.log().matches("registry check done").count()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(mut c) = self.server.take() {
            svc::sys::kill(c.id() as i32, libc::SIGTERM);
            let _ = c.wait();
        }
        for pid in marked_processes(&self.mark) {
            svc::sys::kill(pid, libc::SIGKILL);
        }
        // SVC_TEST_KEEP=1 keeps the sandbox (and its server.log) for a look.
        if !std::thread::panicking() && std::env::var_os("SVC_TEST_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

use svc::encoding::hex;

fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        a => a,
    };
    format!("linux/{arch}")
}

fn registry_module(name: &str, id: &str, version: &str) -> serde_json::Value {
    serde_json::json!({"type": "registry", "name": name, "module_id": id, "version": version})
}

fn local_module(sb: &Sandbox, name: &str, id: &str, env: serde_json::Value) -> serde_json::Value {
    // A copy of the example in a folder of its own: that folder is its working directory.
    let dir = sb.dir.join("local").join(name);
    fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("module");
    if !exe.exists() {
        fs::copy(MODULE, &exe).unwrap();
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
    }
    serde_json::json!({"type": "local", "name": name, "module_id": id, "version": "latest",
                       "executable_path": exe, "env": env})
}

fn component(name: &str, model: &str, deps: &[&str]) -> serde_json::Value {
    serde_json::json!({"name": name, "model": model, "type": "sensor", "namespace": "rdk",
                       "attributes": {"pin": "7", "timeout_ms": 100}, "depends_on": deps})
}

fn lines(text: &str) -> BTreeSet<String> {
    text.lines().map(str::to_string).collect()
}

#[test]
fn version_json_names_svc_server() {
    let out = Command::new(env!("CARGO_BIN_EXE_svc-server"))
        .args(["version", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["binary_name"], "svc-server");
    assert!(v["version"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(v["target"].as_str().is_some());
}

#[test]
fn modules_see_exactly_the_spec_environment_and_working_directory() {
    let mut sb = Sandbox::new("env");
    sb.publish("acme", "logenv", &["1.2.3"], &[]);
    sb.write_config(serde_json::json!({
        "modules": [
            {"type": "registry", "name": "acme_logenv", "module_id": "acme:logenv", "version": "1.2.3",
             "env": {"PATH": "/opt/tools/bin:${environment.PATH}", "GREETING": "hi ${environment.USER}!",
                     "PLAIN": "x"}},
            local_module(&sb, "local_one", "acme:local", serde_json::json!({})),
            local_module(&sb, "local_rooted", "acme:rooted",
                         serde_json::json!({"SVC_MODULE_ROOT": "${environment.HOME}"})),
            local_module(&sb, "needs_var", "acme:needs",
                         serde_json::json!({"TOKEN": "${environment.SVC_TEST_SURELY_UNSET}"})),
        ],
        "components": [
            component("board1", "acme:local:board", &[]),
            component("sensor1", "acme:logenv:sensor", &["board1"]),
            // needs_var cannot start: local_rooted's component depends on one of its own.
            component("vault", "acme:needs:vault", &[]),
            component("reader", "acme:rooted:reader", &["vault"]),
        ],
    }));
    sb.spawn();
    sb.wait_running("acme_logenv");
    sb.wait_running("local_one");
    sb.wait_running("local_rooted");
    wait_for("the unset variable reported", 30, || {
        sb.log().contains("module needs_var not started")
    });

    let home = sb.home();
    let root = home.join("packages/acme_logenv/1.2.3");
    let data = sb.data("acme_logenv");
    let config_file = home.join("state/modules/acme_logenv.json");
    // Exactly svc-server's environment plus the module variables, nothing else.
    let mut want: BTreeSet<String> = sb
        .server_env()
        .iter()
        .filter(|(k, _)| k != "PATH")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for line in [
        "PATH=/opt/tools/bin:/usr/local/bin:/usr/bin:/bin".to_string(),
        "GREETING=hi robot!".to_string(),
        "PLAIN=x".to_string(),
        format!("SVC_MODULE_ROOT={}", root.display()),
        format!("SVC_MODULE_DATA={}/", data.display()),
        "SVC_MODULE_ID=acme:logenv".to_string(),
        format!("SVC_MODULE_CONFIG={}", config_file.display()),
    ] {
        want.insert(line);
    }
    assert_eq!(lines(&sb.read("acme_logenv", "environ").unwrap()), want);
    assert_eq!(
        sb.read("acme_logenv", "cwd").unwrap(),
        root.display().to_string()
    );
    assert_eq!(sb.read("acme_logenv", "version").unwrap(), "1.2.3");
    let mode = fs::metadata(&data).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);

    // Its components, as the config has them.
    let cfg: serde_json::Value =
        serde_json::from_str(&sb.read("acme_logenv", "config.json").unwrap()).unwrap();
    assert_eq!(cfg["module_id"], "acme:logenv");
    assert_eq!(cfg["version"], "1.2.3");
    assert_eq!(cfg["components"].as_array().unwrap().len(), 1);
    assert_eq!(cfg["components"][0]["name"], "sensor1");
    assert_eq!(cfg["components"][0]["attributes"]["timeout_ms"], 100);

    // A local module: no SVC_MODULE_ROOT unless its env sets one; its program's folder.
    let env_local = lines(&sb.read("local_one", "environ").unwrap());
    assert!(!env_local.iter().any(|l| l.starts_with("SVC_MODULE_ROOT=")));
    assert!(env_local.contains("SVC_MODULE_ID=acme:local"));
    assert_eq!(
        sb.read("local_one", "cwd").unwrap(),
        sb.dir.join("local/local_one").display().to_string()
    );
    let user = sb.dir.join("user").display().to_string();
    assert_eq!(sb.read("local_rooted", "cwd").unwrap(), user);
    assert!(lines(&sb.read("local_rooted", "environ").unwrap())
        .contains(&format!("SVC_MODULE_ROOT={user}")));

    // The unset variable: a clear error naming module, key and variable; not started.
    let log = sb.log();
    assert!(
        log.contains("SVC_TEST_SURELY_UNSET is not set") && log.contains("TOKEN"),
        "{log}"
    );
    assert!(sb.read("needs_var", "pid").is_none());
    // The dependency that cannot run is reported, and its dependent starts anyway.
    assert!(
        log.contains("module local_rooted: components depend on resources of module needs_var, which is not running"),
        "{log}"
    );
    // depends_on: sensor1 (acme_logenv) depends on board1 (local_one): local_one first.
    let a = log.find("starting module local_one").unwrap();
    let b = log.find("starting module acme_logenv").unwrap();
    assert!(a < b, "local_one must start before acme_logenv");
    assert!(sb.stop().success());
}

#[test]
fn update_types_move_as_the_spec_says_and_data_survives() {
    let mut sb = Sandbox::new("types");
    let kinds = [
        ("patch", "1.2.3"),
        ("minor", "1.2.*"),
        ("major", "1.*"),
        ("latest", "latest"),
        ("pre", "latest-with-prerelease"),
    ];
    for (k, _) in kinds {
        sb.publish("acme", k, &["1.2.3"], &[]);
    }
    sb.write_config(serde_json::json!({
        "modules": kinds.iter().map(|(k, sel)| registry_module(k, &format!("acme:{k}"), sel)).collect::<Vec<_>>(),
        "components": [component("motor", "acme:major:motor", &[])],
    }));
    sb.spawn();
    let mut pids = std::collections::BTreeMap::new();
    for (k, _) in kinds {
        pids.insert(k, sb.wait_running(k));
        assert_eq!(sb.read(k, "version").as_deref(), Some("1.2.3"), "{k}");
    }

    // Step 1: 1.2.4 appears.
    for (k, _) in kinds {
        sb.publish("acme", k, &["1.2.3", "1.2.4"], &[]);
    }
    let want1 = [
        ("patch", "1.2.3"),
        ("minor", "1.2.4"),
        ("major", "1.2.4"),
        ("latest", "1.2.4"),
        ("pre", "1.2.4"),
    ];
    settle(&sb, &want1);
    // The motor of `major` was stopped for its upgrade, and said so.
    assert!(sb
        .log()
        .contains("upgrade from 1.2.3 to 1.2.4); its resources stop: motor"));

    // Step 2: the rest of the registry, including a prerelease.
    let all = ["1.2.3", "1.2.4", "1.2.5", "1.3.0", "2.0.0", "2.1.0-rc.1"];
    for (k, _) in kinds {
        sb.publish("acme", k, &all, &[]);
    }
    let want2 = [
        ("patch", "1.2.3"),
        ("minor", "1.2.5"),
        ("major", "1.3.0"),
        ("latest", "2.0.0"),
        ("pre", "2.1.0-rc.1"),
    ];
    settle(&sb, &want2);
    // Patch never moved: the same process all along.
    assert_eq!(sb.module_pid("patch"), Some(pids["patch"]));
    assert!(alive(pids["patch"]));
    // The old processes of the others are gone.
    for k in ["minor", "major", "latest", "pre"] {
        assert!(!alive(pids[k]), "{k}'s 1.2.3 still runs");
    }

    // SVC_MODULE_DATA survived each upgrade: 1.2.4 and 1.3.0 saw what 1.2.3 wrote.
    assert_eq!(sb.read("major", "first-writer").as_deref(), Some("1.2.3"));
    assert_eq!(sb.read("major", "seen-1.2.4").as_deref(), Some("1.2.3"));
    assert_eq!(sb.read("major", "seen-1.3.0").as_deref(), Some("1.2.3"));
    // And the working directory followed the version.
    assert!(sb
        .read("pre", "cwd")
        .unwrap()
        .ends_with("packages/pre/2.1.0-rc.1"));
    assert!(sb.stop().success());
}

/// Waits until every module runs the wanted version, then two more registry checks, and
/// checks that nothing moved further (the modules that must stay are checked then).
fn settle(sb: &Sandbox, want: &[(&str, &str)]) {
    for (k, v) in want {
        wait_for(&format!("{k} at {v}"), 60, || {
            sb.read(k, "version").as_deref() == Some(*v)
                && sb.module_pid(k).is_some_and(alive)
                && sb.deployed(k).as_deref() == Some(*v)
        });
    }
    let n = sb.checks();
    wait_for("two more registry checks", 60, || sb.checks() >= n + 2);
    for (k, v) in want {
        assert_eq!(sb.read(k, "version").as_deref(), Some(*v), "{k} moved on");
        assert_eq!(sb.deployed(k).as_deref(), Some(*v), "{k} moved on");
    }
}

#[test]
fn a_failed_upgrade_leaves_the_old_version_running() {
    let mut sb = Sandbox::new("failup");
    sb.publish("acme", "minor", &["1.2.3"], &[]);
    sb.write_config(serde_json::json!({
        "modules": [registry_module("minor", "acme:minor", "1.2.*")],
    }));
    sb.spawn();
    let pid = sb.wait_running("minor");
    // 1.2.4 is announced with a wrong sha256: its download is refused.
    sb.publish("acme", "minor", &["1.2.3", "1.2.4"], &["1.2.4"]);
    wait_for("the failed upgrade reported", 60, || {
        sb.log().contains("upgrade to 1.2.4 failed")
    });
    assert!(sb.log().contains("sha256 mismatch"), "{}", sb.log());
    assert_eq!(sb.module_pid("minor"), Some(pid));
    assert!(alive(pid));
    assert_eq!(sb.deployed("minor").as_deref(), Some("1.2.3"));
    assert!(!sb.home().join("packages/minor/1.2.4").exists());
    // Fixed in the registry: it moves.
    sb.publish("acme", "minor", &["1.2.3", "1.2.4"], &[]);
    wait_for("minor at 1.2.4", 60, || {
        sb.read("minor", "version").as_deref() == Some("1.2.4")
    });
    assert!(!alive(pid));
    assert!(sb.stop().success());
}

#[test]
fn a_crashing_module_is_restarted_with_backoff() {
    let mut sb = Sandbox::new("crash");
    sb.write_config(serde_json::json!({
        "modules": [local_module(&sb, "crasher", "acme:crash", serde_json::json!({"EXAMPLE_EXIT_AFTER": "0"}))],
    }));
    sb.spawn();
    wait_for("four starts", 60, || {
        sb.read("crasher", "starts")
            .is_some_and(|s| s.lines().count() >= 4)
    });
    let log = sb.log();
    // Each crash doubles the delay before the next start.
    let delays: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split("crasher restarts in ").nth(1))
        .collect();
    assert!(delays.len() >= 3, "{log}");
    assert_eq!(&delays[..3], &["250 ms", "500 ms", "1000 ms"], "{log}");
    assert!(
        log.contains("crashing on purpose"),
        "module output is in the log"
    );
    assert!(log.contains("(exit code 3)"), "{log}");
    let starts = sb.read("crasher", "starts").unwrap();
    let pids: BTreeSet<&str> = starts.lines().collect();
    assert_eq!(
        pids.len(),
        starts.lines().count(),
        "each start is a new process"
    );
    assert!(sb.stop().success());
}

#[test]
fn config_changes_apply_only_the_difference() {
    let mut sb = Sandbox::new("diff");
    let a = local_module(&sb, "a", "acme:a", serde_json::json!({}));
    let b = local_module(&sb, "b", "acme:b", serde_json::json!({}));
    let c = local_module(&sb, "c", "acme:c", serde_json::json!({}));
    sb.write_config(serde_json::json!({"modules": [a, b]}));
    sb.spawn();
    let pa = sb.wait_running("a");
    let pb = sb.wait_running("b");

    // Remove b, add c; rewrite + SIGHUP.
    sb.write_config(serde_json::json!({"modules": [a, c]}));
    sb.signal(libc::SIGHUP);
    let pc = sb.wait_running("c");
    wait_for("b stopped", 30, || !alive(pb));
    assert!(sb
        .log()
        .contains("stopping module b (removed from the config)"));
    assert_eq!(sb.module_pid("a"), Some(pa), "a was restarted");
    assert!(alive(pa));

    // An invalid config: every error logged with its pointer; the old one keeps running.
    let mut bad = serde_json::json!({"modules": [a, c, {"type": "registry", "name": "x"}],
                                     "components": [{"name": "q"}]});
    bad["modules"][1]["module_id"] = serde_json::json!("no-colon");
    sb.write_config(bad);
    sb.signal(libc::SIGHUP);
    wait_for("the rejection logged", 30, || {
        sb.log().contains("config rejected")
    });
    let log = sb.log();
    assert!(log.contains("config error: /modules/1/module_id"), "{log}");
    assert!(log.contains("config error: /modules/2"), "{log}");
    assert!(log.contains("config error: /components/0"), "{log}");
    assert!(alive(pa) && alive(pc));

    // A change of a module's env restarts that module only; noticed without a SIGHUP.
    let mut c2 = c.clone();
    c2["env"] = serde_json::json!({"NEW_VAR": "1"});
    sb.write_config(serde_json::json!({"modules": [a, c2]}));
    wait_for("c restarted with its new env", 30, || {
        sb.module_pid("c").is_some_and(|p| p != pc && alive(p))
            && sb
                .read("c", "environ")
                .is_some_and(|e| e.contains("NEW_VAR=1"))
    });
    assert!(!alive(pc));
    assert_eq!(sb.module_pid("a"), Some(pa));
    assert!(alive(pa));

    // No change in progress: the restart gate is open.
    assert!(!sb.home().join("state/busy").exists());
    assert!(sb.stop().success());
    assert!(!sb.home().join("state/busy").exists());
}

#[test]
fn sigterm_leaves_no_module_process_alive() {
    let mut sb = Sandbox::new("term");
    let mut mods = Vec::new();
    for i in 0..3 {
        mods.push(local_module(
            &sb,
            &format!("m{i}"),
            &format!("acme:m{i}"),
            // A grandchild that ignores SIGTERM: only the group's SIGKILL ends it.
            serde_json::json!({"EXAMPLE_STUBBORN": "1"}),
        ));
    }
    sb.publish("acme", "reg", &["1.2.3"], &[]);
    mods.push(registry_module("reg", "acme:reg", "1.2.3"));
    sb.write_config(serde_json::json!({"modules": mods}));
    sb.spawn();
    for m in ["m0", "m1", "m2", "reg"] {
        sb.wait_running(m);
    }
    // Each module has a child (its sleep) and the stubborn ones a grandchild.
    wait_for("grandchildren running", 30, || {
        marked_processes(&sb.mark).len() >= 8
    });
    let st = sb.stop();
    assert!(st.success(), "{st:?}");
    assert_eq!(marked_processes(&sb.mark), Vec::<i32>::new());
    let log = sb.log();
    assert!(log.contains("stopping 4 modules"), "{log}");
    assert!(log.contains("svc-server stopped"), "{log}");
}

#[test]
fn app_directory_config_and_missing_registry_version() {
    let mut sb = Sandbox::new("app");
    let app = sb.dir.join("app");
    fs::create_dir_all(&app).unwrap();
    sb.publish("acme", "reg", &["1.2.3"], &[]);
    let poll = serde_json::json!({
        "config": {"modules": [
            registry_module("reg", "acme:reg", "1.2.3"),
            registry_module("ghost", "acme:reg2", "1.0.0"),
        ]},
        "poll_interval_secs": 60
    });
    fs::write(app.join("poll.json"), serde_json::to_vec(&poll).unwrap()).unwrap();
    let arg = format!("file://{}", app.display());
    sb.spawn_with(&["--app", &arg], &[]);
    sb.wait_running("reg");
    wait_for("the missing module reported", 30, || {
        sb.log().contains("module ghost not started")
    });
    assert!(sb.stop().success());
}

/// A loopback HTTP registry serving `dir` (the one test server, plain HTTP); a module's
/// `.tar` can be held until released (a slow download, observable).
struct SlowRegistry(HttpsServer);

impl SlowRegistry {
    fn start(dir: PathBuf) -> SlowRegistry {
        let srv = HttpsServer::start_plain();
        srv.serve_dir(&dir);
        SlowRegistry(srv)
    }

    fn url(&self) -> String {
        self.0.base_url().to_string()
    }

    fn path(file: &str) -> String {
        // NAME-VERSION.tar of module acme:NAME (see `publish`).
        let name = file.split('-').next().unwrap_or("");
        format!("/modules/acme/{name}/{file}")
    }

    fn hold(&self, file: &str) {
        self.0.set_behavior(&Self::path(file), Behavior::Stall);
    }

    fn release(&self, file: &str) {
        self.0.set_behavior(&Self::path(file), Behavior::Normal);
    }

    fn requested(&self, file: &str) -> bool {
        !self.0.requests(&Self::path(file)).is_empty()
    }
}

fn busy_pid(sb: &Sandbox) -> Option<u32> {
    fs::read_to_string(sb.home().join("state/busy"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[test]
fn the_restart_gate_is_held_while_a_change_is_processed() {
    let mut sb = Sandbox::new("gate");
    let reg = SlowRegistry::start(sb.dir.join("registry"));
    sb.registry = Some(reg.url());
    sb.publish("acme", "slow", &["1.2.3"], &[]);
    let a = local_module(&sb, "a", "acme:a", serde_json::json!({}));
    sb.write_config(serde_json::json!({"modules": [a]}));
    sb.spawn();
    let server_pid = sb.server.as_ref().unwrap().id();
    let pa = sb.wait_running("a");
    // Starting the first config is a change too: the gate opens once it has been applied,
    // which may be a moment after module `a` runs.
    wait_for("idle: the gate open", 30, || busy_pid(&sb).is_none());

    // A change whose download stalls: svc-server is busy for as long as it lasts.
    reg.hold("slow-1.2.3.tar");
    sb.write_config(
        serde_json::json!({"modules": [a, registry_module("slow", "acme:slow", "1.2.*")]}),
    );
    sb.signal(libc::SIGHUP);
    wait_for("the artifact requested", 30, || {
        reg.requested("slow-1.2.3.tar")
    });
    assert_eq!(busy_pid(&sb), Some(server_pid));
    // Meanwhile the other modules stay supervised: a crash of `a` is restarted.
    svc::sys::kill(pa, libc::SIGKILL);
    wait_for("a restarted during the download", 30, || {
        sb.module_pid("a").is_some_and(|p| p != pa && alive(p))
    });
    assert_eq!(busy_pid(&sb), Some(server_pid), "still busy");
    reg.release("slow-1.2.3.tar");
    sb.wait_running("slow");
    wait_for("the gate open again", 30, || busy_pid(&sb).is_none());

    // An upgrade is a change too; SIGTERM in the middle of its download stops everything.
    reg.hold("slow-1.2.4.tar");
    sb.publish("acme", "slow", &["1.2.3", "1.2.4"], &[]);
    wait_for("the upgrade's artifact requested", 30, || {
        reg.requested("slow-1.2.4.tar")
    });
    assert_eq!(busy_pid(&sb), Some(server_pid));
    let st = sb.stop();
    assert!(st.success(), "{st:?}");
    assert_eq!(marked_processes(&sb.mark), Vec::<i32>::new());
    assert_eq!(busy_pid(&sb), None, "the gate is open after a clean stop");
    reg.release("slow-1.2.4.tar");
    assert!(
        sb.log().contains("upgrade to 1.2.4 failed: interrupted"),
        "{}",
        sb.log()
    );
}
