//! Improv Wi-Fi over BLE through BlueZ (the system's `bluetoothd`, over the system D-Bus): a
//! GATT application (`org.bluez.GattManager1.RegisterApplication`) with the Improv service
//! and its five characteristics, and an advertisement (`LEAdvertisingManager1`) carrying the
//! Improv service UUID and its service data (state, capabilities).
//!
//! The protocol and its authorization are `improv.rs` (pure). Here: one thread owns the
//! `improv::Centrals` (a session per connected central); D-Bus method calls (run on zbus's
//! own thread) only hand the bytes a client wrote, with the central's device path
//! (`options["device"]`), to it through a bounded channel, and read the characteristics'
//! values: each central reads its own session's State, Error and RPC Result. A network a
//! session accepts goes into the one `pending` slot the portal and DPP use (the service then
//! joins it and reports back with `Event::Joined`). Nothing written by a client is logged (it
//! carries the pass key in clear).
//!
//! Notifications: an external GATT application has no way to notify one central only.
//! bluetoothd turns a `PropertiesChanged` on `Value` into a notification to every central
//! subscribed to that characteristic (BlueZ's `gatt-database.c` sends it to each device whose
//! CCC is on; `AcquireNotify` is one socket for all of them too). So the value notified is
//! the one of the central that asked, and every other subscriber sees it as well: its state
//! code, its error code, its RPC result (device info, a nonce, scan results: the SSIDs the
//! machine sees, the empty result of "provisioned"). None is a secret or a grant: a nonce is
//! only good for the session it was issued to, and a notified state gives no central
//! anything (each write is judged by its sender's own session). What a central reads (and
//! what decides) is always its own.
use super::improv::{self, Busy, Centrals, ErrorCode, Output, State};
use super::portal::NetworkInput;
use super::portal_http::Visible;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zbus::blocking::Connection;
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue, Value};

const APP: &str = "/svc/improv";
const SERVICE: &str = "/svc/improv/service0";
const ADV: &str = "/svc/improvadv";
const CHARS: [(&str, &str, &[&str]); 5] = [
    ("char0", improv::CHAR_CAPABILITIES, &["read"]),
    ("char1", improv::CHAR_STATE, &["read", "notify"]),
    ("char2", improv::CHAR_ERROR, &["read", "notify"]),
    ("char3", improv::CHAR_RPC_COMMAND, &["write"]),
    ("char4", improv::CHAR_RPC_RESULT, &["read", "notify"]),
];
/// Client writes waiting for the session thread; more are refused (a GATT error), not queued.
const WRITE_QUEUE: usize = 16;
/// How long the thread waits for a write before it lets time pass (`Session::tick`).
const POLL: Duration = Duration::from_secs(1);
/// A failed start (no bluetoothd, no adapter) is retried this often, logged once.
const RETRY: Duration = Duration::from_secs(30);
/// After "provisioned", the service stays up this long (even when the service stops: a
/// bounded wait) so the client reads the result.
const LINGER: Duration = Duration::from_secs(15);
/// The redirect URL a provisioned machine answers with: none (the machine has no page of
/// its own to send the phone to).
const REDIRECT: &str = "";
/// Improv capabilities: bit 0 = identify. There is nothing to blink.
const CAPABILITIES: u8 = 0x00;

pub(crate) enum Event {
    /// Bytes the central at BlueZ device path `from` wrote to RPC Command.
    Write { from: String, bytes: Vec<u8> },
    /// The service tried `ssid` (from whichever source): `online` or not.
    Joined { ssid: String, online: bool },
    /// The central at `from` read a characteristic (a standard client waiting for the
    /// button reads the state): it gets a session, so that a press finds it.
    Seen { from: String },
    /// The Improv button was pressed (`button.rs`).
    Pressed,
}

/// The directory of the label secret: `/opt/svc/improv/`.
pub(crate) fn dir(paths: &crate::paths::Paths) -> PathBuf {
    paths.state_dir().join("improv")
}

/// Why BLE provisioning cannot start; the text names the file or the D-Bus call, never the
/// secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BleError {
    /// The label secret's file (or the random bytes for a new one).
    Secret(String),
    /// The system bus or bluetoothd: a connection, a call, no suitable adapter.
    Bus(String),
}

impl std::fmt::Display for BleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BleError::Secret(m) | BleError::Bus(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for BleError {}

/// The per-device label secret (printed on the label; its text's bytes are the HMAC key):
/// read from `path`, or made from 128 random bits (32 hex digits) and written atomically,
/// 0600, on first use. A file that is not one is an error, never replaced (the label would
/// stop working).
pub(crate) fn load_or_create_secret(path: &Path) -> Result<String, BleError> {
    let at = |p: &Path, e: std::io::Error| BleError::Secret(format!("{}: {e}", p.display()));
    match std::fs::read_to_string(path) {
        Ok(s) => {
            let s = s.trim();
            if s.len() < 16 || s.len() > 64 || !s.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(BleError::Secret(format!(
                    "{}: not a label secret (16 to 64 printable ASCII characters)",
                    path.display()
                )));
            }
            Ok(s.to_string())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut d = [0u8; 16];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut d))
                .map_err(|e| BleError::Secret(format!("/dev/urandom: {e}")))?;
            let s = crate::encoding::hex(&d);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| at(parent, e))?;
            }
            crate::fsutil::atomic_write(path, format!("{s}\n").as_bytes(), 0o600)
                .map_err(|e| at(path, e))?;
            Ok(s)
        }
        Err(e) => Err(at(path, e)),
    }
}

