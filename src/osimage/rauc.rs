//! RAUC's D-Bus service, `de.pengutronix.rauc` on the system bus (object `/`, interface
//! `de.pengutronix.rauc.Installer`; RAUC's `src/de.pengutronix.rauc.Installer.xml`): install,
//! progress, last error, slot status, primary, mark. Typed answers, no text parsed from a
//! command's output. Every call has a deadline (the connection's method timeout) and the
//! install's wait for `Completed` has its own.
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use zbus::blocking::Connection;
use zbus::zvariant::{OwnedValue, Value};

pub(crate) const SERVICE: &str = "de.pengutronix.rauc";
const PATH: &str = "/";
const IFACE: &str = "de.pengutronix.rauc.Installer";
/// One method call's deadline: RAUC answers from its main loop, never after a slot write.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Every way talking to RAUC fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RaucError {
    /// No system bus, or RAUC's service is not on it.
    Unavailable(String),
    /// RAUC answered a call with an error.
    Call {
        method: &'static str,
        message: String,
    },
    /// The install ended with a failure: RAUC's own reason (`LastError`).
    InstallFailed(String),
    /// RAUC's service left the bus while installing.
    Vanished,
    /// No answer within the deadline.
    Timeout { what: &'static str, secs: u64 },
    /// An answer of another shape than the interface's.
    BadReply(String),
}

impl fmt::Display for RaucError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RaucError::Unavailable(m) => write!(f, "RAUC's D-Bus service is not available: {m}"),
            RaucError::Call { method, message } => write!(f, "RAUC {method}: {message}"),
            RaucError::InstallFailed(m) => write!(f, "RAUC refused or failed the install: {m}"),
            RaucError::Vanished => f.write_str("RAUC's service left the bus during the install"),
            RaucError::Timeout { what, secs } => {
                write!(f, "RAUC: no {what} within {secs} s")
            }
            RaucError::BadReply(m) => write!(f, "RAUC answered in an unexpected shape: {m}"),
        }
    }
}

impl std::error::Error for RaucError {}

/// `Mark`'s states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    Good,
    Bad,
    Active,
}

impl Mark {
    fn as_str(self) -> &'static str {
        match self {
            Mark::Good => "good",
            Mark::Bad => "bad",
            Mark::Active => "active",
        }
    }
}

/// One slot of `GetSlotStatus` (the keys this agent reads).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Slot {
    /// `rootfs.0`: what `Mark` takes.
    pub name: String,
    pub class: String,
    pub bootname: Option<String>,
    /// `booted`, `active`, `inactive`.
    pub state: String,
    /// `good` or `bad`, as the boot loader keeps it.
    pub boot_status: Option<String>,
    /// The version of the bundle last installed into this slot.
    pub bundle_version: Option<String>,
}

fn text(v: &Value<'_>) -> Option<String> {
    match v {
        Value::Str(s) => Some(s.to_string()),
        Value::Value(inner) => text(inner),
        _ => None,
    }
}

fn slot_of(name: String, d: &HashMap<String, OwnedValue>) -> Slot {
    let get = |k: &str| d.get(k).and_then(|v| text(v));
    Slot {
        class: get("class").unwrap_or_default(),
        bootname: get("bootname"),
        state: get("state").unwrap_or_default(),
        boot_status: get("boot-status"),
        bundle_version: get("bundle.version"),
        name,
    }
}

/// A connection to RAUC's service.
pub(crate) struct Rauc {
    conn: Connection,
    /// RAUC's unique name: only its own `Completed` counts (anyone on the bus may send a
    /// signal with that interface name).
    owner: String,
}

fn unavailable(e: zbus::Error) -> RaucError {
    RaucError::Unavailable(e.to_string())
}

