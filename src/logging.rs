//! The one logging facade of both binaries.
//!
//! Lines go to stderr with a `<N>` syslog priority prefix when running under systemd
//! (journald reads it as the level), otherwise with a timestamp and level name.
//! Every line is scrubbed of registered secrets before it is written anywhere.
//! The persistent shipping queue hooks in through [`set_sink`] (see `logship::attach`).
//!
//! Beyond plain lines: [`event`] writes structured `name key=value` lines and [`child_line`]
//! relays a supervised child's output line by line, both scrubbed like everything else.
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

    /// The level [`Level::as_str`] names.
    pub fn from_name(name: &str) -> Option<Level> {
        [Level::Error, Level::Warn, Level::Info, Level::Debug]
            .into_iter()
            .find(|l| l.as_str() == name)
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
///
/// Records logged before the first sink is set wait in a small buffer and are handed to it,
/// so that a program may start its work before it opens its queue.
pub fn set_sink(f: Sink) {
    if let Ok(mut s) = sink().write() {
        if let Ok(mut early) = early().lock() {
            for r in early.drain(..) {
                f(&r);
            }
        }
        *s = Some(f);
    }
}

/// How many records wait for the first sink; beyond that the oldest are dropped (they
/// are on stderr/the journal in any case).
const EARLY_RECORDS: usize = 1000;

fn early() -> &'static std::sync::Mutex<std::collections::VecDeque<Record>> {
    static EARLY: OnceLock<std::sync::Mutex<std::collections::VecDeque<Record>>> = OnceLock::new();
    EARLY.get_or_init(Default::default)
}