fn nonce() -> [u8; 16] {
    let mut n = [0u8; 16];
    // On a read failure the session gets zeros: a fixed nonce only weakens replay
    // protection; the answer still needs the secret. /dev/urandom does not fail on Linux.
    let _ = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut n));
    n
}

fn fdo(e: impl std::fmt::Display) -> zbus::fdo::Error {
    zbus::fdo::Error::Failed(e.to_string())
}

/// The central a GATT call comes from: the device path bluetoothd passes in `options`
/// (every BlueZ since 5.46 does). Without one, the calls share the session of "".
fn device_of(options: &HashMap<String, OwnedValue>) -> String {
    match options.get("device").map(|v| &**v) {
        Some(Value::ObjectPath(p)) => p.to_string(),
        _ => String::new(),
    }
}

/// The characteristics whose values are per central, in `Reads` order.
const PER_CENTRAL: [&str; 3] = [
    improv::CHAR_STATE,
    improv::CHAR_ERROR,
    improv::CHAR_RPC_RESULT,
];

/// What each tracked central reads from State, Error and RPC Result (`PER_CENTRAL` order):
/// its own session's values. Entries go with their central (`Driver::take_gone`).
type Reads = Arc<Mutex<HashMap<String, [Vec<u8>; 3]>>>;

/// One Improv characteristic (`org.bluez.GattCharacteristic1`).
struct Chr {
    uuid: &'static str,
    flags: Vec<String>,
    /// What a central without a value of its own reads (the device's state, no error, no
    /// result).
    initial: Vec<u8>,
    /// The last value notified (the `Value` property).
    value: Vec<u8>,
    notifying: bool,
    /// RPC Command only: where writes go.
    tx: Option<SyncSender<Event>>,
    /// Where reads are reported (`Event::Seen`).
    seen: SyncSender<Event>,
    /// State, Error, RPC Result: the per-central values and this one's index in them.
    reads: Option<(Reads, usize)>,
}

#[zbus::interface(name = "org.bluez.GattCharacteristic1")]
impl Chr {
    fn read_value(&self, options: HashMap<String, OwnedValue>) -> zbus::fdo::Result<Vec<u8>> {
        let offset = options
            .get("offset")
            .and_then(|v| u16::try_from(v).ok())
            .map_or(0, usize::from);
        let who = device_of(&options);
        if !who.is_empty() {
            // A full queue drops the report: the next read makes it.
            let _ = self.seen.try_send(Event::Seen { from: who.clone() });
        }
        let own = self.reads.as_ref().and_then(|(r, i)| {
            let r = r.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            r.get(&who).map(|v| v[*i].clone())
        });
        let value = own.unwrap_or_else(|| self.initial.clone());
        match value.get(offset..) {
            Some(v) => Ok(v.to_vec()),
            None => Err(zbus::fdo::Error::InvalidArgs("offset".into())),
        }
    }

    fn write_value(
        &mut self,
        value: Vec<u8>,
        options: HashMap<String, OwnedValue>,
    ) -> zbus::fdo::Result<()> {
        match &self.tx {
            Some(tx) => tx
                .try_send(Event::Write {
                    from: device_of(&options),
                    bytes: value,
                })
                .map_err(|_| fdo("busy: too many writes waiting")),
            None => Err(zbus::fdo::Error::NotSupported("not writable".into())),
        }
    }

    fn start_notify(&mut self) {
        self.notifying = true;
    }

    fn stop_notify(&mut self) {
        self.notifying = false;
    }

    #[zbus(property, name = "UUID")]
    fn uuid(&self) -> String {
        self.uuid.to_string()
    }

    #[zbus(property, name = "Service")]
    fn service(&self) -> OwnedObjectPath {
        OwnedObjectPath::from(ObjectPath::from_static_str_unchecked(SERVICE))
    }

    #[zbus(property, name = "Flags")]
    fn flags(&self) -> Vec<String> {
        self.flags.clone()
    }

    #[zbus(property(emits_changed_signal = "false"), name = "Value")]
    fn value(&self) -> Vec<u8> {
        self.value.clone()
    }

    #[zbus(property, name = "Notifying")]
    fn notifying(&self) -> bool {
        self.notifying
    }
}

/// The Improv service (`org.bluez.GattService1`).
struct Svc;

#[zbus::interface(name = "org.bluez.GattService1")]
impl Svc {
    #[zbus(property, name = "UUID")]
    fn uuid(&self) -> String {
        improv::SERVICE_UUID.to_string()
    }

    #[zbus(property, name = "Primary")]
    fn primary(&self) -> bool {
        true
    }
}

