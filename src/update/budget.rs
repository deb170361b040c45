//! The byte budget per machine (docs/updates.md, *The byte budget*): the vendor's limit of
//! bytes per UTC day and per UTC month, off by default. The one place that counts and
//! decides: every HTTP-layer byte of this process (polls, status reports, log batches and
//! downloads, `http::take_traffic`) is added to the current day and month, and a download
//! whose remaining announced bytes do not fit what is left waits, nothing fetched, until the
//! next period starts.
//!
//! The counts live in `budget.json` in the state directory, written atomically (no link
//! followed) when they change; a corrupt file is logged and counting starts afresh. A pin
//! (`pin_version`, `pin_url`) is never held ([`Gate::exempt`]); a rollback downloads nothing
//! (it links the previous version back from the cache), so there is nothing to hold.
//! The time comes from a [`Clock`], so that the decision is tested at any instant.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{UpdateError, SUB};
use crate::paths::Paths;

/// The wall clock, UTC seconds since 1970.
pub trait Clock {
    fn unix_now(&self) -> u64;
}

/// The system's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn unix_now(&self) -> u64 {
        crate::logging::now_ms() / 1000
    }
}

/// The vendor's limits (`svc-agent.updates.budget`); `None`: no limit for that period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub day_bytes: Option<u64>,
    pub month_bytes: Option<u64>,
}

impl Limits {
    pub fn is_on(&self) -> bool {
        self.day_bytes.is_some() || self.month_bytes.is_some()
    }
}

/// The budget as a download sees it: the limits and the file that keeps the counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub limits: Limits,
    pub file: PathBuf,
    /// A pin: counted, never held (the caller says so: `pin_version` or `pin_url` named
    /// what is downloaded).
    pub exempt: bool,
}

impl Gate {
    /// The gate of the machine at `paths`; `None` when the limits are off.
    pub fn new(paths: &Paths, limits: Limits) -> Option<Gate> {
        limits.is_on().then(|| Gate {
            limits,
            file: path(paths),
            exempt: false,
        })
    }

    /// The gate of the config's `svc-agent.updates.budget`; `None` when it sets none.
    pub(crate) fn of(
        paths: &Paths,
        settings: Option<crate::config::model::BudgetSettings>,
    ) -> Option<Gate> {
        let s = settings?;
        let limits = Limits {
            day_bytes: s.day_bytes,
            month_bytes: s.month_bytes,
        };
        Gate::new(paths, limits)
    }
}

/// `/opt/svc/budget.json`.
pub(crate) fn path(paths: &Paths) -> PathBuf {
    paths.state_dir().join("budget.json")
}

/// The counts of the current periods, and the downloads waiting for the next one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Ledger {
    /// The UTC day counted, `YYYY-MM-DD`.
    pub day: String,
    pub day_bytes: u64,
    /// The UTC month counted, `YYYY-MM`.
    pub month: String,
    pub month_bytes: u64,
    /// Per binary name: the download that waits.
    #[serde(default)]
    pub waiting: BTreeMap<String, Wait>,
}

/// A download held by the budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    pub version: String,
    /// The bytes it still needs.
    pub bytes: u64,
    /// The bytes left in the period that holds it.
    pub left: u64,
    /// Unix time the period that holds it ends: the download is tried again then.
    pub until: u64,
}

/// The UTC periods an instant falls in: their names as the ledger writes them, and when
/// the next ones start (unix time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    pub day: String,
    pub month: String,
    pub next_day: u64,
    pub next_month: u64,
}

/// The periods of the instant `unix`.
pub fn period(unix: u64) -> Period {
    let days = (unix / 86_400) as i64;
    let (y, m, d) = crate::logging::civil_from_days(days);
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    Period {
        day: format!("{y:04}-{m:02}-{d:02}"),
        month: format!("{y:04}-{m:02}"),
        next_day: (days as u64 + 1) * 86_400,
        next_month: crate::logging::days_from_civil(ny, nm, 1).max(0) as u64 * 86_400,
    }
}

/// One reader-writer of the file in this process at a time (the loop counts, a download
/// worker decides).
static LOCK: Mutex<()> = Mutex::new(());

/// The ledger in `file`; missing: empty; unreadable or corrupt: why.
fn read(file: &Path) -> Result<Ledger, String> {
    match crate::fsutil::read_regular(file, crate::fsutil::STATE_FILE_LIMIT) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a budget record ({e})", file.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Ledger::default()),
        Err(e) => Err(format!("reading {}: {e}", file.display())),
    }
}

/// [`read`], a bad file logged and counted afresh (the next save replaces it, so it is
/// logged once).
fn load(file: &Path) -> Ledger {
    read(file).unwrap_or_else(|why| {
        crate::warn!(SUB, "byte budget: {why}; counting afresh from now");
        Ledger::default()
    })
}

fn save(file: &Path, l: &Ledger) {
    let written = serde_json::to_vec_pretty(l)
        .map_err(std::io::Error::other)
        .and_then(|b| crate::fsutil::atomic_write(file, &b, 0o600));
    if let Err(e) = written {
        crate::warn!(SUB, "byte budget: writing {}: {e}", file.display());
    }
}

