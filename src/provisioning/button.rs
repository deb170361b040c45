//! The Improv button (#45): a key of a Linux input device that the manufacturer names in the
//! defaults file (`attributes.improv_button`), read as the kernel's input events
//! (`/dev/input/eventN`: `struct input_event`, read whole; no ioctl, so no unsafe code). A
//! press (`EV_KEY`, the key's code, value 1) is sent to the BLE thread, which authorizes one
//! connection with it (`improv::Centrals::press`).
#[cfg(test)]
use crate::config::input_keys::key_code;
use crate::config::model::ImprovButton;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const EV_KEY: u16 = 0x01;
/// How often the reader looks at its stop flag while no event comes.
const POLL: Duration = Duration::from_millis(500);

/// `struct input_event`: a `struct timeval` of two kernel longs, then type, code and value
/// (24 bytes on 64-bit machines, 16 on 32-bit ones, also with 64-bit time).
const EVENT_SIZE: usize = 2 * std::mem::size_of::<libc::c_ulong>() + 8;

/// Whether one event record is a press of `key` (a release is 0, autorepeat 2).
pub(crate) fn is_press(rec: &[u8], key: u16) -> bool {
    let at = EVENT_SIZE - 8;
    let Some(tail) = rec.get(at..EVENT_SIZE) else {
        return false;
    };
    let typ = u16::from_ne_bytes([tail[0], tail[1]]);
    let code = u16::from_ne_bytes([tail[2], tail[3]]);
    let value = i32::from_ne_bytes([tail[4], tail[5], tail[6], tail[7]]);
    typ == EV_KEY && code == key && value == 1
}

/// The event device of the button: its path, or the `eventN` whose device has that name.
pub(crate) fn resolve(b: &ImprovButton, sys_class_input: &Path) -> Result<PathBuf, String> {
    if let Some(d) = &b.device {
        return Ok(PathBuf::from(d));
    }
    let name = b.name.as_deref().unwrap_or("");
    let dir = std::fs::read_dir(sys_class_input)
        .map_err(|e| format!("{}: {e}", sys_class_input.display()))?;
    let mut found: Vec<String> = dir
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("event"))
        .filter(|n| {
            std::fs::read_to_string(sys_class_input.join(n).join("device/name"))
                .is_ok_and(|s| s.trim_end_matches('\n') == name)
        })
        .collect();
    found.sort();
    match found.as_slice() {
        [one] => Ok(Path::new("/dev/input").join(one)),
        [] => Err(format!("no input device named {name:?}")),
        many => Err(format!(
            "{} input devices are named {name:?} ({}): name it by path",
            many.len(),
            many.join(", ")
        )),
    }
}

/// Reads the button's device until `stop`, calling `pressed` at each press. Opening it is
/// retried (the device may appear after the agent starts: a module loaded late).
pub(crate) fn watch(b: &ImprovButton, stop: &AtomicBool, pressed: &dyn Fn()) {
    let mut last_error = String::new();
    while !stop.load(Ordering::SeqCst) {
        let opened = resolve(b, Path::new("/sys/class/input"))
            .and_then(|p| std::fs::File::open(&p).map_err(|e| format!("{}: {e}", p.display())));
        let mut f = match opened {
            Ok(f) => f,
            Err(e) => {
                if e != last_error {
                    crate::warn!("provisioning", "Improv button: {e}; retrying");
                    last_error = e;
                }
                std::thread::sleep(POLL * 4);
                continue;
            }
        };
        crate::info!("provisioning", "Improv button: waiting for key {}", b.key);
        last_error.clear();
        let mut rec = [0u8; EVENT_SIZE];
        while !stop.load(Ordering::SeqCst) {
            if !crate::sys::wait_readable(f.as_raw_fd(), POLL) {
                continue;
            }
            // The device hands out whole records only.
            match f.read_exact(&mut rec) {
                Ok(()) if is_press(&rec, b.key) => pressed(),
                Ok(()) => {}
                Err(e) => {
                    crate::warn!("provisioning", "Improv button: {e}; reopening");
                    break;
                }
            }
        }
    }
}

/// The reader thread; ends (joined) when dropped.
pub(crate) struct ButtonThread {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl ButtonThread {
    pub(crate) fn spawn(b: ImprovButton, pressed: Box<dyn Fn() + Send>) -> Option<ButtonThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handle = crate::sys::thread("improv-button")
            .spawn(move || watch(&b, &s, &*pressed))
            .map_err(|e| crate::error!("provisioning", "Improv button: no thread: {e}"))
            .ok()?;
        Some(ButtonThread {
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for ButtonThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One `struct input_event` as the kernel hands it out.
    pub(crate) fn record(typ: u16, code: u16, value: i32) -> Vec<u8> {
        let mut r = vec![0u8; EVENT_SIZE - 8];
        r.extend_from_slice(&typ.to_ne_bytes());
        r.extend_from_slice(&code.to_ne_bytes());
        r.extend_from_slice(&value.to_ne_bytes());
        r
    }

    #[test]
    fn only_a_press_of_the_named_key_counts() {
        assert!(is_press(&record(EV_KEY, 0x211, 1), 0x211));
        assert!(!is_press(&record(EV_KEY, 0x211, 0), 0x211), "release");
        assert!(!is_press(&record(EV_KEY, 0x211, 2), 0x211), "autorepeat");
        assert!(!is_press(&record(EV_KEY, 28, 1), 0x211), "another key");
        assert!(!is_press(&record(0, 0x211, 1), 0x211), "EV_SYN");
        assert!(!is_press(&[0u8; 3], 0x211), "short");
    }

    #[test]
    fn keys_by_code_or_name_and_devices_by_name() {
        use serde_json::json;
        assert_eq!(key_code(&json!("KEY_WPS_BUTTON")), Ok(0x211));
        assert_eq!(key_code(&json!(256)), Ok(256));
        assert!(key_code(&json!(0)).unwrap_err().contains("out of range"));
        assert!(key_code(&json!(0x300)).is_err());
        assert!(key_code(&json!("KEY_NOPE"))
            .unwrap_err()
            .contains("KEY_WPS_BUTTON"));
        assert!(key_code(&json!(true)).is_err());
        let sys = std::env::temp_dir().join(format!("svc-button-sys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&sys);
        for (ev, name) in [
            ("event0", "AT keyboard"),
            ("event3", "gpio-keys"),
            ("event7", "twin"),
            ("event8", "twin"),
        ] {
            std::fs::create_dir_all(sys.join(ev).join("device")).unwrap();
            std::fs::write(sys.join(ev).join("device/name"), format!("{name}\n")).unwrap();
        }
        let b = |name: &str| ImprovButton {
            device: None,
            name: Some(name.into()),
            key: 0x211,
        };
        assert_eq!(
            resolve(&b("gpio-keys"), &sys),
            Ok(PathBuf::from("/dev/input/event3"))
        );
        assert!(resolve(&b("none"), &sys)
            .unwrap_err()
            .contains("no input device"));
        assert!(resolve(&b("twin"), &sys)
            .unwrap_err()
            .contains("event7, event8"));
        std::fs::remove_dir_all(&sys).unwrap();
    }
}