/// The advertisement (`org.bluez.LEAdvertisement1`): the service UUID and the service data
/// `4677` = state, capabilities, 4 reserved bytes, in the advertising packet itself
/// (flags 3 + UUID 18 + service data 10 = the legacy 31 bytes).
struct Adv {
    state: u8,
}

#[zbus::interface(name = "org.bluez.LEAdvertisement1")]
impl Adv {
    fn release(&self) {}

    #[zbus(property, name = "Type")]
    fn kind(&self) -> String {
        "peripheral".into()
    }

    #[zbus(property, name = "ServiceUUIDs")]
    fn service_uuids(&self) -> Vec<String> {
        vec![improv::SERVICE_UUID.to_string()]
    }

    #[zbus(property, name = "ServiceData")]
    fn service_data(&self) -> zbus::fdo::Result<HashMap<String, OwnedValue>> {
        let data = vec![self.state, CAPABILITIES, 0, 0, 0, 0];
        let v = OwnedValue::try_from(Value::from(data)).map_err(fdo)?;
        Ok(HashMap::from([("4677".to_string(), v)]))
    }
}

/// The application registered with bluetoothd; unregistered when dropped.
struct Gatt {
    conn: Connection,
    adapter: OwnedObjectPath,
    reads: Reads,
}

fn call<B>(
    conn: &Connection,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> Result<(), BleError>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    conn.call_method(Some("org.bluez"), path, Some(iface), method, body)
        .map(drop)
        .map_err(|e| BleError::Bus(format!("{iface}.{method} on {path}: {e}")))
}

impl Gatt {
    fn start(tx: SyncSender<Event>, state: State, reads: &Reads) -> Result<Gatt, BleError> {
        let err = |e: zbus::Error| BleError::Bus(format!("system D-Bus: {e}"));
        let mut b = zbus::blocking::connection::Builder::system()
            .map_err(err)?
            .method_timeout(Duration::from_secs(25))
            .serve_at(APP, zbus::fdo::ObjectManager)
            .map_err(err)?
            .serve_at(SERVICE, Svc)
            .map_err(err)?
            .serve_at(ADV, Adv { state: state as u8 })
            .map_err(err)?;
        for (name, uuid, flags) in CHARS {
            let value = match uuid {
                improv::CHAR_CAPABILITIES => vec![CAPABILITIES],
                improv::CHAR_STATE => vec![state as u8],
                improv::CHAR_ERROR => vec![ErrorCode::None as u8],
                _ => Vec::new(),
            };
            let c = Chr {
                uuid,
                flags: flags.iter().map(|f| f.to_string()).collect(),
                initial: value.clone(),
                value,
                notifying: false,
                tx: (uuid == improv::CHAR_RPC_COMMAND).then(|| tx.clone()),
                seen: tx.clone(),
                reads: PER_CENTRAL
                    .iter()
                    .position(|u| *u == uuid)
                    .map(|i| (Arc::clone(reads), i)),
            };
            b = b.serve_at(format!("{SERVICE}/{name}"), c).map_err(err)?;
        }
        let conn = b.build().map_err(err)?;
        let adapter = find_adapter(&conn)?;
        // The adapter must be powered for advertising; bluetoothd keeps it so afterwards.
        let _ = call(
            &conn,
            adapter.as_str(),
            "org.freedesktop.DBus.Properties",
            "Set",
            &("org.bluez.Adapter1", "Powered", Value::from(true)),
        );
        let opts: HashMap<&str, Value> = HashMap::new();
        let app = ObjectPath::from_static_str_unchecked(APP);
        call(
            &conn,
            adapter.as_str(),
            "org.bluez.GattManager1",
            "RegisterApplication",
            &(&app, &opts),
        )?;
        let g = Gatt {
            conn,
            adapter,
            reads: Arc::clone(reads),
        };
        let adv = ObjectPath::from_static_str_unchecked(ADV);
        call(
            &g.conn,
            g.adapter.as_str(),
            "org.bluez.LEAdvertisingManager1",
            "RegisterAdvertisement",
            &(&adv, &opts),
        )?;
        Ok(g)
    }

    /// Sets central `who`'s value of a characteristic and notifies it (PropertiesChanged on
    /// `Value`, which bluetoothd turns into a notification for every subscribed central:
    /// the module comment says what that shows the others).
    fn set(&self, uuid: &str, who: &str, value: Vec<u8>) {
        let Some((name, _, _)) = CHARS.iter().find(|c| c.1 == uuid) else {
            return;
        };
        if let Some(i) = PER_CENTRAL.iter().position(|u| *u == uuid) {
            let mut r = self
                .reads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let own = r.entry(who.to_string()).or_insert_with(|| {
                [
                    vec![State::AuthorizationRequired as u8],
                    vec![ErrorCode::None as u8],
                    Vec::new(),
                ]
            });
            own[i].clone_from(&value);
        }
        let path = format!("{SERVICE}/{name}");
        if let Ok(i) = self.conn.object_server().interface::<_, Chr>(path.as_str()) {
            i.get_mut().value.clone_from(&value);
        }
        let changed = HashMap::from([("Value", Value::from(value))]);
        let _ = self.conn.emit_signal(
            None::<&str>,
            path.as_str(),
            "org.freedesktop.DBus.Properties",
            "PropertiesChanged",
            &("org.bluez.GattCharacteristic1", changed, Vec::<&str>::new()),
        );
    }