/// Shorter strings are never registered: they would redact ordinary words, and no secret the
/// agent handles is shorter (WPA keys and the hotspot password have 8 at least).
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// Registers a secret that must never appear in any log line (psk, keys, passwords).
///
/// Only for secrets the machine really holds (its credentials, a config's keys): a value
/// from outside that is merely submitted (a portal form) must not be registered, or whoever
/// submits it can blank any word in every later log line.
pub fn register_secret(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
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

/// [`register_secret`] for many at once, sorting once: a config with 100,000s of Wi-Fi
/// pass keys registers them in linear time (one call per key re-sorts each time).
pub(crate) fn register_secrets(new: Vec<String>) {
    if let Ok(mut s) = secrets().write() {
        let mut known: std::collections::HashSet<String> = s.iter().cloned().collect();
        let before = s.len();
        for secret in new {
            if secret.len() >= 4 && known.insert(secret.clone()) {
                s.push(secret);
            }
        }
        if s.len() != before {
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

/// Logs one line of a captured child's output, tagged with its stream.
///
/// stdout lines go out at info, stderr lines at warn (a child's stderr is where it complains).
/// A trailing `\r`/`\n` is stripped so that the child's line ending does not double up.
pub fn child_line(subsystem: &str, stream: &str, line: &str) {
    let level = if stream == "stderr" {
        Level::Warn
    } else {
        Level::Info
    };
    let line = line.trim_end_matches(['\n', '\r']);
    log(level, subsystem, &format!("{stream}: {line}"));
}

/// Logs a structured event: `name key=value key2="value with spaces"`.
///
/// Values are scrubbed before quoting (quoting escapes `"` and `\`, which would otherwise
/// hide a secret containing them from the final scrub of the whole line).
pub fn event(level: Level, subsystem: &str, name: &str, fields: &[(&str, &str)]) {
    log(level, subsystem, &format_event(name, fields));
}

/// The text of an [`event`] line (exposed for tests and for callers that build lines).
pub(crate) fn format_event(name: &str, fields: &[(&str, &str)]) -> String {
    let mut out = String::from(name);
    for (key, value) in fields {
        out.push(' ');
        out.push_str(key);
        out.push('=');
        out.push_str(&quote_value(&scrub(value)));
    }
    out
}

fn quote_value(v: &str) -> String {
    let needs = v.is_empty()
        || v.chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '=' || c == '\\');
    if !needs {
        return v.to_string();
    }
    let mut q = String::with_capacity(v.len() + 2);
    q.push('"');
    for c in v.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            '\t' => q.push_str("\\t"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
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
        match s.as_ref() {
            Some(f) => f(&record),
            None => {
                if let Ok(mut early) = early().lock() {
                    if early.len() == EARLY_RECORDS {
                        early.pop_front();
                    }
                    early.push_back(record);
                }
            }
        }
    }
}

/// Lines carry a `<N>` priority prefix instead of a timestamp: under journald, or as a
/// child of the agent (`SVC_LOG_PRIORITY_PREFIX=1`), which reads the level back.
fn under_journal() -> bool {
    static J: OnceLock<bool> = OnceLock::new();
    *J.get_or_init(|| {
        std::env::var_os("JOURNAL_STREAM").is_some()
            || std::env::var_os("SVC_LOG_PRIORITY_PREFIX").is_some_and(|v| v == "1")
    })
}

/// Splits a `<N>` syslog priority prefix off a child's output line.
pub(crate) fn parse_priority(line: &str) -> Option<(Level, &str)> {
    let rest = line.strip_prefix('<')?;
    let (digit, msg) = rest.split_once('>')?;
    let level = match digit {
        "0" | "1" | "2" | "3" => Level::Error,
        "4" => Level::Warn,
        "5" | "6" => Level::Info,
        "7" => Level::Debug,
        _ => return None,
    };
    Some((level, msg))
}

fn write_stderr(r: &Record) {
    // One write per message: lines from several threads never interleave, and a line
    // costs one system call. journald takes one priority per line, so a multi-line
    // message gets the prefix on each line.
    let journal = under_journal();
    let ts = if journal { String::new() } else { timestamp() };
    let mut out = String::with_capacity(r.message.len() + 48);
    for line in r.message.split('\n') {
        // Formatted into `out` itself: no string per line to allocate and free (each new
        // size class of musl's allocator maps a page, and unmaps it once empty).
        use std::fmt::Write as _;
        let _ = if journal {
            writeln!(out, "<{}>[{}] {}", r.level as u8, r.subsystem, line)
        } else {
            writeln!(
                out,
                "{} {:5} [{}] {}",
                ts,
                r.level.as_str(),
                r.subsystem,
                line
            )
        };
    }
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ` without a date crate.
pub(crate) fn timestamp() -> String {
    format_timestamp_ms(now_ms())
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339, UTC).
pub(crate) fn format_timestamp_ms(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
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

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm, the
/// inverse of [`civil_from_days`]).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    fn short_strings_are_never_registered() {
        register_secret("seven77");
        assert_eq!(scrub("seven77 words"), "seven77 words");
    }

    #[test]
    fn scrubs_registered_secrets() {
        register_secret("hunter2-wifi");
        assert_eq!(scrub("psk=hunter2-wifi ok"), "psk=*** ok");
    }

    #[test]
    fn event_lines_quote_and_scrub_values() {
        register_secret("s3cr\"et-key");
        let line = format_event(
            "update.done",
            &[
                ("module", "svc-server"),
                ("note", "took a while"),
                ("empty", ""),
                ("key", "s3cr\"et-key"),
            ],
        );
        assert_eq!(
            line,
            "update.done module=svc-server note=\"took a while\" empty=\"\" key=***"
        );
        assert_eq!(quote_value("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }

    #[test]
    fn timestamps_format_millis() {
        assert_eq!(format_timestamp_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_timestamp_ms(1_795_305_600_123),
            "2026-11-22T00:00:00.123Z"
        );
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }
}

#[cfg(test)]
mod priority_tests {
    use super::*;

    #[test]
    fn child_priorities_are_read_back() {
        assert_eq!(
            parse_priority("<4>[svc-server] disk low"),
            Some((Level::Warn, "[svc-server] disk low"))
        );
        assert_eq!(parse_priority("<6>x"), Some((Level::Info, "x")));
        assert_eq!(parse_priority("<9>x"), None);
        assert_eq!(parse_priority("plain text"), None);
    }
}