impl Rauc {
    /// Connects to the system bus (`DBUS_SYSTEM_BUS_ADDRESS` when set) and finds RAUC on it.
    pub(crate) fn connect() -> Result<Rauc, RaucError> {
        let conn = zbus::blocking::connection::Builder::system()
            .map_err(unavailable)?
            .method_timeout(CALL_TIMEOUT)
            .build()
            .map_err(unavailable)?;
        // An image may leave rauc.service to D-Bus activation: ask for it to be started, once
        // per run (an activation that hangs holds the call up to the bus's own timeout; a name
        // already owned or not activatable answers at once, and the owner query below says
        // what is wrong).
        static ASKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !ASKED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let _ = conn.call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "StartServiceByName",
                &(SERVICE, 0u32),
            );
        }
        let owner = conn
            .call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "GetNameOwner",
                &(SERVICE,),
            )
            .and_then(|m| m.body().deserialize::<String>())
            .map_err(|e| {
                RaucError::Unavailable(format!("{SERVICE} is not on the system bus ({e})"))
            })?;
        Ok(Rauc { conn, owner })
    }

    fn call<B, R>(&self, method: &'static str, body: &B) -> Result<R, RaucError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
    {
        let m = self
            .conn
            .call_method(Some(self.owner.as_str()), PATH, Some(IFACE), method, body)
            .map_err(|e| match e {
                zbus::Error::InputOutput(_) => RaucError::Vanished,
                e => RaucError::Call {
                    method,
                    message: e.to_string(),
                },
            })?;
        m.body()
            .deserialize::<R>()
            .map_err(|e| RaucError::BadReply(format!("{method}: {e}")))
    }

    fn property(&self, name: &'static str) -> Result<OwnedValue, RaucError> {
        self.conn
            .call_method(
                Some(self.owner.as_str()),
                PATH,
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &(IFACE, name),
            )
            .map_err(|e| RaucError::Call {
                method: name,
                message: e.to_string(),
            })?
            .body()
            .deserialize::<OwnedValue>()
            .map_err(|e| RaucError::BadReply(format!("{name}: {e}")))
    }

    fn text_property(&self, name: &'static str) -> Result<String, RaucError> {
        let v = self.property(name)?;
        text(&v).ok_or_else(|| RaucError::BadReply(format!("{name} is not a string")))
    }

    /// The system's compatible string (`[system] compatible` of system.conf).
    pub(crate) fn compatible(&self) -> Result<String, RaucError> {
        self.text_property("Compatible")
    }

    /// `idle` or `installing`.
    pub(crate) fn operation(&self) -> Result<String, RaucError> {
        self.text_property("Operation")
    }

    pub(crate) fn last_error(&self) -> Result<String, RaucError> {
        self.text_property("LastError")
    }

    /// (percentage, message).
    pub(crate) fn progress(&self) -> Result<(i32, String), RaucError> {
        let v = self.property("Progress")?;
        let bad = || RaucError::BadReply("Progress is not (isi)".into());
        let fields = match &*v {
            Value::Structure(s) => s.fields(),
            _ => return Err(bad()),
        };
        match fields {
            [Value::I32(p), m, _] => Ok((*p, text(m).ok_or_else(bad)?)),
            _ => Err(bad()),
        }
    }

    pub(crate) fn slots(&self) -> Result<Vec<Slot>, RaucError> {
        let all: Vec<(String, HashMap<String, OwnedValue>)> = self.call("GetSlotStatus", &())?;
        Ok(all.into_iter().map(|(n, d)| slot_of(n, &d)).collect())
    }

    /// The slot running now (the one RAUC calls `booted`).
    pub(crate) fn booted(&self) -> Result<Slot, RaucError> {
        self.slots()?
            .into_iter()
            .find(|s| s.state == "booted")
            .ok_or_else(|| RaucError::BadReply("no slot is marked booted".into()))
    }

    /// The slot the boot loader starts next.
    pub(crate) fn primary(&self) -> Result<String, RaucError> {
        self.call("GetPrimary", &())
    }

    /// Marks `slot` (`booted`, `other` or a slot name); the slot RAUC marked.
    pub(crate) fn mark(&self, state: Mark, slot: &str) -> Result<String, RaucError> {
        let (name, _message): (String, String) = self.call("Mark", &(state.as_str(), slot))?;
        Ok(name)
    }

    /// Installs `bundle` and waits for RAUC's `Completed` (at most `deadline`), calling
    /// `progress` now and then. RAUC checks the bundle's signature with its keyring and the
    /// compatible string, writes the other slot and makes it primary only when it was
    /// written whole; any failure leaves the booted slot primary.
    pub(crate) fn install(
        &self,
        bundle: &Path,
        deadline: Duration,
        mut progress: impl FnMut(i32, &str),
    ) -> Result<(), RaucError> {
        let source = bundle
            .to_str()
            .ok_or_else(|| RaucError::BadReply("bundle path is not UTF-8".into()))?;
        // Subscribed before the call: a fast install's signal is not missed.
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(self.owner.as_str())
            .and_then(|b| b.interface(IFACE))
            .and_then(|b| b.member("Completed"))
            .map(|b| b.build())
            .map_err(|e| RaucError::BadReply(e.to_string()))?;
        let signals = zbus::blocking::MessageIterator::for_match_rule(rule, &self.conn, Some(8))
            .map_err(unavailable)?;
        let (tx, rx) = mpsc::channel();
        // The iterator blocks; its thread ends when the connection closes (below, on every
        // way out) or the signal comes.
        crate::sys::thread("rauc-completed")
            .spawn(move || {
                for m in signals.flatten() {
                    if let Ok(code) = m.body().deserialize::<i32>() {
                        let _ = tx.send(code);
                        return;
                    }
                }
            })
            .map_err(|e| RaucError::Unavailable(format!("cannot start a thread: {e}")))?;
        let args: HashMap<&str, Value<'_>> = HashMap::new();
        self.call::<_, ()>("InstallBundle", &(source, args))?;
        let end = Instant::now() + deadline;
        let mut last_shown = None;
        loop {
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(0) => return Ok(()),
                Ok(_) => {
                    let why = self.last_error().unwrap_or_default();
                    return Err(RaucError::InstallFailed(if why.is_empty() {
                        "no reason given".into()
                    } else {
                        why
                    }));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(RaucError::Vanished),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= end {
                return Err(RaucError::Timeout {
                    what: "end of the install",
                    secs: deadline.as_secs(),
                });
            }
            match self.progress() {
                Ok(p) if last_shown.as_ref() != Some(&p) => {
                    progress(p.0, &p.1);
                    last_shown = Some(p);
                }
                Ok(_) => {}
                // RAUC gone (crashed, stopped): its unique name no longer answers.
                Err(RaucError::Call { .. }) if !self.owner_alive() => {
                    return Err(RaucError::Vanished)
                }
                Err(_) => {}
            }
        }
    }

    fn owner_alive(&self) -> bool {
        self.conn
            .call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "NameHasOwner",
                &(self.owner.as_str(),),
            )
            .and_then(|m| m.body().deserialize::<bool>())
            .unwrap_or(false)
    }
}

impl Drop for Rauc {
    fn drop(&mut self) {
        // Ends the `Completed` waiter's blocked iterator.
        let _ = self.conn.clone().close();
    }
}