    /// The device's state (not a central's): what a central without a session reads, and
    /// the advertisement's. Once provisioned, such a central also reads the result: the
    /// client that sent the network may have lost its link (and its session) meanwhile.
    /// Set before the state, so that "provisioned" is never read beside no result.
    fn set_device_state(&self, s: State) {
        let result = match s {
            State::Provisioned => improv::provisioned_result(REDIRECT),
            _ => Vec::new(),
        };
        let path = format!("{SERVICE}/char4");
        if let Ok(i) = self.conn.object_server().interface::<_, Chr>(path.as_str()) {
            i.get_mut().initial = result;
        }
        let path = format!("{SERVICE}/char1");
        if let Ok(i) = self.conn.object_server().interface::<_, Chr>(path.as_str()) {
            i.get_mut().initial = vec![s as u8];
        }
        if let Ok(i) = self.conn.object_server().interface::<_, Adv>(ADV) {
            i.get_mut().state = s as u8;
        }
    }

    /// Whether the central at `who` is still connected (`org.bluez.Device1.Connected`); a
    /// device bluetoothd no longer knows is not.
    fn connected(&self, who: &str) -> bool {
        let Ok(path) = ObjectPath::try_from(who) else {
            return false;
        };
        self.conn
            .call_method(
                Some("org.bluez"),
                &path,
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &("org.bluez.Device1", "Connected"),
            )
            .ok()
            .and_then(|m| m.body().deserialize::<OwnedValue>().ok())
            .and_then(|v| bool::try_from(&*v).ok())
            .unwrap_or(false)
    }
}

impl Drop for Gatt {
    fn drop(&mut self) {
        let adv = ObjectPath::from_static_str_unchecked(ADV);
        let app = ObjectPath::from_static_str_unchecked(APP);
        let a = self.adapter.as_str();
        let _ = call(
            &self.conn,
            a,
            "org.bluez.LEAdvertisingManager1",
            "UnregisterAdvertisement",
            &(&adv,),
        );
        let _ = call(
            &self.conn,
            a,
            "org.bluez.GattManager1",
            "UnregisterApplication",
            &(&app,),
        );
    }
}

/// The first adapter (by path: `hci0` before `hci1`) that offers GATT applications.
fn find_adapter(conn: &Connection) -> Result<OwnedObjectPath, BleError> {
    let om = zbus::blocking::fdo::ObjectManagerProxy::builder(conn)
        .destination("org.bluez")
        .and_then(|b| b.path("/"))
        .and_then(|b| b.build())
        .map_err(|e| BleError::Bus(format!("bluetoothd: {e}")))?;
    let objects = om
        .get_managed_objects()
        .map_err(|e| BleError::Bus(format!("bluetoothd (is it running?): {e}")))?;
    let mut adapters: Vec<OwnedObjectPath> = objects
        .into_iter()
        .filter(|(_, ifaces)| {
            ifaces
                .keys()
                .any(|i| i.as_str() == "org.bluez.GattManager1")
                && ifaces
                    .keys()
                    .any(|i| i.as_str() == "org.bluez.LEAdvertisingManager1")
        })
        .map(|(p, _)| p)
        .collect();
    adapters.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    adapters.into_iter().next().ok_or_else(|| {
        BleError::Bus("bluetoothd has no adapter with LE advertising and GATT".into())
    })
}

/// The BLE thread: the Improv session, the GATT application while `want` (the machine is not
/// online), networks into `pending`.
pub(crate) struct BleThread {
    pub want: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    tx: SyncSender<Event>,
    handle: Option<std::thread::JoinHandle<()>>,
    /// The Improv button's reader (ends before the BLE thread does).
    _button: Option<super::button::ButtonThread>,
}

impl BleThread {
    pub(crate) fn spawn(
        secret_path: PathBuf,
        pending: Arc<Mutex<Option<NetworkInput>>>,
        visible: Arc<Mutex<Vec<Visible>>>,
        button: Option<crate::config::model::ImprovButton>,
    ) -> BleThread {
        let want = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = sync_channel(WRITE_QUEUE);
        let (w, st, t) = (Arc::clone(&want), Arc::clone(&stop), tx.clone());
        let handle = crate::sys::thread("provisioning-ble")
            .spawn(move || {
                let ctx = Ctx {
                    pending,
                    visible,
                    tx: t,
                };
                ble_loop(&secret_path, &w, &st, &rx, &ctx);
            })
            .map_err(|e| crate::error!("provisioning", "BLE: no thread: {e}"))
            .ok();
        let _button = button.and_then(|b| {
            let t = tx.clone();
            super::button::ButtonThread::spawn(
                b,
                Box::new(move || {
                    let _ = t.try_send(Event::Pressed);
                }),
            )
        });
        BleThread {
            want,
            stop,
            tx,
            handle,
            _button,
        }
    }

