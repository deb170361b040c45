//! A re-rooted machine for tests: credentials, a file:// management directory, and a
//! stand-in svc-server (a shell script that records its life in files).
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Sandbox {
    pub root: PathBuf,
    pub app: PathBuf,
}

/// A stand-in svc-server: records args, env and pid, traps HUP (reload) and TERM.
pub const FAKE_SERVER: &str = r#"#!/bin/sh
out="$SVC_HOME/../fake-server"
mkdir -p "$out"
echo "$@" > "$out/args"
env | sort > "$out/env"
echo $$ >> "$out/pids"
trap 'echo hup >> "$out/events"' HUP
trap 'echo term >> "$out/events"; exit 0' TERM
echo "fake svc-server up"
while :; do sleep 0.1; done
"#;

impl Sandbox {
    pub fn new(name: &str) -> Sandbox {
        let root = std::env::temp_dir().join(format!("svc-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let app = root.join("app");
        std::fs::create_dir_all(&app).unwrap();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        Sandbox { root, app }
    }

    pub fn write_credentials(&self, app_address: &str) {
        self.write_credentials_with(app_address, "sandbox-secret-123");
    }

    /// Writes the credentials file as a provisioning tool would: a new file renamed over the
    /// old one.
    pub fn write_credentials_with(&self, app_address: &str, secret: &str) {
        let creds = serde_json::json!({"cloud": {"app_address": app_address, "id": "part-1", "secret": secret}});
        let tmp = self.root.join("etc/.svc.json.tmp");
        std::fs::write(&tmp, creds.to_string()).unwrap();
        std::fs::rename(tmp, self.root.join("etc/svc.json")).unwrap();
    }

    pub fn file_app(&self) {
        self.write_credentials(&format!("file://{}", self.app.display()));
    }

    pub fn install_fake_server(&self) {
        let bin = self.root.join("opt/svc/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let p = bin.join("svc-server");
        std::fs::write(&p, FAKE_SERVER).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    pub fn answer(&self, v: serde_json::Value) {
        let tmp = self.app.join(".poll.json.tmp");
        std::fs::write(&tmp, v.to_string()).unwrap();
        std::fs::rename(tmp, self.app.join("poll.json")).unwrap();
    }

    pub fn fake(&self, file: &str) -> String {
        std::fs::read_to_string(self.root.join("opt/svc/fake-server").join(file))
            .unwrap_or_default()
    }

    pub fn status(&self) -> serde_json::Value {
        std::fs::read(self.root.join("opt/svc/status.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Waits until the agent has polled its file:// directory `n` more times: each poll
    /// rewrites `status.json` there by rename, so a new (inode, mtime) is one poll. A poll
    /// missed between two looks only makes the wait longer, never shorter.
    pub fn wait_polls(&self, n: usize, secs: u64) {
        use std::os::unix::fs::MetadataExt;
        let stamp = || {
            std::fs::metadata(self.app.join("status.json"))
                .ok()
                .map(|m| (m.ino(), m.mtime(), m.mtime_nsec()))
        };
        let mut last = stamp();
        let mut seen = 0;
        wait_for(
            &format!("{n} more polls of the file:// directory"),
            secs,
            || {
                let now = stamp();
                if now != last {
                    seen += 1;
                    last = now;
                }
                seen >= n
            },
        );
    }

    pub fn spawn_agent(&self, env: &[(&str, &str)]) -> Child {
        self.spawn_agent_exe(Path::new(env!("CARGO_BIN_EXE_svc-agent")), env)
    }

    /// The same with another agent binary (the power-cut campaign runs a copy).
    pub fn spawn_agent_exe(&self, exe: &Path, env: &[(&str, &str)]) -> Child {
        let mut cmd = Command::new(exe);
        cmd.args(["run", "--root", self.root.to_str().unwrap()])
            .env("SVC_AGENT_FIRST_CONTACT_SECS", "5")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.root.join("agent.log")).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("agent.log")).unwrap_or_default()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A failed test does not reach its `terminate`: stop what it started here (the
            // agent and its svc-server name this root on their command lines), so a failure
            // does not leave processes running through the rest of the suite.
            stop_processes_naming(&self.root);
        } else {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// The live processes whose command line names `path` (the agent's `--root`, its svc-server).
pub fn processes_naming(path: &Path) -> Vec<i32> {
    let needle = path.as_os_str().as_encoded_bytes();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != std::process::id() as i32 && pid_alive(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
        })
        .collect()
}

/// SIGTERM, then after up to 10 s SIGKILL, to every process whose command line names `root`.
fn stop_processes_naming(root: &Path) {
    for pid in processes_naming(root) {
        svc::sys::kill(pid, libc::SIGTERM);
    }
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end && !processes_naming(root).is_empty() {
        std::thread::sleep(Duration::from_millis(100));
    }
    for pid in processes_naming(root) {
        svc::sys::kill(pid, libc::SIGKILL);
    }
}

/// Waits (bounded) for `cond`; the bound is generous because the machine is shared.
pub fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

pub fn pid_alive(pid: i32) -> bool {
    // A zombie is not alive; /proc/PID/stat's third field says Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

pub fn terminate(child: &mut Child) -> std::process::ExitStatus {
    svc::sys::kill(child.id() as i32, libc::SIGTERM);
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("agent did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}