impl Ledger {
    /// A period that ended starts its count again.
    fn roll(&mut self, p: &Period) {
        if self.day != p.day {
            self.day = p.day.clone();
            self.day_bytes = 0;
        }
        if self.month != p.month {
            self.month = p.month.clone();
            self.month_bytes = 0;
        }
    }

    fn add(&mut self, bytes: u64) {
        self.day_bytes = self.day_bytes.saturating_add(bytes);
        self.month_bytes = self.month_bytes.saturating_add(bytes);
    }

    /// Whether `need` more bytes fit; if not, what is left and when the holding period
    /// ends (the later end when both hold).
    fn fits(&self, limits: Limits, p: &Period, need: u64) -> Result<(), (u64, u64)> {
        let mut held: Option<(u64, u64)> = None;
        for (limit, used, end) in [
            (limits.day_bytes, self.day_bytes, p.next_day),
            (limits.month_bytes, self.month_bytes, p.next_month),
        ] {
            let Some(limit) = limit else { continue };
            let left = limit.saturating_sub(used);
            // Something must be left even for a download of no announced size.
            if need > left || left == 0 {
                held = Some(match held {
                    Some((l, u)) => (l.min(left), u.max(end)),
                    None => (left, end),
                });
            }
        }
        held.map_or(Ok(()), Err)
    }
}

/// Adds the HTTP-layer bytes counted since the last call to the current periods (the loop,
/// once per pass). With the budget off they are dropped: nothing is written.
pub(crate) fn account(gate: Option<&Gate>, clock: &dyn Clock) {
    let bytes = crate::http::take_traffic();
    let Some(gate) = gate else { return };
    if bytes == 0 {
        // Most passes move nothing: no read, no write (a wait's end is `admit`'s).
        return;
    }
    let now = clock.unix_now();
    update(gate, now, bytes, |l| {
        // A wait whose period ended is decided again by the next try; one whose offer went
        // away is not shown for longer than its period.
        l.waiting.retain(|_, w| w.until > now);
    });
}

/// The ledger under the lock, its periods rolled to `now` and `bytes` added, handed to
/// `decide`; written back when anything changed.
fn update<T>(gate: &Gate, now: u64, bytes: u64, decide: impl FnOnce(&mut Ledger) -> T) -> T {
    let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut l = load(&gate.file);
    let before = l.clone();
    l.roll(&period(now));
    l.add(bytes);
    let out = decide(&mut l);
    if l != before {
        save(&gate.file, &l);
    }
    out
}

/// Whether a download of `name` `version` that still needs `need` bytes may start now.
/// Held: `UpdateError::OverBudget`, the wait noted in the ledger (for the status) and logged
/// when it is new; admitted: a wait noted before is cleared (logged). A pin is admitted.
pub(crate) fn admit(
    gate: &Gate,
    clock: &dyn Clock,
    name: &str,
    version: &str,
    need: u64,
) -> Result<(), UpdateError> {
    let bytes = crate::http::take_traffic();
    let now = clock.unix_now();
    let p = period(now);
    update(gate, now, bytes, |l| match l.fits(gate.limits, &p, need) {
        Err((left, until)) if !gate.exempt => {
            let wait = Wait {
                version: version.to_string(),
                bytes: need,
                left,
                until,
            };
            // Logged when the wait begins, not at every try (what is left moves with each
            // poll; the version and the end of the wait do not).
            let known = l.waiting.get(name);
            if known.map(|w| (w.version.as_str(), w.until)) != Some((version, until)) {
                crate::warn!(
                    SUB,
                    "{name} {version}: waits for the byte budget: it needs {need} bytes, {left} are left; tried again at {}",
                    crate::logging::format_timestamp_ms(until.saturating_mul(1000))
                );
            }
            l.waiting.insert(name.to_string(), wait);
            Err(UpdateError::OverBudget {
                name: name.to_string(),
                version: version.to_string(),
                needed: need,
                left,
                until,
                wait_secs: until.saturating_sub(now),
            })
        }
        held => {
            if held.is_err() {
                crate::info!(
                    SUB,
                    "{name} {version}: over the byte budget, downloaded anyway: it is pinned"
                );
            }
            if l.waiting.remove(name).is_some() {
                crate::info!(
                    SUB,
                    "{name} {version}: the byte budget lets it download now"
                );
            }
            Ok(())
        }
    })
}

/// What the status report shows of the budget: its limits and the downloads it holds. The
/// counts are not in it (they move with every poll, and a report that changed is sent);
/// they are in `budget.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetStatus {
    pub day_limit: Option<u64>,
    pub month_limit: Option<u64>,
    pub waiting: BTreeMap<String, Wait>,
}

