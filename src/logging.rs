//! The one logging facade of both binaries.
//!
//! Lines go to stderr with a `<N>` syslog priority prefix when running under systemd
//! (journald reads it as the level), otherwise with a timestamp and level name.
//! Every line is scrubbed of registered secrets before it is written anywhere.
//! (The persistent shipping queue hooks in through [`set_sink`].)
use std::io::Write;
use std::sync::{OnceLock, RwLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Error = 3,
    Warn = 4,
    Info = 6,
    Debug = 7,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

/// One log record as it leaves the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub level: Level,
    pub subsystem: String,
    pub message: String,
}

type Sink = Box<dyn Fn(&Record) + Send + Sync>;

fn sink() -> &'static RwLock<Option<Sink>> {
    static SINK: OnceLock<RwLock<Option<Sink>>> = OnceLock::new();
    SINK.get_or_init(|| RwLock::new(None))
}

fn secrets() -> &'static RwLock<Vec<String>> {
    static SECRETS: OnceLock<RwLock<Vec<String>>> = OnceLock::new();
    SECRETS.get_or_init(|| RwLock::new(Vec::new()))
}

/// Installs an extra consumer of every record (after scrubbing), e.g. the shipping queue.
pub fn set_sink(f: Sink) {
    if let Ok(mut s) = sink().write() {
        *s = Some(f);
    }
}

/// Registers a secret that must never appear in any log line (psk, keys, passwords).
pub fn register_secret(secret: &str) {
    // Very short strings would redact ordinary words; they are not meaningful secrets.
    if secret.len() < 4 {
        return;
    }
    if let Ok(mut s) = secrets().write() {
        if !s.iter().any(|x| x == secret) {
            s.push(secret.to_string());
            // Longest first so that a secret containing another is fully replaced.
            s.sort_by_key(|x| std::cmp::Reverse(x.len()));
        }
    }
}

/// Replaces every registered secret in `text` with `***`.
pub fn scrub(text: &str) -> String {
    let mut out = text.to_string();
    if let Ok(s) = secrets().read() {
        for secret in s.iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "***");
            }
        }
    }
    out
}

/// Logs one line.
pub fn log(level: Level, subsystem: &str, message: &str) {
    let record = Record {
        level,
        subsystem: subsystem.to_string(),
        message: scrub(message),
    };
    write_stderr(&record);
    if let Ok(s) = sink().read() {
        if let Some(f) = s.as_ref() {
            f(&record);
        }
    }
}

fn under_journal() -> bool {
    static J: OnceLock<bool> = OnceLock::new();
    *J.get_or_init(|| std::env::var_os("JOURNAL_STREAM").is_some())
}

fn write_stderr(r: &Record) {
    // One write per line: lines from several threads never interleave, and a line costs
    // one system call.
    let line = if under_journal() {
        format!("<{}>[{}] {}\n", r.level as u8, r.subsystem, r.message)
    } else {
        format!(
            "{} {:5} [{}] {}\n",
            timestamp(),
            r.level.as_str(),
            r.subsystem,
            r.message
        )
    };
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ` without a date crate.
pub fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        now.subsec_millis()
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[macro_export]
macro_rules! error { ($sub:expr, $($arg:tt)*) => { $crate::logging::log($crate::logging::Level::Error, $sub, &format!($($arg)*)) } }
#[macro_export]
macro_rules! warn { ($sub:expr, $($arg:tt)*) => { $crate::logging::log($crate::logging::Level::Warn, $sub, &format!($($arg)*)) } }
#[macro_export]
macro_rules! info { ($sub:expr, $($arg:tt)*) => { $crate::logging::log($crate::logging::Level::Info, $sub, &format!($($arg)*)) } }
#[macro_export]
macro_rules! debug { ($sub:expr, $($arg:tt)*) => { $crate::logging::log($crate::logging::Level::Debug, $sub, &format!($($arg)*)) } }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_registered_secrets() {
        register_secret("hunter2-wifi");
        assert_eq!(scrub("psk=hunter2-wifi ok"), "psk=*** ok");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }
}
