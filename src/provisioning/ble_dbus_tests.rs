//! The BLE transport over real D-Bus (issue 40, finding 6): a private bus (`dbus-daemon
//! --session`), a stand-in bluetoothd on it (an adapter with GattManager1 and
//! LEAdvertisingManager1, two connected devices), and the real `BleThread` registering its
//! GATT application there. The test calls ReadValue and WriteValue on the application as
//! bluetoothd does, with `options["device"]` naming the central.
use super::ble::BleThread;
use super::improv::{self, hmac_sha256};
use super::portal::NetworkInput;
use std::collections::HashMap;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zbus::blocking::Connection;
use zbus::zvariant::{ObjectPath, OwnedValue, Value};

const OWNER: &str = "/org/bluez/hci0/dev_AA_AA_AA_AA_AA_AA";
const STRANGER: &str = "/org/bluez/hci0/dev_BB_BB_BB_BB_BB_BB";
const SECRET: &str = "0123456789abcdef0123456789abcdef";
const CHAR_STATE: &str = "/svc/improv/service0/char1";
const CHAR_ERROR: &str = "/svc/improv/service0/char2";
const CHAR_COMMAND: &str = "/svc/improv/service0/char3";
const CHAR_RESULT: &str = "/svc/improv/service0/char4";

/// The stand-in adapter: records who registered the application.
struct Adapter {
    app_owner: Arc<Mutex<Option<String>>>,
}

#[zbus::interface(name = "org.bluez.GattManager1")]
impl Adapter {
    fn register_application(
        &self,
        #[zbus(header)] hdr: zbus::message::Header<'_>,
        _app: ObjectPath<'_>,
        _options: HashMap<String, OwnedValue>,
    ) {
        *self.app_owner.lock().unwrap() = hdr.sender().map(|s| s.to_string());
    }

    fn unregister_application(&self, _app: ObjectPath<'_>) {
        *self.app_owner.lock().unwrap() = None;
    }
}

struct Advertising;