    /// The service tried `ssid`.
    pub(crate) fn joined(&self, ssid: &str, online: bool) {
        let _ = self.tx.try_send(Event::Joined {
            ssid: ssid.to_string(),
            online,
        });
    }
}

impl Drop for BleThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

struct Ctx {
    pending: Arc<Mutex<Option<NetworkInput>>>,
    visible: Arc<Mutex<Vec<Visible>>>,
    tx: SyncSender<Event>,
}

fn device(visible: &Mutex<Vec<Visible>>) -> improv::Device {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let networks = visible
        .lock()
        .map(|v| {
            v.iter()
                // NetworkManager's 0..=100 signal as an approximate dBm.
                .map(|n| (n.ssid.clone(), i32::from(n.signal) / 2 - 100, true))
                .collect()
        })
        .unwrap_or_default();
    improv::Device {
        info: [
            "svc-agent".into(),
            env!("CARGO_PKG_VERSION").into(),
            std::env::consts::ARCH.into(),
            host.trim().to_string(),
        ],
        networks,
    }
}

/// The centrals' sessions as the thread drives them: bytes in, outputs (each for the
/// central it answers) out.
pub(crate) struct Driver {
    centrals: Centrals,
    /// The central whose network was handed to the service, and its SSID, until the
    /// service reports back.
    awaiting: Option<(String, String)>,
    pub provisioned_at: Option<Instant>,
}

impl Driver {
    pub(crate) fn new(secret: &[u8]) -> Driver {
        Driver {
            centrals: Centrals::new(secret),
            awaiting: None,
            provisioned_at: None,
        }
    }

    /// The device's state (the advertisement's, and what a new central reads): provisioned
    /// once a network from BLE worked, provisioning while one is tried, else authorization
    /// required. A central's own authorization is never shown to others here.
    pub(crate) fn state(&self) -> State {
        if self.provisioned_at.is_some() {
            State::Provisioned
        } else if self.awaiting.is_some() {
            State::Provisioning
        } else {
            State::AuthorizationRequired
        }
    }

    #[cfg(test)]
    pub(crate) fn state_of(&self, who: &str) -> State {
        self.centrals.state_of(who)
    }

    /// The paths of the centrals with a session.
    pub(crate) fn centrals(&self) -> Vec<String> {
        self.centrals.paths()
    }

    /// `who` is still connected (see `Centrals::alive`).
    pub(crate) fn alive(&mut self, who: &str, now: u64) {
        self.centrals.alive(who, now);
    }

    /// `who` disconnected: its session (authorization, nonce, failures, half a frame) goes.
    pub(crate) fn forget(&mut self, who: &str) {
        self.centrals.forget(who);
    }

    /// The centrals forgotten (pushed out, idle, disconnected) since the last call: their
    /// read values must go too.
    pub(crate) fn take_gone(&mut self) -> Vec<String> {
        self.centrals.take_gone()
    }

    /// One event (`None`: time passes); returns the outputs for the GATT side, each with
    /// the central it answers (`Join` already handled: the network is in `pending`, or
    /// refused when another is being tried).
    pub(crate) fn event(
        &mut self,
        ev: Option<Event>,
        now: u64,
        dev: &dyn Fn() -> improv::Device,
        pending: &Mutex<Option<NetworkInput>>,
    ) -> Vec<(String, Output)> {
        let routed: Vec<(String, Output)> = match ev {
            Some(Event::Write { from, bytes }) => {
                match self.centrals.write(&from, &bytes, now, dev, nonce()) {
                    Ok(out) => out.into_iter().map(|o| (from.clone(), o)).collect(),
                    Err(Busy) => {
                        crate::debug!("provisioning", "BLE: a write refused: too many centrals");
                        Vec::new()
                    }
                }
            }
            Some(Event::Joined { ssid, online }) => {
                let Some((who, _)) = self.awaiting.take_if(|(_, awaited)| *awaited == ssid) else {
                    return Vec::new();
                };
                crate::info!(
                    "provisioning",
                    "BLE: network {ssid:?} {}",
                    if online {
                        "joined: provisioned"
                    } else {
                        "not joined"
                    }
                );
                if online {
                    self.provisioned_at = Some(Instant::now());
                }
                let out = self.centrals.joined(&who, online, now, REDIRECT);
                out.into_iter().map(|o| (who.clone(), o)).collect()
            }
            Some(Event::Seen { from }) => match self.centrals.seen(&from, now) {
                Ok(out) => out.into_iter().map(|o| (from.clone(), o)).collect(),
                Err(Busy) => Vec::new(),
            },
            Some(Event::Pressed) => match self.centrals.press(now) {
                Ok(out) if out.is_empty() => {
                    crate::info!(
                        "provisioning",
                        "BLE: button pressed; the next connection within {} s is authorized",
                        improv::PRESS_SECS
                    );
                    out
                }
                Ok(out) => {
                    crate::info!("provisioning", "BLE: button pressed: connection authorized");
                    out
                }
                Err(n) => {
                    crate::warn!(
                        "provisioning",
                        "BLE: button pressed with {n} connections waiting: none authorized (disconnect the others)"
                    );
                    Vec::new()
                }
            },
            None => self.centrals.tick(now),
        };
        let mut rest = Vec::new();
        for (who, o) in routed {
            let Output::Join(net) = o else {
                rest.push((who, o));
                continue;
            };
            let mut p = pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if p.is_some() {
                drop(p);
                crate::warn!(
                    "provisioning",
                    "BLE: network {:?} refused: another network is being tried",
                    net.ssid
                );
                let out = self.centrals.joined(&who, false, now, "");
                rest.extend(out.into_iter().map(|o| (who.clone(), o)));
            } else {
                crate::info!("provisioning", "BLE: network {:?} received", net.ssid);
                self.awaiting = Some((who, net.ssid.clone()));
                *p = Some(net);
            }
        }
        rest
    }
}

