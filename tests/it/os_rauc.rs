//! OS images through RAUC (issue 43), process level: the real `svc-agent run` against a
//! `file://` directory offering a bundle, and a stand-in RAUC (`de.pengutronix.rauc` at `/`,
//! the interface of RAUC's `de.pengutronix.rauc.Installer.xml`) on a private bus that the
//! agent takes for the system bus (`DBUS_SYSTEM_BUS_ADDRESS`). The test plays the boot
//! loader: the agent's reboot is a line in a file (`SVC_TEST_REBOOT_FILE`, test builds
//! only); the test then kills the agent (the power goes), boots the slot the boot loader
//! would (the primary one unless marked bad), gives the boot a new id and starts the agent.
//!
//! The stand-in's bundles are text: `compatible=`, `version=`, `key=` lines (RAUC's own
//! checks: its compatible string and its keyring), then padding.
use crate::common::sandbox::*;
use crate::update_support::sha256_hex;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use zbus::blocking::Connection;
use zbus::zvariant::{OwnedValue, Value as ZValue};

const IFACE: &str = "de.pengutronix.rauc.Installer";
pub(crate) const COMPATIBLE: &str = "svc-lab-x86";
const SLOTS: [&str; 2] = ["rootfs.0", "rootfs.1"];

#[derive(Debug, Default)]
pub(crate) struct Fake {
    pub(crate) booted: usize,
    pub(crate) primary: usize,
    pub(crate) versions: [Option<String>; 2],
    pub(crate) bad: [bool; 2],
    pub(crate) operation: String,
    pub(crate) last_error: String,
    /// Installs asked for (bundle paths).
    pub(crate) installs: Vec<String>,
    pub(crate) marks: Vec<(String, String)>,
    /// An install waits while this is set (a long slot write).
    pub(crate) hold: bool,
    /// Every install fails with this (RAUC failing).
    pub(crate) fail: Option<String>,
    /// Boots so far: an install cut by a boot has no effect.
    pub(crate) epoch: u32,
    /// `GetPrimary` fails (a boot loader backend without `get-primary`).
    pub(crate) no_primary: bool,
    /// A real bundle (squashfs, `hsqs`: `rauc bundle`'s output, for the gooseBit test): its
    /// manifest is read with `unsquashfs`; this is the key the stand-in's keyring takes it
    /// as signed by (it checks no CMS).
    pub(crate) real_key: Option<String>,
    /// The machine's compatible string, when not `COMPATIBLE`.
    pub(crate) compatible: Option<String>,
    /// How long writing a slot takes (the power-cut campaign's installs).
    pub(crate) write_ms: u64,
    /// A slot being written, or left half-written by a power cut: no version, not bootable.
    pub(crate) torn: [bool; 2],
}

struct Installer {
    fake: Arc<Mutex<Fake>>,
    conn: Arc<Mutex<Option<Connection>>>,
}

fn fdo(m: &str) -> zbus::fdo::Error {
    zbus::fdo::Error::Failed(m.into())
}

fn slot_index(fake: &Fake, id: &str) -> Option<usize> {
    match id {
        "booted" => Some(fake.booted),
        "other" => Some(1 - fake.booted),
        n => SLOTS.iter().position(|s| *s == n),
    }
}

/// What the stand-in does with a bundle: RAUC's checks, then the other slot written (torn
/// until whole, `write_ms`) and made primary. Returns `Completed`'s code, or `None` when a
/// boot ended the install (RAUC went with the power: no signal).
fn run_install(fake: &Arc<Mutex<Fake>>, source: &str) -> Option<i32> {
    let epoch = fake.lock().unwrap().epoch;
    loop {
        let f = fake.lock().unwrap();
        if !f.hold {
            break;
        }
        drop(f);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut f = fake.lock().unwrap();
    if f.epoch != epoch {
        return None;
    }
    let bytes = std::fs::read(source).unwrap_or_default();
    let text = match (&f.real_key, bytes.starts_with(b"hsqs")) {
        (Some(key), true) => {
            let out = Command::new("unsquashfs")
                .args(["-cat", source, "manifest.raucm"])
                .output()
                .expect("unsquashfs (squashfs-tools) is needed");
            format!("{}\nkey={key}\n", String::from_utf8_lossy(&out.stdout))
        }
        _ => String::from_utf8_lossy(&bytes).to_string(),
    };
    let compatible = f.compatible.clone().unwrap_or(COMPATIBLE.into());
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or("")
            .to_string()
    };
    let err = if let Some(e) = f.fail.clone() {
        Some(e)
    } else if field("compatible") != compatible {
        Some(format!(
            "Compatible mismatch: Expected '{compatible}' but bundle manifest has '{}'",
            field("compatible")
        ))
    } else if field("key") != "lab" {
        Some("signature verification failed: unable to get local issuer certificate".into())
    } else {
        None
    };
    if let Some(e) = err {
        f.operation = "idle".into();
        f.last_error = e;
        return Some(1);
    }
    // The slot is overwritten: RAUC invalidates it first and makes it primary only once whole.
    let other = 1 - f.booted;
    f.versions[other] = None;
    f.torn[other] = true;
    let end = std::time::Instant::now() + std::time::Duration::from_millis(f.write_ms);
    while std::time::Instant::now() < end {
        drop(f);
        std::thread::sleep(std::time::Duration::from_millis(5));
        f = fake.lock().unwrap();
        if f.epoch != epoch {
            return None;
        }
    }
    f.operation = "idle".into();
    f.versions[other] = Some(field("version"));
    f.torn[other] = false;
    f.bad[other] = false;
    f.primary = other;
    Some(0)
}