#[zbus::interface(name = "org.bluez.LEAdvertisingManager1")]
impl Advertising {
    fn register_advertisement(&self, _adv: ObjectPath<'_>, _options: HashMap<String, OwnedValue>) {}
    fn unregister_advertisement(&self, _adv: ObjectPath<'_>) {}
}

struct Device {
    connected: bool,
}

#[zbus::interface(name = "org.bluez.Device1")]
impl Device {
    #[zbus(property, name = "Connected")]
    fn connected(&self) -> bool {
        self.connected
    }
}

struct Bus(Child);

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private bus; its address.
fn private_bus() -> Option<(Bus, String)> {
    let mut child = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    Some((Bus(child), line.trim().to_string()))
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Client<'a> {
    conn: &'a Connection,
    app: String,
}

impl Client<'_> {
    fn opts(who: &str) -> HashMap<&'static str, Value<'static>> {
        let p = ObjectPath::try_from(who.to_string()).unwrap();
        HashMap::from([("device", Value::from(p))])
    }

    fn read(&self, chr: &str, who: &str) -> Vec<u8> {
        let m = self
            .conn
            .call_method(
                Some(self.app.as_str()),
                chr,
                Some("org.bluez.GattCharacteristic1"),
                "ReadValue",
                &(Self::opts(who),),
            )
            .unwrap();
        m.body().deserialize().unwrap()
    }

    /// A frame as a client writes it: 20 bytes per GATT write.
    fn write(&self, who: &str, frame: &[u8]) {
        for w in frame.chunks(20) {
            self.conn
                .call_method(
                    Some(self.app.as_str()),
                    CHAR_COMMAND,
                    Some("org.bluez.GattCharacteristic1"),
                    "WriteValue",
                    &(w.to_vec(), Self::opts(who)),
                )
                .unwrap();
        }
    }

    /// Asks for a challenge (the result must change from `before`) and answers it with
    /// `secret`.
    fn authorize(&self, who: &str, secret: &[u8]) {
        let before = self.read(CHAR_RESULT, who);
        self.write(who, &improv::tests::frame(improv::CMD_AUTHORIZE, &[]));
        let r = wait_for("a fresh nonce", || {
            let r = self.read(CHAR_RESULT, who);
            (r != before && r.len() == 20).then_some(r)
        });
        let mac = hmac_sha256(secret, &r[3..19]);
        self.write(who, &improv::tests::frame(improv::CMD_AUTHORIZE, &mac));
    }

    fn wait_value(&self, chr: &str, who: &str, want: u8, what: &str) {
        wait_for(what, || (self.read(chr, who) == [want]).then_some(()));
    }
}

/// The stand-in bluetoothd on the private bus at `addr`: adapter hci0 (its GATT manager
/// keeps the registered application's owner), advertising, and two connected centrals.
fn stand_in_bluez(addr: &str) -> (zbus::blocking::Connection, Arc<Mutex<Option<String>>>) {
    let app_owner = Arc::new(Mutex::new(None));
    let bluez = zbus::blocking::connection::Builder::address(addr)
        .unwrap()
        .name("org.bluez")
        .unwrap()
        .serve_at("/", zbus::fdo::ObjectManager)
        .unwrap()
        .serve_at(
            "/org/bluez/hci0",
            Adapter {
                app_owner: Arc::clone(&app_owner),
            },
        )
        .unwrap()
        .serve_at("/org/bluez/hci0", Advertising)
        .unwrap()
        .serve_at(OWNER, Device { connected: true })
        .unwrap()
        .serve_at(STRANGER, Device { connected: true })
        .unwrap()
        .build()
        .unwrap();
    (bluez, app_owner)
}

/// The tests here set the process's system bus address: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn over_dbus_each_central_reads_and_is_judged_by_its_own_session() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some((_bus, addr)) = private_bus() else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "dbus-daemon is needed under CI"
        );
        eprintln!("skipped: no dbus-daemon");
        return;
    };
    let (bluez, app_owner) = stand_in_bluez(&addr);
    let dir = std::env::temp_dir().join(format!("svc-ble-dbus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("label-secret"), format!("{SECRET}\n")).unwrap();
    // The BLE thread's "system bus" is the private one (no other test of this binary uses
    // the system bus).
    std::env::set_var("DBUS_SYSTEM_BUS_ADDRESS", &addr);
    let pending: Arc<Mutex<Option<NetworkInput>>> = Arc::default();
    let ble = BleThread::spawn(
        dir.join("label-secret"),
        Arc::clone(&pending),
        Arc::default(),
        None,
    );
    ble.want.store(true, std::sync::atomic::Ordering::SeqCst);
    let app = wait_for("the GATT application's registration", || {
        app_owner.lock().unwrap().clone()
    });
    let conn = zbus::blocking::connection::Builder::address(addr.as_str())
        .unwrap()
        .build()
        .unwrap();
    let c = Client { conn: &conn, app };

    // The owner authorizes; the stranger reads its own state, not the owner's.
    c.authorize(OWNER, SECRET.as_bytes());
    c.wait_value(CHAR_STATE, OWNER, 2, "the owner authorized");
    assert_eq!(
        c.read(CHAR_STATE, STRANGER),
        [1],
        "the stranger's own state"
    );
    // The stranger's Wi-Fi settings: refused, nothing pending.
    c.write(STRANGER, &improv::tests::wifi(b"evil", b"password-9"));
    c.wait_value(CHAR_ERROR, STRANGER, 4, "the stranger refused");
    assert!(pending.lock().unwrap().is_none(), "the stranger's network");
    assert_eq!(
        c.read(CHAR_ERROR, OWNER),
        [0],
        "the owner's error untouched"
    );
    // Five wrong answers lock the stranger out, not the owner.
    for _ in 0..improv::MAX_FAILURES {
        c.authorize(STRANGER, b"wrong-secret-000");
    }
    let before = c.read(CHAR_RESULT, STRANGER);
    c.write(STRANGER, &improv::tests::frame(improv::CMD_AUTHORIZE, &[]));
    c.wait_value(CHAR_ERROR, STRANGER, 4, "the stranger locked out");
    // The owner still gets a fresh nonce (`authorize` waits for it) and is authorized.
    c.authorize(OWNER, SECRET.as_bytes());
    c.wait_value(CHAR_ERROR, OWNER, 0, "the owner's new authorization");
    assert_eq!(
        c.read(CHAR_RESULT, STRANGER),
        before,
        "no nonce for the locked stranger"
    );
    // The owner disconnects: its session goes; the same device path starts afresh.
    let set = |path: &str, connected: bool| {
        let i = bluez.object_server().interface::<_, Device>(path).unwrap();
        i.get_mut().connected = connected;
    };
    set(OWNER, false);
    c.wait_value(CHAR_STATE, OWNER, 1, "the owner's session to end");
    set(OWNER, true);
    c.write(OWNER, &improv::tests::wifi(b"home", b"password-1"));
    c.wait_value(
        CHAR_ERROR,
        OWNER,
        4,
        "settings refused without authorization",
    );
    // Authorized again: the owner's network is taken.
    c.authorize(OWNER, SECRET.as_bytes());
    c.wait_value(CHAR_STATE, OWNER, 2, "the owner authorized again");
    c.write(OWNER, &improv::tests::wifi(b"home", b"password-1"));
    let net = wait_for("the owner's network pending", || {
        pending.lock().unwrap().take()
    });
    assert_eq!(net.ssid, "home");
    ble.want.store(false, std::sync::atomic::Ordering::SeqCst);
    drop(ble);
    let _ = std::fs::remove_dir_all(&dir);
}

/// #45: a standard Improv client (no label secret) provisions the machine, authorized by a
/// press of the manufacturer's button. The button's event device is a FIFO here that gets
/// `struct input_event` records as the kernel writes them (this kernel has no uinput; the
/// lab presses through uinput). The client only reads the state until the press; the press
/// goes to it, and not to a stranger who comes later; states go 1 -> 2 -> 3 -> 4.
#[test]
fn over_dbus_a_button_press_authorizes_the_waiting_client() {
    use crate::provisioning::button::tests::record;
    use std::io::Write;
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some((_bus, addr)) = private_bus() else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "dbus-daemon is needed under CI"
        );
        eprintln!("skipped: no dbus-daemon");
        return;
    };
    let (_bluez, app_owner) = stand_in_bluez(&addr);
    let dir = std::env::temp_dir().join(format!("svc-ble-button-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("label-secret"), format!("{SECRET}\n")).unwrap();
    let fifo = dir.join("event9");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success(), "mkfifo");
    std::env::set_var("DBUS_SYSTEM_BUS_ADDRESS", &addr);
    let pending: Arc<Mutex<Option<NetworkInput>>> = Arc::default();
    let key = 0x211; // KEY_WPS_BUTTON
    let ble = BleThread::spawn(
        dir.join("label-secret"),
        Arc::clone(&pending),
        Arc::default(),
        Some(crate::config::model::ImprovButton {
            device: Some(fifo.to_string_lossy().into_owned()),
            name: None,
            key,
        }),
    );
    // Opening blocks until the button's reader has it open too.
    let mut button = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    ble.want.store(true, std::sync::atomic::Ordering::SeqCst);
    let app = wait_for("the GATT application's registration", || {
        app_owner.lock().unwrap().clone()
    });
    let conn = zbus::blocking::connection::Builder::address(addr.as_str())
        .unwrap()
        .build()
        .unwrap();
    let c = Client { conn: &conn, app };
    // The client connects and reads the state: authorization required.
    assert_eq!(c.read(CHAR_STATE, OWNER), [1]);
    // Not a press: a release, autorepeat, another key.
    for r in [
        record(1, key, 0),
        record(1, key, 2),
        record(1, 28, 1),
        record(0, 0, 0),
    ] {
        button.write_all(&r).unwrap();
    }
    // The press (and the SYN that follows it).
    button.write_all(&record(1, key, 1)).unwrap();
    button.write_all(&record(0, 0, 0)).unwrap();
    c.wait_value(CHAR_STATE, OWNER, 2, "the client authorized by the press");
    // A stranger connecting now has no part in it.
    assert_eq!(c.read(CHAR_STATE, STRANGER), [1]);
    c.write(STRANGER, &improv::tests::wifi(b"evil", b"password-9"));
    c.wait_value(CHAR_ERROR, STRANGER, 4, "the stranger refused");
    // The client sends its network: provisioning, then provisioned once it is joined.
    c.write(OWNER, &improv::tests::wifi(b"home", b"password-1"));
    c.wait_value(CHAR_STATE, OWNER, 3, "provisioning");
    let net = wait_for("the client's network pending", || {
        pending.lock().unwrap().take()
    });
    assert_eq!(net.ssid, "home");
    ble.joined("home", true);
    c.wait_value(CHAR_STATE, OWNER, 4, "provisioned");
    // A client whose link dropped while its network was tried (phones' often do; the lab's
    // gatttool client connects once per read) comes back without its session: it reads the
    // machine's state and the provisioning result, not an empty result (the lab saw that).
    const BACK: &str = "/org/bluez/hci0/dev_CC_CC_CC_CC_CC_CC";
    c.wait_value(CHAR_STATE, BACK, 4, "provisioned, read by a new connection");
    let result = c.read(CHAR_RESULT, BACK);
    // Stopped before the assertion: the button's reader, once its FIFO's writer is gone,
    // blocks in open(), and a panic would drop the writer first.
    ble.want.store(false, std::sync::atomic::Ordering::SeqCst);
    drop(ble);
    drop(button);
    assert_eq!(
        result,
        improv::encode_result(improv::CMD_WIFI_SETTINGS, &[]),
        "the provisioning result, read by a new connection"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
