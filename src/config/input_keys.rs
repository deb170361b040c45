//! Keys of Linux input devices by code or name, for the button the manufacturer names in the
//! defaults file (`attributes.improv_button`, read by `provisioning::button`).

/// Key codes go up to `KEY_MAX` (0x2ff).
const KEY_MAX: u64 = 0x2ff;

/// Names of the keys a machine's button is likely to send (the rest by number).
const NAMES: &[(&str, u16)] = &[
    ("KEY_ENTER", 28),
    ("KEY_POWER", 116),
    ("KEY_SETUP", 141),
    ("KEY_PROG1", 148),
    ("KEY_PROG2", 149),
    ("KEY_CONFIG", 171),
    ("KEY_CONNECT", 218),
    ("BTN_0", 0x100),
    ("BTN_1", 0x101),
    ("KEY_RESTART", 0x198),
    ("KEY_WPS_BUTTON", 0x211),
];

/// A key from the defaults file: a code (1 to 0x2ff) or one of `NAMES`.
pub(crate) fn key_code(v: &serde_json::Value) -> Result<u16, String> {
    match v {
        serde_json::Value::Number(n) => n
            .as_u64()
            .filter(|k| (1..=KEY_MAX).contains(k))
            .map(|k| k as u16)
            .ok_or_else(|| format!("key code {n} is out of range (1 to {KEY_MAX})")),
        serde_json::Value::String(s) => NAMES
            .iter()
            .find(|(n, _)| n == s)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                let known: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
                format!(
                    "key {s:?} is not known: give its code, or one of {}",
                    known.join(", ")
                )
            }),
        _ => Err("expected a key code (integer) or name (string)".into()),
    }
}