/// The budget for the status report; `None` when it is off.
pub(crate) fn status(gate: Option<&Gate>) -> Option<BudgetStatus> {
    let gate = gate?;
    // A bad file is the counting's to log (and replace), not the report's.
    let l = {
        let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        read(&gate.file).unwrap_or_default()
    };
    Some(BudgetStatus {
        day_limit: gate.limits.day_bytes,
        month_limit: gate.limits.month_bytes,
        waiting: l.waiting,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct At(u64);
    impl Clock for At {
        fn unix_now(&self) -> u64 {
            self.0
        }
    }

    /// The ledger now, its periods rolled (nothing written).
    fn ledger(gate: &Gate, clock: &dyn Clock) -> Ledger {
        let mut l = {
            let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
            load(&gate.file)
        };
        l.roll(&period(clock.unix_now()));
        l
    }

    /// 2026-11-27 12:00:00 UTC.
    const NOON: u64 = 1_795_780_800;

    fn gate(dir: &str, day: Option<u64>, month: Option<u64>) -> Gate {
        let d = std::env::temp_dir().join(format!("svc-budget-{dir}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Gate {
            limits: Limits {
                day_bytes: day,
                month_bytes: month,
            },
            file: d.join("budget.json"),
            exempt: false,
        }
    }

    #[test]
    fn periods_are_utc_days_and_months() {
        let p = period(NOON);
        assert_eq!(
            (p.day.as_str(), p.month.as_str()),
            ("2026-11-27", "2026-11")
        );
        assert_eq!(p.next_day, NOON + 12 * 3600);
        // 2026-12-01 00:00:00 UTC.
        assert_eq!(p.next_month, 1_796_083_200);
        let dec = period(1_798_761_599); // 2026-12-31 23:59:59
        assert_eq!(
            (dec.day.as_str(), dec.month.as_str()),
            ("2026-12-31", "2026-12")
        );
        assert_eq!(dec.next_month, 1_798_761_600); // 2027-01-01
        for d in [-800_000i64, -1, 0, 59, 60, 19_000, 400_000] {
            let (y, m, dd) = crate::logging::civil_from_days(d);
            assert_eq!(crate::logging::days_from_civil(y, m, dd), d);
        }
    }

    #[test]
    fn a_download_that_does_not_fit_waits_until_the_period_ends_then_goes() {
        let g = gate("wait", Some(1000), None);
        admit(&g, &At(NOON), "svc-server", "2.0.0", 600).unwrap();
        std::fs::write(
            &g.file,
            r#"{"day":"2026-11-27","day_bytes":500,"month":"2026-11","month_bytes":500}"#,
        )
        .unwrap();
        let e = admit(&g, &At(NOON), "svc-server", "2.0.0", 600).unwrap_err();
        let UpdateError::OverBudget { left, until, .. } = e else {
            panic!("{e}")
        };
        assert_eq!((left, until), (500, NOON + 12 * 3600));
        assert!(!e.is_refusal(), "a wait is not a refusal: {e}");
        let s = status(Some(&g)).unwrap();
        assert_eq!(s.waiting["svc-server"].until, until);
        // A second before midnight it still waits; at midnight the new day's count admits.
        assert!(admit(&g, &At(until - 1), "svc-server", "2.0.0", 600).is_err());
        admit(&g, &At(until), "svc-server", "2.0.0", 600).unwrap();
        assert!(status(Some(&g)).unwrap().waiting.is_empty());
        let l = ledger(&g, &At(until));
        assert_eq!((l.day.as_str(), l.day_bytes), ("2026-11-28", 0));
        assert_eq!(l.month_bytes, 500, "the month goes on counting");
    }

    #[test]
    fn the_month_holds_to_its_end_and_a_pin_is_never_held() {
        let mut g = gate("month", Some(10_000), Some(1000));
        std::fs::write(
            &g.file,
            r#"{"day":"2026-11-27","day_bytes":0,"month":"2026-11","month_bytes":900}"#,
        )
        .unwrap();
        let e = admit(&g, &At(NOON), "svc-agent", "2.0.0", 200).unwrap_err();
        assert!(
            matches!(
                e,
                UpdateError::OverBudget {
                    left: 100,
                    until: 1_796_083_200,
                    ..
                }
            ),
            "{e}"
        );
        g.exempt = true;
        admit(&g, &At(NOON), "svc-agent", "2.0.0", 200).unwrap();
        assert!(status(Some(&g)).unwrap().waiting.is_empty());
    }

    #[test]
    fn a_corrupt_or_planted_file_is_a_fresh_count_never_a_panic() {
        let g = gate("corrupt", Some(1000), None);
        for bad in [&b"{not json"[..], b"", b"[1,2]", b"{\"day_bytes\": -1}"] {
            std::fs::write(&g.file, bad).unwrap();
            admit(&g, &At(NOON), "svc-server", "1", 10).unwrap();
            let l: Ledger = serde_json::from_slice(&std::fs::read(&g.file).unwrap()).unwrap();
            assert_eq!(l.day, "2026-11-27");
        }
        // A link in its place is not followed: a fresh count, written over the link.
        let target = g.file.with_file_name("elsewhere");
        std::fs::write(&target, b"keep").unwrap();
        std::fs::remove_file(&g.file).unwrap();
        std::os::unix::fs::symlink(&target, &g.file).unwrap();
        admit(&g, &At(NOON), "svc-server", "1", 10).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&g.file)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