#[zbus::interface(name = "de.pengutronix.rauc.Installer")]
impl Installer {
    fn install_bundle(
        &self,
        source: String,
        _args: HashMap<String, OwnedValue>,
    ) -> zbus::fdo::Result<()> {
        let mut f = self.fake.lock().unwrap();
        if f.operation == "installing" {
            return Err(fdo("Already processing a different method"));
        }
        f.operation = "installing".into();
        f.last_error.clear();
        f.installs.push(source.clone());
        drop(f);
        let (fake, conn) = (self.fake.clone(), self.conn.clone());
        std::thread::spawn(move || {
            if let Some(code) = run_install(&fake, &source) {
                let c = conn.lock().unwrap().clone().unwrap();
                c.emit_signal(None::<&str>, "/", IFACE, "Completed", &(code,))
                    .unwrap();
            }
        });
        Ok(())
    }

    fn mark(&self, state: String, slot: String) -> zbus::fdo::Result<(String, String)> {
        let mut f = self.fake.lock().unwrap();
        let i = slot_index(&f, &slot).ok_or_else(|| fdo("no such slot"))?;
        match state.as_str() {
            "good" => f.bad[i] = false,
            "bad" => f.bad[i] = true,
            "active" => f.primary = i,
            _ => return Err(fdo("bad state")),
        }
        f.marks.push((state.clone(), slot));
        Ok((
            SLOTS[i].into(),
            format!("marked slot {} as {state}", SLOTS[i]),
        ))
    }

    fn get_slot_status(&self) -> Vec<(String, HashMap<String, OwnedValue>)> {
        let f = self.fake.lock().unwrap();
        let v = |s: &str| OwnedValue::try_from(ZValue::from(s.to_string())).unwrap();
        (0..2)
            .map(|i| {
                let mut d = HashMap::new();
                d.insert("class".to_string(), v("rootfs"));
                d.insert("bootname".to_string(), v(["A", "B"][i]));
                let state = if i == f.booted { "booted" } else { "inactive" };
                d.insert("state".to_string(), v(state));
                d.insert(
                    "boot-status".to_string(),
                    v(if f.bad[i] { "bad" } else { "good" }),
                );
                if let Some(ver) = &f.versions[i] {
                    d.insert("bundle.version".to_string(), v(ver));
                }
                (SLOTS[i].to_string(), d)
            })
            .collect()
    }

    fn get_primary(&self) -> zbus::fdo::Result<String> {
        let f = self.fake.lock().unwrap();
        if f.no_primary {
            return Err(fdo(
                "Failed getting primary slot: not supported by the backend",
            ));
        }
        Ok(SLOTS[f.primary].into())
    }

    #[zbus(property)]
    fn operation(&self) -> String {
        self.fake.lock().unwrap().operation.clone()
    }

    #[zbus(property)]
    fn last_error(&self) -> String {
        self.fake.lock().unwrap().last_error.clone()
    }

    #[zbus(property)]
    fn progress(&self) -> (i32, String, i32) {
        let busy = self.fake.lock().unwrap().operation == "installing";
        (if busy { 40 } else { 100 }, "Installing".into(), 1)
    }

    #[zbus(property)]
    fn compatible(&self) -> String {
        let f = self.fake.lock().unwrap();
        f.compatible.clone().unwrap_or(COMPATIBLE.into())
    }

    #[zbus(property)]
    fn boot_slot(&self) -> String {
        ["A", "B"][self.fake.lock().unwrap().booted].into()
    }
}