fn apply(g: &Gatt, out: Vec<(String, Output)>) {
    for (who, o) in out {
        match o {
            Output::State(s) => g.set(improv::CHAR_STATE, &who, vec![s as u8]),
            Output::Error(e) => g.set(improv::CHAR_ERROR, &who, vec![e as u8]),
            Output::Result(r) => g.set(improv::CHAR_RPC_RESULT, &who, r),
            Output::Identify => crate::info!("provisioning", "BLE: identify requested"),
            Output::Join(_) => {}
        }
    }
}

fn ble_loop(
    secret_path: &Path,
    want: &AtomicBool,
    stop: &AtomicBool,
    rx: &Receiver<Event>,
    ctx: &Ctx,
) {
    let secret = match load_or_create_secret(secret_path) {
        Ok(s) => s,
        Err(e) => {
            crate::error!(
                "provisioning",
                "BLE: label secret: {e}; BLE provisioning off"
            );
            return;
        }
    };
    let mut d = Driver::new(secret.as_bytes());
    drop(secret);
    let started = Instant::now();
    let mut gatt: Option<Gatt> = None;
    let mut next_try = Instant::now();
    // The last failure to start, logged once until another one (or a start) comes.
    let mut last_error: Option<BleError> = None;
    let dev = || device(&ctx.visible);
    let reads: Reads = Arc::default();
    let mut last_tick = Instant::now();
    loop {
        let lingering = d.provisioned_at.is_some_and(|t| t.elapsed() < LINGER);
        // Stopping waits out the linger (bounded), so that the client that just provisioned
        // the machine reads "provisioned" before the service goes away.
        if !want.load(Ordering::SeqCst) && !lingering && gatt.take().is_some() {
            crate::info!("provisioning", "BLE: Improv service stopped (online)");
        }
        let starting = want.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst);
        if starting && gatt.is_none() && Instant::now() >= next_try {
            next_try = Instant::now() + RETRY;
            match Gatt::start(ctx.tx.clone(), d.state(), &reads) {
                Ok(g) => {
                    crate::info!(
                        "provisioning",
                        "BLE: Improv service registered on {} and advertised",
                        g.adapter.as_str()
                    );
                    last_error = None;
                    gatt = Some(g);
                }
                Err(e) if last_error.as_ref() != Some(&e) => {
                    crate::warn!("provisioning", "BLE: Improv service not started: {e}");
                    last_error = Some(e);
                }
                Err(_) => {}
            }
        }
        let ev = if stop.load(Ordering::SeqCst) {
            // Stopping: what is queued (the service's last `Joined`) is still applied.
            match rx.try_recv() {
                Ok(ev) => Some(ev),
                Err(_) if d.provisioned_at.is_some_and(|t| t.elapsed() < LINGER) => {
                    std::thread::sleep(POLL);
                    None
                }
                Err(_) => break,
            }
        } else {
            match rx.recv_timeout(POLL) {
                Ok(ev) => Some(ev),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        };
        let now = started.elapsed().as_secs();
        let before = d.state();
        let mut out = d.event(ev, now, &dev, &ctx.pending);
        // Time passes also under a stream of writes; a central that disconnected loses its
        // session (a later connection from the same address starts afresh).
        if last_tick.elapsed() >= POLL {
            last_tick = Instant::now();
            out.extend(d.event(None, now, &dev, &ctx.pending));
            if let Some(g) = &gatt {
                for who in d.centrals() {
                    if who.is_empty() {
                        continue;
                    }
                    if g.connected(&who) {
                        d.alive(&who, now);
                    } else {
                        d.forget(&who);
                    }
                }
            }
        }
        if let Some(g) = &gatt {
            apply(g, out);
            if d.state() != before {
                g.set_device_state(d.state());
            }
        }
        let gone = d.take_gone();
        if !gone.is_empty() {
            let mut r = reads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for who in &gone {
                r.remove(who);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provisioning::improv::tests::{frame, wifi};
    use crate::provisioning::improv::{hmac_sha256, CMD_AUTHORIZE, CMD_WIFI_SETTINGS};

    fn dev() -> improv::Device {
        improv::Device {
            info: Default::default(),
            networks: Vec::new(),
        }
    }

    /// Writes `f` as a client does: 20 bytes per GATT write.
    fn write(d: &mut Driver, f: &[u8], pending: &Mutex<Option<NetworkInput>>) -> Vec<Output> {
        write_from(d, PHONE, f, 1, pending)
    }

    const PHONE: &str = "/org/bluez/hci0/dev_CC_CC_CC_CC_CC_CC";

    /// The outputs, which must all answer `PHONE`.
    fn to_phone(out: Vec<(String, Output)>) -> Vec<Output> {
        out.into_iter()
            .map(|(who, o)| {
                assert_eq!(who, PHONE);
                o
            })
            .collect()
    }

    fn authorize(d: &mut Driver, secret: &[u8], pending: &Mutex<Option<NetworkInput>>) {
        let out = write(d, &frame(CMD_AUTHORIZE, &[]), pending);
        let Some(Output::Result(r)) = out.last() else {
            panic!("{out:?}")
        };
        let mac = hmac_sha256(secret, &r[3..19]);
        let out = write(d, &frame(CMD_AUTHORIZE, &mac), pending);
        assert!(out.contains(&Output::State(State::Authorized)), "{out:?}");
    }

    /// Writes `f` as the central `who` (a BlueZ device path) does, 20 bytes per write.
    fn write_from(
        d: &mut Driver,
        who: &str,
        f: &[u8],
        now: u64,
        pending: &Mutex<Option<NetworkInput>>,
    ) -> Vec<Output> {
        let mut out = Vec::new();
        for w in f.chunks(20) {
            let ev = Event::Write {
                from: who.to_string(),
                bytes: w.to_vec(),
            };
            for (to, o) in d.event(Some(ev), now, &dev, pending) {
                assert_eq!(to, who, "an answer to another central: {o:?}");
                out.push(o);
            }
        }
        out
    }

    /// Answers a challenge from `who` with `secret`; the outputs of the answer.
    fn answer(
        d: &mut Driver,
        who: &str,
        secret: &[u8],
        now: u64,
        pending: &Mutex<Option<NetworkInput>>,
    ) -> Vec<Output> {
        let out = write_from(d, who, &frame(CMD_AUTHORIZE, &[]), now, pending);
        let Some(Output::Result(r)) = out.last() else {
            return out;
        };
        let mac = hmac_sha256(secret, &r[3..19]);
        write_from(d, who, &frame(CMD_AUTHORIZE, &mac), now, pending)
    }

    const OWNER: &str = "/org/bluez/hci0/dev_AA_AA_AA_AA_AA_AA";
    const STRANGER: &str = "/org/bluez/hci0/dev_BB_BB_BB_BB_BB_BB";

    /// Finding 6 of issue 40: the owner authorizes; a second phone in range must not ride
    /// that authorization (no network from it, no renewal of the owner's), and must not get
    /// the owner locked out with wrong answers of its own.
    #[test]
    fn a_second_central_never_rides_the_owners_authorization() {
        let pending = Mutex::new(None);
        let mut d = Driver::new(b"label-secret-1");
        let out = answer(&mut d, OWNER, b"label-secret-1", 1, &pending);
        assert!(out.contains(&Output::State(State::Authorized)), "{out:?}");
        // The stranger's Wi-Fi settings: refused, nothing pending.
        let out = write_from(&mut d, STRANGER, &wifi(b"evil", b"password-9"), 2, &pending);
        assert!(
            out.contains(&Output::Error(ErrorCode::NotAuthorized)),
            "the stranger's settings were not refused: {out:?}"
        );
        assert!(
            pending.lock().unwrap().is_none(),
            "the stranger's network is pending"
        );
        // The stranger's frames do not keep the owner's authorization alive.
        for t in (10..=improv::AUTHORIZED_SECS + 5).step_by(10) {
            write_from(
                &mut d,
                STRANGER,
                &frame(improv::CMD_IDENTIFY, &[]),
                t,
                &pending,
            );
        }
        let out = write_from(
            &mut d,
            OWNER,
            &wifi(b"home", b"password-1"),
            improv::AUTHORIZED_SECS + 6,
            &pending,
        );
        assert!(
            out.contains(&Output::Error(ErrorCode::NotAuthorized)),
            "the owner's authorization was kept alive by the stranger: {out:?}"
        );
        // Half a frame from the stranger does not corrupt the owner's frames.
        let t = improv::AUTHORIZED_SECS + 7;
        write_from(
            &mut d,
            STRANGER,
            &[improv::CMD_WIFI_SETTINGS, 40, 1, 2],
            t,
            &pending,
        );
        let out = answer(&mut d, OWNER, b"label-secret-1", t, &pending);
        assert!(out.contains(&Output::State(State::Authorized)), "{out:?}");
        // The stranger's five wrong answers lock the stranger out, not the owner.
        let t = t + 1;
        for _ in 0..improv::MAX_FAILURES {
            answer(&mut d, STRANGER, b"a-wrong-guess-00", t, &pending);
        }
        let out = answer(&mut d, STRANGER, b"label-secret-1", t, &pending);
        assert!(
            !out.contains(&Output::State(State::Authorized)),
            "the stranger is locked out: {out:?}"
        );
        let out = answer(&mut d, OWNER, b"label-secret-1", t, &pending);
        assert!(
            !out.contains(&Output::Error(ErrorCode::NotAuthorized)),
            "the owner was locked out by the stranger's wrong answers: {out:?}"
        );
        let out = write_from(&mut d, OWNER, &wifi(b"home", b"password-1"), t, &pending);
        assert!(out.contains(&Output::State(State::Provisioning)), "{out:?}");
        assert_eq!(pending.lock().unwrap().take().unwrap().ssid, "home");
    }

    #[test]
    fn the_label_secret_is_made_once_0600_and_a_bad_one_is_never_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("svc-ble-secret-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = dir.join("improv/label-secret");
        let s = load_or_create_secret(&p).unwrap();
        assert_eq!(s.len(), 32);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            load_or_create_secret(&p).unwrap(),
            s,
            "the same across starts"
        );
        std::fs::write(&p, "short\n").unwrap();
        let e = load_or_create_secret(&p).unwrap_err().to_string();
        assert!(e.contains("not a label secret"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "short\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_network_goes_to_the_shared_pending_slot_only_when_authorized_and_free() {
        let pending = Mutex::new(None);
        let mut d = Driver::new(b"label-secret-1");
        let out = write(&mut d, &wifi(b"home", b"password-1"), &pending);
        assert_eq!(out, vec![Output::Error(ErrorCode::NotAuthorized)]);
        assert!(pending.lock().unwrap().is_none());
        authorize(&mut d, b"label-secret-1", &pending);
        // The portal (or DPP) holds the slot: refused, nothing replaced.
        let portal = NetworkInput {
            ssid: "portal".into(),
            psk: "password-2".into(),
            eap: None,
        };
        *pending.lock().unwrap() = Some(portal.clone());
        let out = write(&mut d, &wifi(b"home", b"password-1"), &pending);
        assert!(
            out.contains(&Output::Error(ErrorCode::UnableToConnect)),
            "{out:?}"
        );
        assert_eq!(pending.lock().unwrap().as_ref(), Some(&portal));
        assert_eq!(d.state_of(PHONE), State::Authorized);
        // Free: taken, split over two writes.
        *pending.lock().unwrap() = None;
        let f = wifi(b"home network", b"a long pass key of many bytes");
        assert!(f.len() > 20);
        write(&mut d, &f, &pending);
        assert_eq!(pending.lock().unwrap().take().unwrap().ssid, "home network");
        assert_eq!(d.state_of(PHONE), State::Provisioning);
        // Another source's result is not this session's.
        let j = |ssid: &str, online| {
            Some(Event::Joined {
                ssid: ssid.into(),
                online,
            })
        };
        assert!(d.event(j("portal", true), 2, &dev, &pending).is_empty());
        let out = to_phone(d.event(j("home network", false), 3, &dev, &pending));
        assert!(
            out.contains(&Output::Error(ErrorCode::UnableToConnect)),
            "{out:?}"
        );
        write(&mut d, &f, &pending);
        pending.lock().unwrap().take();
        let out = to_phone(d.event(j("home network", true), 4, &dev, &pending));
        assert_eq!(out[0], Output::State(State::Provisioned));
        assert!(d.provisioned_at.is_some());
        assert_eq!(d.state(), State::Provisioned, "the device's state");
    }

    /// The portal's bad-input scenario over BLE, through the transport's driver (split
    /// writes, the shared slot): each refused, nothing pending, still authorized.
    #[test]
    fn the_portals_bad_inputs_over_ble_change_nothing() {
        let pending = Mutex::new(None);
        let mut d = Driver::new(b"label-secret-1");
        authorize(&mut d, b"label-secret-1", &pending);
        let mut bad_sum = wifi(b"home", b"password-1");
        *bad_sum.last_mut().unwrap() ^= 0xff;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("short pass key", wifi(b"home", b"short")),
            ("pass key over 63", wifi(b"home", &[b'p'; 64])),
            ("empty SSID", wifi(b"", b"password-1")),
            ("SSID over 32 bytes", wifi(&[b'a'; 33], b"password-1")),
            ("invalid UTF-8 SSID", wifi(b"\xff\xfe", b"password-1")),
            ("invalid UTF-8 pass key", wifi(b"home", b"pass\xffword")),
            ("control byte", wifi(b"home", b"pass\x00word-1")),
            ("bad checksum", bad_sum),
            ("oversized frame", vec![CMD_WIFI_SETTINGS; 300]),
        ];
        for (what, f) in cases {
            let out = write(&mut d, &f, &pending);
            assert!(
                out.contains(&Output::Error(ErrorCode::InvalidRpc)),
                "{what}: {out:?}"
            );
            assert!(pending.lock().unwrap().is_none(), "{what}");
            assert_eq!(d.state_of(PHONE), State::Authorized, "{what}");
        }
        // Quotes and shell metacharacters are kept byte for byte.
        write(
            &mut d,
            &wifi(b"home \"$(reboot)\"", b"p'ss; rm -rf /"),
            &pending,
        );
        let n = pending.lock().unwrap().take().unwrap();
        assert_eq!(
            (n.ssid.as_str(), n.psk.as_str()),
            ("home \"$(reboot)\"", "p'ss; rm -rf /")
        );
    }
}
