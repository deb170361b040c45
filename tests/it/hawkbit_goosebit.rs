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