pub(crate) struct Bus(Child);

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private bus; `services`: a folder of D-Bus activation files it may start from.
pub(crate) fn private_bus(services: Option<&std::path::Path>) -> (Bus, String) {
    let mut cmd = Command::new("dbus-daemon");
    match services {
        None => cmd.args(["--session", "--nofork", "--print-address=1"]),
        Some(dir) => {
            let conf = dir.join("bus.conf");
            std::fs::write(
                &conf,
                format!(
                    "<busconfig><include>/usr/share/dbus-1/session.conf</include>\
                     <servicedir>{}</servicedir></busconfig>",
                    dir.display()
                ),
            )
            .unwrap();
            cmd.arg(format!("--config-file={}", conf.display()))
                .args(["--nofork", "--print-address=1"])
        }
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dbus-daemon (package dbus) is needed");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (Bus(child), line.trim().to_string())
}

/// One machine: a sandbox, a bus, RAUC on it (unless `with_rauc` is false), slot 0 booted
/// with OS 1.0. The power-cut campaign's OS phase runs one too (`exe`: its agent copy).
pub(crate) struct Machine {
    pub(crate) sb: Sandbox,
    pub(crate) fake: Arc<Mutex<Fake>>,
    _rauc: Option<Connection>,
    addr: String,
    pub(crate) agent: Option<Child>,
    boots: u32,
    _bus: Bus,
    pub(crate) exe: std::path::PathBuf,
}

impl Machine {
    pub(crate) fn new(name: &str, with_rauc: bool) -> Machine {
        Machine::on_bus(name, with_rauc, private_bus(None))
    }

    fn on_bus(name: &str, with_rauc: bool, (bus, addr): (Bus, String)) -> Machine {
        let fake = Arc::new(Mutex::new(Fake {
            versions: [Some("1.0".into()), None],
            operation: "idle".into(),
            ..Fake::default()
        }));
        let rauc = with_rauc.then(|| {
            let slot = Arc::new(Mutex::new(None));
            let conn = zbus::blocking::connection::Builder::address(addr.as_str())
                .unwrap()
                .name("de.pengutronix.rauc")
                .unwrap()
                .serve_at(
                    "/",
                    Installer {
                        fake: fake.clone(),
                        conn: slot.clone(),
                    },
                )
                .unwrap()
                .build()
                .unwrap();
            *slot.lock().unwrap() = Some(conn.clone());
            conn
        });
        let sb = Sandbox::new(name);
        sb.file_app();
        sb.install_fake_server();
        let m = Machine {
            sb,
            fake,
            _rauc: rauc,
            addr,
            agent: None,
            boots: 0,
            _bus: bus,
            exe: env!("CARGO_BIN_EXE_svc-agent").into(),
        };
        m.new_boot_id();
        m
    }

    pub(crate) fn new_boot_id(&self) {
        let p = self.sb.root.join("proc/sys/kernel/random");
        std::fs::create_dir_all(&p).unwrap();
        let id = format!("boot-{}-{}", self.boots, std::process::id());
        std::fs::write(p.join("boot_id"), id).unwrap();
    }

    pub(crate) fn reboot_file(&self) -> std::path::PathBuf {
        self.sb.root.join("reboots")
    }

    pub(crate) fn reboots(&self) -> usize {
        std::fs::read_to_string(self.reboot_file())
            .unwrap_or_default()
            .lines()
            .count()
    }

    pub(crate) fn start(&mut self, extra: &[(&str, &str)]) {
        let rf = self.reboot_file();
        let mut env = vec![
            ("DBUS_SYSTEM_BUS_ADDRESS", self.addr.as_str()),
            ("SVC_TEST_REBOOT_FILE", path_str(&rf)),
            ("SVC_AGENT_PROBATION_SECS", "1"),
            ("SVC_AGENT_OS_GATE_SECS", "90"),
        ];
        env.extend_from_slice(extra);
        self.agent = Some(self.sb.spawn_agent_exe(&self.exe, &env));
    }

    /// The power goes: the agent dies where it stands (svc-server with it: its group).
    pub(crate) fn power_off(&mut self) {
        // The agent and every process it forked: a child not yet exec'd holds the agent's
        // instance lock, and the next boot's agent found it taken (the campaign's OS phase).
        if let Some(mut a) = self.agent.take() {
            crate::powercut_campaign::power_cut(Some(&mut a), &self.sb.root);
        }
        // Only a process that is still this sandbox's svc-server: a pid may have been reused.
        let ours = path_str(&self.sb.root).to_string();
        for pid in self.sb.fake("pids").lines() {
            if let Ok(p) = pid.trim().parse::<i32>() {
                let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains(&ours) {
                    svc::sys::kill(p, libc::SIGKILL);
                }
            }
        }
    }

    /// The boot loader: the primary slot unless it is marked bad (then the other one), or
    /// `fallback` (the new slot does not come up).
    pub(crate) fn boot(&mut self, fallback: bool, extra: &[(&str, &str)]) {
        self.power_cycle(fallback);
        self.start(extra);
    }

    /// The power goes and comes back: the boot loader picks the slot (as `boot`), a new boot
    /// id; the agent not started yet.
    pub(crate) fn power_cycle(&mut self, fallback: bool) {
        self.power_off();
        {
            let mut f = self.fake.lock().unwrap();
            // A cut during an install ends it; RAUC's primary is unchanged then.
            f.operation = "idle".into();
            f.hold = false;
            f.epoch += 1;
            let p = f.primary;
            f.booted = if fallback || f.bad[p] { 1 - p } else { p };
            f.primary = f.booted;
        }
        // Each boot's agent log kept beside the next one's.
        let log = self.sb.root.join("agent.log");
        let _ = std::fs::rename(&log, log.with_extension(format!("log.{}", self.boots)));
        self.boots += 1;
        self.new_boot_id();
    }

    pub(crate) fn os(&self) -> Value {
        self.sb.status()["os"].clone()
    }

    pub(crate) fn wait_os(&self, what: &str, cond: impl Fn(&Value) -> bool) {
        wait_for(what, 120, || cond(&self.os()));
        let _ = &self.sb;
    }

    pub(crate) fn wait_reboots(&self, n: usize) {
        wait_for(&format!("reboot request {n}"), 120, || self.reboots() >= n);
    }

    /// Offers `body` as OS `version` (`bytes` on disk may differ from `body`: a truncated
    /// file); `sig` is the vendor signature, if any.
    pub(crate) fn offer(&self, version: &str, body: &[u8], on_disk: &[u8], sig: Option<String>) {
        self.offer_with(config(), version, body, on_disk, sig);
    }

    /// `offer` with the app's config `cfg`.
    pub(crate) fn offer_with(
        &self,
        cfg: Value,
        version: &str,
        body: &[u8],
        on_disk: &[u8],
        sig: Option<String>,
    ) {
        std::fs::write(self.sb.app.join(format!("os-{version}.raucb")), on_disk).unwrap();
        let mut t = json!({"version": version, "url": format!("os-{version}.raucb"),
            "sha256": sha256_hex(body), "size": body.len(), "format": "rauc-bundle"});
        if let Some(s) = sig {
            t["signature"] = json!(s);
        }
        self.sb
            .answer(json!({"config": cfg, "poll_interval_secs": 1,
                              "targets": {"os": t}}));
    }

    /// Every boot's agent log, oldest first.
    pub(crate) fn logs(&self) -> String {
        let mut all = String::new();
        for b in 0..self.boots {
            let p = self.sb.root.join(format!("agent.log.{b}"));
            all.push_str(&std::fs::read_to_string(p).unwrap_or_default());
        }
        all + &self.sb.log()
    }

    pub(crate) fn fake(&self) -> std::sync::MutexGuard<'_, Fake> {
        self.fake.lock().unwrap()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        self.power_off();
    }
}

pub(crate) fn config() -> Value {
    json!({"agent": {"svc-server": {"release_channel": "stable"}}})
}

pub(crate) fn bundle(version: &str, compatible: &str, key: &str, pad: usize) -> Vec<u8> {
    let mut b = format!("compatible={compatible}\nversion={version}\nkey={key}\n").into_bytes();
    b.resize(b.len() + pad, b'#');
    b
}

pub(crate) fn good(version: &str) -> Vec<u8> {
    bundle(version, COMPATIBLE, "lab", 200_000)
}

