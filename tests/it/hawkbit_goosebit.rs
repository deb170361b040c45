//! The hawkBit backend against gooseBit, a DDI server nobody here wrote (PyPI, installed
//! by `scripts/lib/goosebit.sh` into `$GOOSEBIT_VENV`; scripts/test-cargo.sh does it). It
//! runs on 127.0.0.1 only, its database migrated with `aerich upgrade` before the first
//! start, everything in the test's own directory. Under CI=true a missing gooseBit fails.
use crate::update_support::scratch;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use svc::hawkbit::HawkbitTransport;
use svc::protocol::{PollOutcome, Transport};

/// The venv, or `None` outside CI when it is not there.
fn venv() -> Option<PathBuf> {
    let found = std::env::var_os("GOOSEBIT_VENV")
        .map(PathBuf::from)
        .filter(|v| v.join("bin/python").exists());
    if found.is_none() && std::env::var("CI").as_deref() == Ok("true") {
        panic!("gooseBit is not installed: run scripts/lib/goosebit.sh install DIR and set GOOSEBIT_VENV=DIR/venv (scripts/test-cargo.sh does)");
    }
    found
}

pub struct GooseBit {
    child: Child,
    pub port: u16,
}

impl Drop for GooseBit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl GooseBit {
    /// Migrates a fresh database and starts gooseBit; waits until it answers a DDI poll.
    pub fn start(venv: &Path, test: &str) -> GooseBit {
        let dir = scratch().join("goosebit").join(test);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let py = venv.join("bin/python");
        let pkg = Command::new(&py)
            .args([
                "-c",
                "import goosebit, os; print(os.path.dirname(goosebit.__file__))",
            ])
            .output()
            .unwrap();
        assert!(pkg.status.success(), "{pkg:?}");
        let pkg = String::from_utf8(pkg.stdout).unwrap().trim().to_string();
        std::fs::write(
            dir.join("pyproject.toml"),
            format!("[tool.aerich]\ntortoise_orm = \"goosebit.db.config.TORTOISE_CONF\"\nlocation = \"{pkg}/db/migrations\"\nsrc_folder = \"./.\"\n"),
        )
        .unwrap();
        let env = |c: &mut Command| {
            c.current_dir(&dir)
                .env(
                    "GOOSEBIT_DB_URI",
                    format!("sqlite://{}/db.sqlite3", dir.display()),
                )
                .env("GOOSEBIT_ARTIFACTS_DIR", dir.join("artifacts"))
                .env("GOOSEBIT_POLL_TIME", "00:01:00");
        };
        let mut migrate = Command::new(venv.join("bin/aerich"));
        migrate.arg("upgrade");
        env(&mut migrate);
        let out = migrate.output().unwrap();
        assert!(out.status.success(), "aerich upgrade: {out:?}");
        // A port found free may be taken before gooseBit binds it: then it exits, and the
        // next attempt takes another.
        for _ in 0..3 {
            let port = free_port();
            let log = std::fs::File::create(dir.join(format!("goosebit-{port}.log"))).unwrap();
            let mut run = Command::new(&py);
            run.args([
                "-m",
                "uvicorn",
                "goosebit:app",
                "--host",
                "127.0.0.1",
                "--port",
            ])
            .arg(port.to_string())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null());
            env(&mut run);
            let mut gb = GooseBit {
                child: run.spawn().unwrap(),
                port,
            };
            // Startup is slow on a loaded machine; no time is asserted, only a bound.
            for _ in 0..600 {
                if gb.child.try_wait().unwrap().is_some() {
                    break;
                }
                let url = format!("http://127.0.0.1:{port}/DEFAULT/controller/v1/probe");
                if minreq::get(url).with_timeout(5).send().is_ok() {
                    return gb;
                }
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            let _ = gb.child.kill();
        }
        panic!("gooseBit did not start; logs in {}", dir.display());
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

#[test]
fn goosebit_starts_and_the_backend_reads_its_base_resource() {
    let Some(venv) = venv() else {
        eprintln!("skipped: gooseBit is not installed (GOOSEBIT_VENV)");
        return;
    };
    let gb = GooseBit::start(&venv, "base");
    let paths = crate::update_support::sandbox("hawkbit-goosebit-base");
    svc::fsutil::atomic_write(
        &paths.device("/etc/svc-hawkbit.token"),
        b"goosebit-ignores-this-token",
        0o600,
    )
    .unwrap();
    let cfg = json!({"agent": {"svc-agent": {"hawkbit": {
        "server_url": gb.url(), "tenant": "DEFAULT", "controller_id": "kiosk-17",
        "auth": "target-token"}}}});
    let (cfg, _) = svc::config::parse_value(&cfg).unwrap();
    let mut t =
        HawkbitTransport::connect(&paths, cfg.agent.agent.hawkbit.as_ref().unwrap()).unwrap();
    // A new device: gooseBit asks for configData and a poll 10 s later, and offers no
    // deployment. The backend sends configData; gooseBit registers the device and, polled
    // again, gives its own poll time (60 s here).
    let mut interval = || match t.poll(&serde_json::Value::Null, None).unwrap() {
        PollOutcome::Changed { answer, .. } => {
            assert!(answer.targets.server.is_none() && answer.targets.agent.is_none());
            answer.poll_interval_secs
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(interval(), Some(10));
    assert_eq!(interval(), Some(60), "registered by PUT configData");
    let (_, received) = t.last_poll_bytes();
    assert!(received > 0);
}

// ---- SWUpdate images end to end (docs/hawkbit.md, *SWUpdate images*) ----------------------

/// A TCP relay in front of gooseBit that cuts the first artifact download after `cut` bytes
/// of its answer, as a dropped connection does, and keeps each request's head and the status
/// line of each answer. Links gooseBit writes name the relay (it builds them from `Host`).
struct CutRelay {
    port: u16,
    log: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
}

impl CutRelay {
    fn start(upstream: u16, cut: usize) -> CutRelay {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let cut_done = Arc::new(AtomicBool::new(false));
        let l2 = log.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut client) = conn else { continue };
                let log = l2.clone();
                let cut_done = cut_done.clone();
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                        if client.read(&mut b).unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(b[0]);
                    }
                    let text = String::from_utf8_lossy(&head).to_string();
                    let len: usize = text
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    let mut body = vec![0u8; len];
                    client.read_exact(&mut body).unwrap();
                    let lines: Vec<&str> = text
                        .trim_end()
                        .lines()
                        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                        .collect();
                    let fresh_download = lines[0].contains("/download ")
                        && !text.to_ascii_lowercase().contains("\r\nrange:");
                    let cutting = fresh_download && !cut_done.swap(true, Ordering::SeqCst);
                    let mut up = std::net::TcpStream::connect(("127.0.0.1", upstream)).unwrap();
                    up.write_all(
                        format!("{}\r\nConnection: close\r\n\r\n", lines.join("\r\n")).as_bytes(),
                    )
                    .unwrap();
                    up.write_all(&body).unwrap();
                    let mut sent = 0usize;
                    let mut status = String::new();
                    let mut buf = vec![0u8; 16 * 1024];
                    loop {
                        let n = up.read(&mut buf).unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        if status.is_empty() {
                            status = String::from_utf8_lossy(&buf[..n])
                                .lines()
                                .next()
                                .unwrap_or_default()
                                .to_string();
                        }
                        let n = if cutting { n.min(cut - sent) } else { n };
                        if client.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        sent += n;
                        if cutting && sent >= cut {
                            break;
                        }
                    }
                    log.lock().unwrap().push((text, status));
                    let _ = client.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        CutRelay { port, log }
    }
}

fn release(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_svc-release"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "svc-release {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// gooseBit's own API, as an operator's script uses it: the first user (`/setup`), an upload
/// (`PUT /api/v1/software`), an assignment (`PUT /api/v1/devices`), the device list.
struct Api {
    url: String,
    token: String,
}

impl Api {
    fn setup(gb: &GooseBit) -> Api {
        let r = minreq::post(format!("{}/setup", gb.url()))
            .with_header("Content-Type", "application/x-www-form-urlencoded")
            .with_body("username=admin%40example.org&password=swu-test-pw")
            .with_timeout(60)
            .send()
            .unwrap();
        assert_eq!(r.status_code, 200, "{}", r.as_str().unwrap_or_default());
        let v: serde_json::Value = serde_json::from_slice(r.as_bytes()).unwrap();
        Api {
            url: gb.url(),
            token: v["access_token"].as_str().unwrap().to_string(),
        }
    }

    fn upload(&self, file: &Path) -> String {
        let name = file.file_name().unwrap().to_string_lossy();
        let mut body = format!("--svcswu\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n").into_bytes();
        body.extend_from_slice(&std::fs::read(file).unwrap());
        body.extend_from_slice(b"\r\n--svcswu--\r\n");
        let r = minreq::put(format!("{}/api/v1/software", self.url))
            .with_header("Authorization", format!("Bearer {}", self.token))
            .with_header("Content-Type", "multipart/form-data; boundary=svcswu")
            .with_body(body)
            .with_timeout(120)
            .send()
            .unwrap();
        assert_eq!(
            r.status_code,
            200,
            "upload: {}",
            r.as_str().unwrap_or_default()
        );
        let v: serde_json::Value = serde_json::from_slice(r.as_bytes()).unwrap();
        v["id"].to_string()
    }

    fn assign(&self, device: &str, software: &str) {
        let r = minreq::put(format!("{}/api/v1/devices", self.url))
            .with_header("Authorization", format!("Bearer {}", self.token))
            .with_header("Content-Type", "application/json")
            .with_body(json!({"devices": [device], "software": software}).to_string())
            .with_timeout(60)
            .send()
            .unwrap();
        assert_eq!(
            r.status_code,
            200,
            "assign: {}",
            r.as_str().unwrap_or_default()
        );
    }

    fn get(&self, path: &str) -> serde_json::Value {
        let url = format!("{}/api/v1/devices/{path}", self.url);
        let r = minreq::get(url.trim_end_matches('/'))
            .with_header("Authorization", format!("Bearer {}", self.token))
            .with_timeout(60)
            .send()
            .unwrap();
        assert_eq!(
            r.status_code,
            200,
            "{path}: {}",
            r.as_str().unwrap_or_default()
        );
        serde_json::from_slice(r.as_bytes()).unwrap()
    }

    /// The device as the list shows it (the single-device resource fails validation once
    /// software is assigned in 0.2.12).
    fn device(&self, device: &str) -> serde_json::Value {
        let all = self.get("");
        all["devices"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["id"] == device).cloned())
            .unwrap_or_default()
    }

    /// What the device told gooseBit (the feedback's `details`).
    fn log(&self, device: &str) -> String {
        self.get(&format!("{device}/log"))["log"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

struct SwuRig {
    _gb: GooseBit,
    relay: CutRelay,
    api: Api,
    paths: svc::paths::Paths,
    key: PathBuf,
    dir: PathBuf,
}

const DEVICE: &str = "kiosk-17";

impl SwuRig {
    /// gooseBit behind the cutting relay, a device running svc-server 1.0.0 with the vendor
    /// key of a fresh `svc-release keygen`, registered with gooseBit by its first polls.
    fn start(venv: &Path, test: &str, cut: usize) -> SwuRig {
        let gb = GooseBit::start(venv, test);
        let relay = CutRelay::start(gb.port, cut);
        let api = Api::setup(&gb);
        let paths = crate::update_support::sandbox(&format!("hawkbit-goosebit-{test}"));
        crate::update_support::install_old(&paths, "svc-server", "1.0.0");
        svc::fsutil::atomic_write(
            &paths.device("/etc/svc-hawkbit.token"),
            b"goosebit-ignores-this-token",
            0o600,
        )
        .unwrap();
        let dir = paths.root().join("vendor");
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("vendor.key");
        release(&["keygen", key.to_str().unwrap()]);
        let pubkey = std::fs::read(dir.join("vendor.key.pub")).unwrap();
        svc::fsutil::atomic_write(&paths.signing_key(), &pubkey, 0o644).unwrap();
        let rig = SwuRig {
            _gb: gb,
            relay,
            api,
            paths,
            key,
            dir,
        };
        rig.poll();
        rig.poll();
        assert_eq!(rig.api.device(DEVICE)["sw_version"], "1.0.0");
        rig
    }

    fn transport(&self) -> HawkbitTransport {
        let cfg = json!({"agent": {"svc-agent": {"hawkbit": {
            "server_url": format!("http://127.0.0.1:{}", self.relay.port), "tenant": "DEFAULT",
            "controller_id": DEVICE, "auth": "target-token"}}}});
        let (cfg, _) = svc::config::parse_value(&cfg).unwrap();
        HawkbitTransport::connect(&self.paths, cfg.agent.agent.hawkbit.as_ref().unwrap())
            .unwrap()
            .with_download_options(crate::update_support::test_opts().download)
    }

    fn poll(&self) -> svc::protocol::PollAnswer {
        match self
            .transport()
            .poll(&serde_json::Value::Null, None)
            .unwrap()
        {
            PollOutcome::Changed { answer, .. } => *answer,
            other => panic!("{other:?}"),
        }
    }

    /// A signed `.swu` of a fake svc-server, made by the release tool, uploaded and assigned.
    fn publish(&self, version: &str, behavior: &str, pad: usize) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let bin = self.dir.join(format!("svc-server-{version}"));
        std::fs::write(
            &bin,
            crate::update_support::fake_binary("svc-server", version, behavior, pad),
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let swu = self.dir.join(format!("svc-server-{version}.swu"));
        release(&[
            "swu",
            "--key",
            self.key.to_str().unwrap(),
            "--out",
            swu.to_str().unwrap(),
            bin.to_str().unwrap(),
        ]);
        let id = self.api.upload(&swu);
        self.api.assign(DEVICE, &id);
        swu
    }

    fn install(&self, t: &svc::protocol::Target) -> svc::update::Outcome {
        let a = svc::update::Artifact {
            name: "svc-server".into(),
            version: t.version.clone(),
            url: t.url.clone(),
            sha256: t.sha256.clone(),
            size: t.size,
            signature: t.signature.clone(),
            identity: Some(self.transport().identity()),
        };
        svc::update::Engine::new(self.paths.clone(), crate::update_support::test_opts())
            .update(&a)
            .unwrap()
    }
}

#[test]
fn goosebit_swu_is_verified_activated_and_closed_after_probation_with_a_resumed_download() {
    let Some(venv) = venv() else {
        eprintln!("skipped: gooseBit is not installed (GOOSEBIT_VENV)");
        return;
    };
    let rig = SwuRig::start(&venv, "swu-ok", 1024 * 1024);
    rig.publish("2.0.0", "ok", 5 * 1024 * 1024);
    // The poll takes the action: the engine downloads the .swu from gooseBit (cut after
    // 1 MiB by the relay, resumed with Range), checks gooseBit's sha1, takes svc-server out
    // and checks it against sw-description's sha256 and the vendor signature.
    let answer = rig.poll();
    let t = answer
        .targets
        .server
        .expect("svc-server taken out of the .swu");
    assert_eq!(t.version, "2.0.0");
    assert!(
        t.url.starts_with("file://") && t.signature.is_some(),
        "{t:?}"
    );
    let log = rig.relay.log.lock().unwrap().clone();
    let downloads: Vec<_> = log
        .iter()
        .filter(|(h, _)| h.starts_with("GET ") && h.contains("/download "))
        .collect();
    assert_eq!(downloads.len(), 2, "one cut, one resumed: {downloads:?}");
    let resumed = downloads
        .iter()
        .find(|(h, _)| h.to_ascii_lowercase().contains("\r\nrange: bytes="))
        .expect("a Range request");
    assert!(
        resumed.1.contains(" 206 "),
        "gooseBit serves ranges: {}",
        resumed.1
    );
    assert!(resumed.0.to_ascii_lowercase().contains("\r\nif-range: "));

    assert!(matches!(
        rig.install(&t),
        svc::update::Outcome::Activated { .. }
    ));
    rig.poll();
    assert_eq!(
        rig.api.device(DEVICE)["last_state"],
        "Running",
        "downloaded, in probation"
    );
    svc::update::end_server_probation(&rig.paths, "2.0.0").unwrap();
    rig.poll();
    let d = rig.api.device(DEVICE);
    assert_eq!(d["last_state"], "Finished", "{d}");
    assert_eq!(d["sw_version"], "2.0.0");
    let answer = rig.poll();
    assert!(answer.targets.server.is_none(), "the action is over");
}

#[test]
fn goosebit_swu_that_crashes_is_rolled_back_and_reported_as_failure() {
    let Some(venv) = venv() else {
        eprintln!("skipped: gooseBit is not installed (GOOSEBIT_VENV)");
        return;
    };
    let rig = SwuRig::start(&venv, "swu-crash", usize::MAX);
    rig.publish("2.0.1", "exit1", 1000);
    let t = rig.poll().targets.server.expect("offered");
    assert!(matches!(
        rig.install(&t),
        svc::update::Outcome::Activated { .. }
    ));
    rig.poll();
    // The agent's probation rule rolls back the crashing build (agent::updates).
    svc::update::rollback(&rig.paths, "svc-server").unwrap();
    rig.poll();
    let d = rig.api.device(DEVICE);
    assert_eq!(d["last_state"], "Error", "{d}");
    let log = rig.api.log(DEVICE);
    assert!(
        log.contains("2.0.1 was rolled back") && log.contains("svc-server 1.0.0 runs"),
        "{log}"
    );
    assert_eq!(
        crate::update_support::active(&rig.paths, "svc-server").0,
        "1.0.0"
    );
}

#[test]
fn goosebit_swu_signed_by_a_stranger_is_refused_and_reported() {
    let Some(venv) = venv() else {
        eprintln!("skipped: gooseBit is not installed (GOOSEBIT_VENV)");
        return;
    };
    let rig = SwuRig::start(&venv, "swu-stranger", usize::MAX);
    // Another key than the device's: the archive is well formed, gooseBit takes it, the
    // agent refuses it whole and says why.
    let stranger = rig.dir.join("stranger.key");
    release(&["keygen", stranger.to_str().unwrap()]);
    let rig = SwuRig {
        key: stranger,
        ..rig
    };
    rig.publish("2.0.2", "ok", 1000);
    let e = rig
        .transport()
        .poll(&serde_json::Value::Null, None)
        .unwrap_err();
    assert!(e.to_string().contains("signature"), "{e}");
    let d = rig.api.device(DEVICE);
    assert_eq!(d["last_state"], "Error", "{d}");
    let log = rig.api.log(DEVICE);
    assert!(
        log.contains("refused by svc-agent") && log.contains("signature"),
        "{log}"
    );
    assert_eq!(
        crate::update_support::active(&rig.paths, "svc-server").0,
        "1.0.0"
    );
    assert!(
        !rig.paths.cache_dir().join("swu/files").exists(),
        "nothing left"
    );
}