pub(crate) const CRASHING_SERVER: &str = "#!/bin/sh\nout=\"$SVC_HOME/../fake-server\"\nmkdir -p \"$out\"\necho $$ >> \"$out/pids\"\nexit 3\n";

pub(crate) fn install_server(sb: &Sandbox, script: &str) {
    let p = sb.root.join("opt/svc/bin/svc-server");
    let tmp = sb.root.join("opt/svc/bin/.svc-server.tmp");
    std::fs::write(&tmp, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(tmp, p).unwrap();
}

/// Installed, rebooted into, gate passed, marked good, reported; the next polls install
/// nothing again.
#[test]
fn a_good_image_is_installed_booted_marked_good_and_reported() {
    let mut m = Machine::new("os-good", true);
    let b = good("2.0");
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    m.wait_reboots(1);
    {
        let f = m.fake();
        assert_eq!(f.installs.len(), 1, "{}", m.sb.log());
        assert!(
            f.installs[0].ends_with("/opt/svc/os/bundle-2.0.raucb"),
            "{:?}",
            f.installs
        );
        assert_eq!(f.primary, 1);
    }
    m.wait_os("the reboot in the status", |o| o["state"] == "rebooting");
    m.boot(false, &[]);
    m.wait_os("OS 2.0 marked good", |o| o["version"] == "2.0");
    let os = m.os();
    assert_eq!(os["previous"], "1.0", "{os}");
    assert_eq!(os["booted_slot"], "rootfs.1", "{os}");
    assert_eq!(os["last_result"], "installed 2.0", "{os}");
    assert_eq!(os["offered"], "2.0", "{os}");
    assert_eq!(os["compatible"], COMPATIBLE, "{os}");
    assert!(m
        .fake()
        .marks
        .contains(&("good".to_string(), "booted".to_string())));
    // The bundle is gone from the data partition once installed.
    assert!(!m.sb.root.join("opt/svc/os/bundle-2.0.raucb").exists());
    m.sb.wait_polls(3, 60);
    assert_eq!(m.fake().installs.len(), 1);
    assert_eq!(m.reboots(), 1);
    assert!(
        m.sb.log().contains("passed its health gate"),
        "{}",
        m.sb.log()
    );
}

/// svc-server crashes on the new OS: the gate fails, the slot is marked bad, the machine
/// boots the old one, which reports the rollback; the version is not retried.
#[test]
fn an_image_whose_svc_server_fails_the_gate_is_rolled_back_and_not_retried() {
    let mut m = Machine::new("os-gate-fail", true);
    let b = good("2.0");
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    m.wait_reboots(1);
    // The new OS's svc-server cannot run.
    install_server(&m.sb, CRASHING_SERVER);
    m.boot(false, &[]);
    m.wait_reboots(2);
    {
        let f = m.fake();
        assert!(
            f.marks.contains(&("bad".into(), "rootfs.1".into())),
            "{:?}",
            f.marks
        );
        assert!(
            f.marks.contains(&("active".into(), "rootfs.0".into())),
            "{:?}",
            f.marks
        );
    }
    install_server(&m.sb, FAKE_SERVER);
    m.boot(false, &[]);
    m.wait_os("the rollback reported", |o| {
        o["state"] == "idle"
            && o["last_result"]
                .as_str()
                .is_some_and(|r| r.starts_with("rolled back"))
    });
    let os = m.os();
    assert_eq!(os["booted_slot"], "rootfs.0", "{os}");
    assert_eq!(os["version"], "1.0", "{os}");
    assert_eq!(os["bad"], json!(["2.0"]), "{os}");
    assert!(
        os["last_result"]
            .as_str()
            .unwrap()
            .contains("svc-server crashed"),
        "{os}"
    );
    m.sb.wait_polls(3, 60);
    assert_eq!(
        m.fake().installs.len(),
        1,
        "a bad version was installed again"
    );
}

/// The new slot never comes up: the boot loader's fallback boots the old one, and the agent
/// there sees it, marks the new slot bad and reports it.
#[test]
fn the_boot_loaders_fallback_is_seen_and_reported() {
    let mut m = Machine::new("os-fallback", true);
    let b = good("2.0");
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    m.wait_reboots(1);
    m.boot(true, &[]);
    m.wait_os("the fallback reported", |o| o["bad"] == json!(["2.0"]));
    let os = m.os();
    assert_eq!(os["booted_slot"], "rootfs.0", "{os}");
    assert!(
        os["last_result"].as_str().unwrap().contains("did not boot"),
        "{os}"
    );
    assert!(m.fake().marks.contains(&("bad".into(), "rootfs.1".into())));
    assert_eq!(m.reboots(), 1);
}

/// A power cut while RAUC writes the slot, and another during the first boot of the new
/// slot: a working slot boots each time and the machine converges on the new OS.
#[test]
fn power_cuts_during_the_install_and_the_first_boot_converge() {
    let mut m = Machine::new("os-cuts", true);
    let b = good("2.0");
    m.fake().hold = true;
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    wait_for("RAUC to be installing", 120, || {
        m.fake().installs.len() == 1
    });
    m.wait_os("the install under way", |o| o["state"] == "installing");
    // Cut 1: during the install. The old slot boots; the install is asked for again.
    m.boot(false, &[]);
    assert_eq!(m.fake().booted, 0);
    m.wait_reboots(1);
    assert_eq!(m.fake().installs.len(), 2);
    // Cut 2: the new slot's first boot, inside its gate (svc-server's probation is long).
    m.boot(false, &[("SVC_AGENT_PROBATION_SECS", "3600")]);
    m.wait_os("the gate on the new slot", |o| o["state"] == "gate");
    m.boot(false, &[]);
    m.wait_os("OS 2.0 marked good", |o| o["version"] == "2.0");
    assert_eq!(m.fake().booted, 1);
    assert_eq!(m.fake().installs.len(), 2);
    assert!(
        m.logs().contains("the install was interrupted"),
        "{}",
        m.logs()
    );
}

/// The app is away as the new slot boots and comes back late in the gate: the agent's poll
/// backoff (doubling to 300 s) must not outlast the deadline and roll back a healthy OS whose
/// app is reachable again (#43).
#[test]
fn an_app_back_late_in_the_gate_is_reached_before_its_deadline() {
    let mut m = Machine::new("os-gate-app-late", true);
    let b = good("2.0");
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    m.wait_reboots(1);
    // The app away for the new slot's boot: every poll fails, the backoff grows.
    let (answer, away) = (m.sb.app.join("poll.json"), m.sb.app.join("poll.json.away"));
    std::fs::rename(&answer, &away).unwrap();
    m.boot(false, &[("SVC_AGENT_OS_GATE_SECS", "100")]);
    let os_json = m.sb.root.join("opt/svc/os.json");
    let mut since = 0;
    wait_for("the gate on the new slot (os.json)", 120, || {
        let v: Value = std::fs::read(&os_json)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        since = v["phase"]["since"].as_u64().unwrap_or(0);
        v["phase"]["name"] == "gate"
    });
    // The input: the app returns 80 s into the 100 s gate, when the backoff's next try may
    // be a minute or more away (its eighth try waits 1-128 s; the fix polls
    // at least every 10 s here).
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    wait_for("80 s of the gate to pass", 200, || now() >= since + 80);
    std::fs::rename(&away, &answer).unwrap();
    wait_for("the gate's verdict", 200, || {
        m.reboots() >= 2 || m.os()["version"] == "2.0"
    });
    assert_eq!(
        m.reboots(),
        1,
        "rolled back although the app was back within the gate: {}",
        m.logs()
    );
    assert!(m.logs().contains("passed its health gate"), "{}", m.logs());
}

/// Bad input, each refused with a clear error, the old slot untouched, no reboot.
#[test]
fn a_bundle_for_another_compatible_or_another_rauc_key_is_refused_by_rauc() {
    let mut m = Machine::new("os-refused", true);
    let b = bundle("2.0", "another-board", "lab", 1000);
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    m.wait_os("the refusal", |o| o["bad"] == json!(["2.0"]));
    assert!(
        m.os()["last_result"]
            .as_str()
            .unwrap()
            .contains("Compatible mismatch"),
        "{}",
        m.os()
    );
    let b = bundle("3.0", COMPATIBLE, "stranger", 1000);
    m.offer("3.0", &b, &b, None);
    m.wait_os("the second refusal", |o| o["bad"] == json!(["2.0", "3.0"]));
    assert!(m.os()["last_result"]
        .as_str()
        .unwrap()
        .contains("signature verification failed"));
    // Refused for what it is, never retried: its bundle is not kept.
    wait_for("the refused bundles removed", 60, || {
        std::fs::read_dir(m.sb.root.join("opt/svc/os"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    });
    let f = m.fake();
    assert_eq!((f.booted, f.primary), (0, 0));
    assert_eq!(m.reboots(), 0);
    assert!(m.sb.status()["svc_server"]["running"] == json!(true));
}

#[test]
fn a_wrong_vendor_signature_is_refused_before_rauc_sees_a_byte() {
    let mut m = Machine::new("os-vendor-sig", true);
    // A vendor key on the device; the offer's signature is by no key of it.
    std::fs::write(
        m.sb.root.join("etc/svc-signing.pub"),
        format!("{}\n", "ab".repeat(32)),
    )
    .unwrap();
    let b = good("2.0");
    let sig = svc::encoding::base64_encode(&[7u8; 64]);
    m.offer("2.0", &b, &b, Some(sig));
    m.start(&[]);
    m.wait_os("the refusal", |o| o["bad"] == json!(["2.0"]));
    assert!(
        m.os()["last_result"]
            .as_str()
            .unwrap()
            .contains("signature"),
        "{}",
        m.os()
    );
    assert!(m.fake().installs.is_empty());
    assert!(!m.sb.root.join("opt/svc/os/bundle-2.0.raucb.part").exists());
    assert_eq!(m.reboots(), 0);
}

#[test]
fn a_truncated_bundle_is_refused_before_rauc() {
    let mut m = Machine::new("os-truncated", true);
    let b = good("2.0");
    m.offer("2.0", &b, &b[..b.len() / 2], None);
    m.start(&[]);
    m.wait_os("the refusal", |o| o["bad"] == json!(["2.0"]));
    assert!(
        m.os()["last_result"].as_str().unwrap().contains("size"),
        "{}",
        m.os()
    );
    assert!(m.fake().installs.is_empty());
    assert_eq!(m.reboots(), 0);
}

#[test]
fn a_bundle_larger_than_the_space_left_is_not_downloaded() {
    let mut m = Machine::new("os-space", true);
    let _fs = crate::update_support::SmallFs::mount(&m.sb.root.join("opt/svc/os"), "4m");
    let b = bundle("2.0", COMPATIBLE, "lab", 6 << 20);
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    m.wait_os("the failure", |o| {
        o["last_result"]
            .as_str()
            .is_some_and(|r| r.contains("free space"))
    });
    assert!(m.fake().installs.is_empty());
    assert_eq!(m.reboots(), 0);
    assert!(!m.sb.root.join("opt/svc/os/bundle-2.0.raucb.part").exists());
}

#[test]
fn an_offer_while_an_install_runs_waits_for_it() {
    let mut m = Machine::new("os-second-offer", true);
    m.fake().hold = true;
    let b = good("2.0");
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    wait_for("RAUC to be installing", 120, || {
        m.fake().installs.len() == 1
    });
    let c = good("3.0");
    m.offer("3.0", &c, &c, None);
    wait_for("the second offer's wait said", 120, || {
        m.sb.log()
            .contains("OS 3.0 offered while OS 2.0 is being installed")
    });
    assert_eq!(m.fake().installs.len(), 1);
    m.fake().hold = false;
    m.wait_reboots(1);
    assert_eq!(m.fake().versions[1].as_deref(), Some("2.0"));
}

#[test]
fn rauc_missing_or_failing_is_reported_and_the_old_slot_kept() {
    let mut m = Machine::new("os-no-rauc", false);
    let b = good("2.0");
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    m.wait_os("RAUC's absence reported", |o| {
        o["error"]
            .as_str()
            .is_some_and(|e| e.contains("de.pengutronix.rauc"))
    });
    assert!(
        !m.sb.root.join("opt/svc/os").exists(),
        "downloaded with no RAUC to install it"
    );
    wait_for("svc-server running", 60, || {
        m.sb.status()["svc_server"]["running"] == json!(true)
    });
    drop(m);

    let mut m = Machine::new("os-rauc-fails", true);
    m.fake().fail = Some("Failed to mount bundle: no loop device".into());
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    m.wait_os("RAUC's failure reported", |o| {
        o["last_result"]
            .as_str()
            .is_some_and(|r| r.contains("no loop device"))
    });
    let f = m.fake();
    assert_eq!((f.booted, f.primary), (0, 0));
    drop(f);
    assert_eq!(m.reboots(), 0);
}

/// An image that leaves rauc.service to D-Bus activation: the agent asks the bus to start
/// RAUC (its activation file runs), instead of waiting for a name nobody will take.
#[test]
fn rauc_left_to_dbus_activation_is_started_by_the_agent() {
    let services =
        std::env::temp_dir().join(format!("svc-test-os-activation-bus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&services);
    std::fs::create_dir_all(&services).unwrap();
    let started = services.join("started");
    std::fs::write(
        services.join("de.pengutronix.rauc.service"),
        format!(
            "[D-BUS Service]\nName=de.pengutronix.rauc\nExec=/bin/sh -c 'echo started >> {}'\n",
            started.display()
        ),
    )
    .unwrap();
    let mut m = Machine::on_bus("os-activation", false, private_bus(Some(&services)));
    let b = good("2.0");
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    wait_for("the bus to start RAUC for the agent", 60, || {
        started.exists()
    });
    drop(m);
    let _ = std::fs::remove_dir_all(&services);
}

fn release(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_svc-release"))
        .args(args)
        .output()
        .unwrap()
}

/// `svc-release publish --os-bundle` writes `targets.os` (format, sha256, size, the vendor's
/// signature under the name `os`) into the management directory; `verify` checks it; a device
/// with the vendor key installs it through RAUC. A file that is no RAUC bundle is refused.
#[test]
fn svc_release_publishes_an_os_bundle_that_a_keyed_device_installs() {
    let mut m = Machine::new("os-publish", true);
    let key = m.sb.root.join("vendor.key");
    let out = release(&["keygen", path_str(&key)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::copy(
        key.with_extension("key.pub"),
        m.sb.root.join("etc/svc-signing.pub"),
    )
    .unwrap();
    let mut b = b"hsqs\n".to_vec();
    b.extend_from_slice(&good("2.0"));
    let file = m.sb.root.join("update-2.0.raucb");
    std::fs::write(&file, &b).unwrap();
    let app = path_str(&m.sb.app).to_string();
    assert!(release(&["init", &app]).status.success());
    let arch = svc::update::this_target();
    let out = release(&[
        "publish",
        "--key",
        path_str(&key),
        "--target",
        arch,
        "--os-bundle",
        path_str(&file),
        "--os-version",
        "2.0",
        &app,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let poll: Value =
        serde_json::from_slice(&std::fs::read(m.sb.app.join("poll.json")).unwrap()).unwrap();
    let os = &poll["targets"]["os"];
    assert_eq!(os["format"], "rauc-bundle", "{poll}");
    assert_eq!(os["sha256"], sha256_hex(&b).as_str());
    assert_eq!(os["size"], b.len());
    let pubkey = key.with_extension("key.pub");
    let out = release(&["verify", "--pub", path_str(&pubkey), "--target", arch, &app]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok: os 2.0"));

    // Not a RAUC bundle: refused, the directory unchanged.
    let before = std::fs::read(m.sb.app.join("poll.json")).unwrap();
    let junk = m.sb.root.join("junk.raucb");
    std::fs::write(&junk, b"#!/bin/sh\n").unwrap();
    let out = release(&[
        "publish",
        "--key",
        path_str(&key),
        "--target",
        arch,
        "--os-bundle",
        path_str(&junk),
        "--os-version",
        "3.0",
        &app,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a RAUC bundle"));
    assert_eq!(std::fs::read(m.sb.app.join("poll.json")).unwrap(), before);

    // The device: poll.json as published, a config beside it.
    let mut poll = poll;
    poll["poll_interval_secs"] = json!(1);
    m.sb.answer(poll);
    m.start(&[]);
    m.wait_reboots(1);
    m.boot(false, &[]);
    m.wait_os("OS 2.0 marked good", |o| o["version"] == "2.0");
}

/// agent-syscfg's `upgrades.type: none` holds OS images as it holds apt upgrades: offered,
/// reported, not installed.
#[test]
fn upgrades_type_none_takes_no_os_image() {
    let mut m = Machine::new("os-upgrades-none", true);
    let b = good("2.0");
    m.offer("2.0", &b, &b, None);
    let mut answer: Value =
        serde_json::from_slice(&std::fs::read(m.sb.app.join("poll.json")).unwrap()).unwrap();
    answer["config"]["agent"]["agent-syscfg"] =
        json!({"attributes": {"upgrades": {"type": "none"}}});
    m.sb.answer(answer);
    m.start(&[]);
    m.wait_os("the hold reported", |o| {
        o["waiting"]
            .as_str()
            .is_some_and(|w| w.contains("upgrades.type"))
    });
    m.sb.wait_polls(3, 60);
    assert!(m.fake().installs.is_empty());
    assert!(!m.sb.root.join("opt/svc/os").exists());
}

/// The agent killed at each of its OS crash points (`SVC_CRASH_AT`, test builds), the power
/// then cut: the boot loader boots a working slot and the machine converges on the new OS.
/// At `os-rebooting` the agent is also restarted once without a reboot: it asks again.
#[test]
fn every_os_crash_point_boots_a_working_slot_and_converges() {
    for point in ["os-installing", "os-installed", "os-rebooting"] {
        let mut m = Machine::new(&format!("os-crash-{point}"), true);
        let b = good("2.0");
        m.offer("2.0", &b, &b, None);
        m.start(&[("SVC_CRASH_AT", point)]);
        let mut agent = m.agent.take().unwrap();
        wait_for(&format!("the agent to die at {point}"), 120, || {
            agent.try_wait().unwrap().is_some()
        });
        if point == "os-rebooting" {
            // systemd restarts the agent; the machine did not reboot.
            m.start(&[]);
            m.wait_reboots(1);
        }
        m.boot(false, &[]);
        // Each reboot the agent asks for is carried out, until 2.0 is marked good.
        let mut seen = m.reboots();
        wait_for(
            &format!("OS 2.0 marked good after a cut at {point}"),
            120,
            || {
                if m.reboots() > seen {
                    seen = m.reboots();
                    m.boot(false, &[]);
                }
                m.os()["version"] == "2.0"
            },
        );
        // No bundle kept once its slot is written (seed 4344 cut 6 of the campaign: a cut
        // at `os-installed` left the whole bundle on the data partition for good; seed 4345
        // cut 62: still there when the slot was marked good).
        let dir = m.sb.root.join("opt/svc/os");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{point}: left in os/: {left:?}");
        let f = m.fake();
        assert_eq!(f.booted, 1, "{point}");
        // RAUC asked once: at `os-installing` the cut came before the call (the agent on the
        // old slot asks then), after it RAUC's finished slot is recognised, not rewritten.
        assert_eq!(f.installs.len(), 1, "{point}: {:?}", f.installs);
    }
}

/// A boot loader backend without `get-primary`: the slot RAUC wrote is found in its slot
/// status (the bundle's version) instead.
#[test]
fn without_get_primary_the_written_slot_is_found_in_the_slot_status() {
    let mut m = Machine::new("os-no-primary", true);
    m.fake().no_primary = true;
    let b = good("2.0");
    m.offer("2.0", &b, &b, None);
    m.start(&[]);
    m.wait_reboots(1);
    m.boot(false, &[]);
    m.wait_os("OS 2.0 marked good", |o| o["version"] == "2.0");
    assert_eq!(m.os()["booted_slot"], "rootfs.1");
}

/// Attack (issue 44): an OS bundle was downloaded whole whatever the byte budget said (the
/// OS track's download options carried no gate). Now it waits as a binary does: no request
/// for it, RAUC untouched, the status says what it waits for (`os.waiting`, and until when
/// in `budget.waiting`), the log says it once and no failure; the next period downloads
/// and installs it.
#[test]
fn an_os_bundle_over_the_byte_budget_waits_and_the_next_period_resumes_it() {
    use crate::common::https::{Behavior, Front, HttpsServer};
    let mut m = Machine::new("os-budget", true);
    let srv = HttpsServer::start_behind(&m.sb.root.join("tls"), Front::Direct);
    m.sb.write_credentials(srv.base_url());
    let b = good("2.0");
    srv.add("/artifacts/os-2.0.raucb", b.clone(), Behavior::Normal);
    const LIMIT: u64 = 4_000_000_000;
    srv.set_answer(json!({
        "poll_interval_secs": 1,
        "config": {"agent": {"svc-agent": {"updates": {"budget": {"day_bytes": LIMIT}}}}},
        "targets": {"os": {"version": "2.0", "url": "artifacts/os-2.0.raucb",
            "sha256": sha256_hex(&b), "size": b.len(), "format": "rauc-bundle"}},
    }));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let ledger = m.sb.root.join("opt/svc/budget.json");
    // Half the bundle is left today.
    let p = svc::update::budget::period(now);
    let spent = LIMIT - b.len() as u64 / 2;
    std::fs::create_dir_all(m.sb.root.join("opt/svc")).unwrap();
    std::fs::write(
        &ledger,
        json!({"day": p.day, "day_bytes": spent, "month": p.month, "month_bytes": spent})
            .to_string(),
    )
    .unwrap();
    let ca = srv.ca.ca_file.to_str().unwrap().to_string();
    m.start(&[("SSL_CERT_FILE", &ca)]);
    wait_for("the budget's wait in the status", 120, || {
        m.sb.status()["budget"]["waiting"]["os"]["until"] == json!(p.next_day)
    });
    m.wait_os("the OS wait named", |o| {
        o["waiting"]
            .as_str()
            .is_some_and(|w| w.contains("byte budget"))
    });
    let polls = srv.polls().len();
    wait_for("3 more polls", 60, || srv.polls().len() >= polls + 3);
    assert_eq!(srv.requests("/artifacts/os-2.0.raucb").len(), 0);
    assert!(m.fake().installs.is_empty());
    let log = m.sb.log();
    assert_eq!(
        log.matches("waits for the byte budget").count(),
        1,
        "logged once: {log}"
    );
    assert!(
        !log.contains("not installed"),
        "a wait is no failure: {log}"
    );
    assert!(m.os()["last_result"].is_null(), "{}", m.os());

    // After midnight: the ledger's day is yesterday's; the restarted agent downloads it.
    m.power_off();
    let mut l: Value = serde_json::from_slice(&std::fs::read(&ledger).unwrap()).unwrap();
    l["day"] = json!(svc::update::budget::period(now - 86_400).day);
    l["month_bytes"] = json!(0);
    std::fs::write(&ledger, l.to_string()).unwrap();
    m.start(&[("SSL_CERT_FILE", &ca)]);
    m.wait_reboots(1);
    assert_eq!(srv.requests("/artifacts/os-2.0.raucb").len(), 1);
    assert_eq!(m.fake().installs.len(), 1);
    assert!(
        m.sb.log().contains("the byte budget lets it download now"),
        "{}",
        m.sb.log()
    );
}

/// The agents of the window tests read the window in UTC (the machine's timezone).
pub(crate) const UTC: [(&str, &str); 1] = [("TZ", "UTC")];

/// `config()` with a maintenance window `from` minutes after now (UTC) and `len` long.
pub(crate) fn with_window(from: i64, len: i64) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let hhmm = |m: i64| {
        let m = (now / 60 + m).rem_euclid(1440);
        format!("{:02}:{:02}", m / 60, m % 60)
    };
    let mut c = config();
    c["agent"]["svc-server"]["attributes"] =
        json!({"maintenance_window": {"start": hhmm(from), "end": hhmm(from + len)}});
    c
}

/// A window that opens in 3 hours, and one open now (for the next 2 hours).
pub(crate) fn window_closed() -> Value {
    with_window(180, 60)
}

pub(crate) fn window_open() -> Value {
    with_window(-60, 180)
}

/// Attack (issue 43): outside the maintenance window the agent let RAUC install at once,
/// and RAUC made the new slot primary: any reboot before the window (a power cut, someone
/// else's) booted the new OS with no window. Now the bundle is downloaded and verified
/// ahead, RAUC is not asked until the window opens, a cut boots the old slot, and the kept
/// bundle (not downloaded again) is installed in the window, then booted.
#[test]
fn outside_the_window_the_bundle_waits_downloaded_and_a_cut_boots_the_old_slot() {
    let mut m = Machine::new("os-window-closed", true);
    let b = good("2.0");
    m.offer_with(window_closed(), "2.0", &b, &b, None);
    m.start(&UTC);
    let waits = |o: &Value| {
        o["waiting"]
            .as_str()
            .is_some_and(|w| w.contains("maintenance window"))
    };
    m.wait_os("the wait for the window", waits);
    {
        let f = m.fake();
        assert!(
            f.installs.is_empty(),
            "RAUC installed outside the window: {:?}",
            f.installs
        );
        assert_eq!(
            (f.booted, f.primary),
            (0, 0),
            "the next boot is the new slot"
        );
    }
    assert_eq!(m.os()["state"], "downloaded", "{}", m.os());
    assert!(m.sb.root.join("opt/svc/os/bundle-2.0.raucb").exists());
    // The power goes before the window: the old slot boots. The app's copy goes away too:
    // the install in the window must use the bundle kept on the data partition.
    m.power_cycle(false);
    assert_eq!(m.fake().booted, 0);
    std::fs::remove_file(m.sb.app.join("os-2.0.raucb")).unwrap();
    m.start(&UTC);
    m.wait_os("the wait for the window after the cut", |o| {
        waits(o) && o["state"] == "downloaded"
    });
    m.sb.wait_polls(3, 60);
    assert!(m.fake().installs.is_empty());
    assert_eq!(m.reboots(), 0);
    let log = m.sb.log();
    assert_eq!(
        log.matches("OS 2.0 downloaded; installed when the maintenance window opens (")
            .count(),
        1,
        "said once per wait: {log}"
    );
    // The window opens: installed from the kept bundle, then the reboot.
    m.offer_with(window_open(), "2.0", &b, &b, None);
    m.wait_reboots(1);
    assert_eq!(m.fake().installs.len(), 1);
    assert_eq!(m.fake().primary, 1);
    m.boot(false, &UTC);
    m.wait_os("OS 2.0 marked good", |o| o["version"] == "2.0");
    assert_eq!(m.fake().installs.len(), 1);
}

/// Attack (issue 43): the window closes while RAUC writes the slot (the install began in
/// it). RAUC makes the written slot primary at its end; the agent makes the booted slot
/// primary again until the window, so a cut before it boots the old slot; in the window the
/// new slot is made the next boot and the machine reboots into it.
#[test]
fn a_window_that_closes_during_the_install_keeps_the_old_slot_primary() {
    let mut m = Machine::new("os-window-closes", true);
    let b = good("2.0");
    m.fake().hold = true;
    m.offer_with(window_open(), "2.0", &b, &b, None);
    m.start(&UTC);
    wait_for("RAUC to be installing", 120, || {
        m.fake().installs.len() == 1
    });
    m.offer_with(window_closed(), "2.0", &b, &b, None);
    // Two polls: the second one's config is the closed window.
    m.sb.wait_polls(2, 60);
    m.fake().hold = false;
    m.wait_os("the reboot's wait for the window", |o| {
        o["state"] == "installed"
            && o["waiting"]
                .as_str()
                .is_some_and(|w| w.contains("maintenance window"))
    });
    wait_for("the booted slot primary again", 60, || {
        m.fake().primary == 0
    });
    m.boot(false, &UTC);
    assert_eq!(
        m.fake().booted,
        0,
        "a cut before the window booted the new slot"
    );
    m.wait_os("the wait after the cut", |o| o["state"] == "installed");
    assert_eq!(m.reboots(), 0);
    m.offer_with(window_open(), "2.0", &b, &b, None);
    m.wait_reboots(1);
    assert_eq!(m.fake().primary, 1);
    m.boot(false, &UTC);
    m.wait_os("OS 2.0 marked good", |o| o["version"] == "2.0");
    assert_eq!(m.fake().installs.len(), 1);
}
