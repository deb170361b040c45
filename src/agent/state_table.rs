//! The state table of docs/protocol.md, cell by cell, over the pure decisions the daemon
//! uses: `backoff::next_poll` (the poller's schedule), `policy::first_contact_wait`
//! (the first-contact wait), `logs::classify` and `logship::retry_wait` (the uploader).
//! The end-to-end tests (tests/it/agent_https.rs, direct and through nginx) cover the key
//! cells against real servers.
use super::logs::classify;
use super::policy::first_contact_wait;
use crate::backoff::{next_poll, Backoff, Jitter, PERMANENT_WAIT};
use crate::logship::{retry_wait, TransportError};
use crate::protocol::ProtocolError;
use std::time::{Duration, Instant};

const S: fn(u64) -> Duration = Duration::from_secs;
const INTERVAL: Duration = Duration::from_secs(60);

/// The answer classes of the table, each as the transport reports it.
fn classes() -> Vec<(&'static str, Result<(), ProtocolError>)> {
    let http = |status, retry_after_secs| {
        Err(ProtocolError::Http {
            status,
            retry_after_secs,
            body: String::new(),
        })
    };
    vec![
        ("2xx", Ok(())),
        // A 304 to a poll is contact; to a log batch it is a 3xx like any other.
        ("304", Ok(())),
        ("3xx", http(307, None)),
        ("401", http(401, None)),
        ("403", http(403, Some(1))),
        ("other 4xx (404)", http(404, None)),
        ("other 4xx (400)", http(400, None)),
        ("408", http(408, None)),
        ("429 + Retry-After 120", http(429, Some(120))),
        ("429 + Retry-After 0", http(429, Some(0))),
        ("5xx", http(500, None)),
        ("503 + Retry-After 30", http(503, Some(30))),
        ("timeout", Err(ProtocolError::Network("timed out".into()))),
        (
            "reset",
            Err(ProtocolError::Network("connection reset".into())),
        ),
    ]
}

/// What the poller does next, as the table says it.
#[derive(Debug, PartialEq)]
enum Poller {
    /// Contact: the next poll after the interval ±10%, backoff reset.
    Interval,
    /// Exponential backoff with jitter (1 s doubling to 5 min), at least `floor`.
    Backoff { floor: Duration },
    /// An hour, or new credentials / SIGHUP.
    Hour,
}

fn expected_poller(class: &str) -> Poller {
    match class {
        "2xx" | "304" => Poller::Interval,
        "401" | "403" | "other 4xx (404)" | "other 4xx (400)" => Poller::Hour,
        "429 + Retry-After 120" => Poller::Backoff { floor: S(120) },
        "503 + Retry-After 30" => Poller::Backoff { floor: S(30) },
        _ => Poller::Backoff { floor: S(0) },
    }
}

/// What the uploader does with a batch, as the table says it.
#[derive(Debug, PartialEq)]
enum Uploader {
    Ack,
    /// Backoff; the batch is halved first (to isolate a refused record) when `halve`.
    Backoff {
        halve: bool,
    },
    /// Pause an hour keeping every record, or until new credentials.
    Pause,
}

fn expected_uploader(class: &str) -> Uploader {
    match class {
        "2xx" => Uploader::Ack,
        "401" | "403" | "other 4xx (404)" => Uploader::Pause,
        "other 4xx (400)" => Uploader::Backoff { halve: true },
        _ => Uploader::Backoff { halve: false },
    }
}

/// A poller's backoff in each state of the table: the failures counted so far.
fn states() -> Vec<(&'static str, u32)> {
    vec![
        ("first contact", 0),
        ("steady", 0),
        ("backoff", 6),
        // A permanent error does not count as a failure: the hour is the wait.
        ("permanent error", 0),
    ]
}

fn backoff_after(failures: u32, jitter: &mut Jitter) -> Backoff {
    let mut b = Backoff::new(S(1), S(300));
    for _ in 0..failures {
        b.next_delay(jitter);
    }
    b
}

#[test]
fn every_cell_of_the_poller_table() {
    for (state, failures) in states() {
        for (class, result) in classes() {
            let cell = format!("{state} / {class}");
            for seed in 1..50 {
                let mut j = Jitter::seeded(seed);
                let mut b = backoff_after(failures, &mut j);
                let outcome = result.as_ref().map(|_| INTERVAL).map_err(|e| e.retry());
                let wait = next_poll(outcome, &mut b, &mut j);
                match expected_poller(class) {
                    Poller::Interval => {
                        assert!(wait >= S(54) && wait <= S(66), "{cell}: {wait:?}");
                        assert_eq!(b.attempts(), 0, "{cell}: backoff not reset");
                    }
                    Poller::Hour => {
                        assert_eq!(wait, PERMANENT_WAIT, "{cell}");
                        assert_eq!(b.attempts(), failures, "{cell}: counted as a failure");
                    }
                    Poller::Backoff { floor } => {
                        let ceiling = S(1 << failures.min(8)).min(S(300)).max(floor);
                        assert!(
                            wait >= floor.max(S(1)) && wait <= ceiling,
                            "{cell}: {wait:?} not in [{floor:?}, {ceiling:?}]"
                        );
                        assert_eq!(b.attempts(), failures + 1, "{cell}");
                    }
                }
                if state == "first contact" {
                    // The first-contact wait never shortens the rule: a try that falls
                    // inside the 60 s comes after exactly that wait, one after it ends
                    // the wait (svc-server starts).
                    let now = Instant::now();
                    let fc = first_contact_wait(now, now + wait, now + S(60));
                    if wait < S(60) {
                        assert_eq!(fc, Some(wait), "{cell}");
                    } else {
                        assert_eq!(fc, None, "{cell}");
                    }
                }
            }
        }
    }
}

#[test]
fn every_cell_of_the_uploader_table() {
    for (class, result) in classes() {
        let cell = format!("uploader / {class}");
        // A 304 to a log batch is a 3xx: only a 2xx acknowledges.
        let result = match (class, result) {
            ("304", _) => Err(ProtocolError::Http {
                status: 304,
                retry_after_secs: None,
                body: String::new(),
            }),
            (_, r) => r,
        };
        let got = match result {
            Ok(()) => Uploader::Ack,
            Err(e) => match classify(&e) {
                TransportError::Refused(_) => Uploader::Pause,
                TransportError::Rejected(_) => Uploader::Backoff { halve: true },
                TransportError::Unavailable(_) | TransportError::Io(_) => {
                    Uploader::Backoff { halve: false }
                }
            },
        };
        assert_eq!(got, expected_uploader(class), "{cell}");
    }
    // The waits behind those reactions: a pause is the whole refused_wait and does not
    // grow the backoff; the others are the poller's backoff.
    let mut j = Jitter::seeded(3);
    let mut b = Backoff::new(S(1), S(300));
    let refused = TransportError::Refused("401".into());
    assert_eq!(
        retry_wait(&refused, &mut b, &mut j, PERMANENT_WAIT),
        PERMANENT_WAIT
    );
    assert_eq!(b.attempts(), 0);
    for n in 0..12u32 {
        let wait = retry_wait(
            &TransportError::Unavailable("500".into()),
            &mut b,
            &mut j,
            PERMANENT_WAIT,
        );
        assert!(
            wait >= S(1) && wait <= S(1 << n.min(8)).min(S(300)),
            "{n}: {wait:?}"
        );
    }
}

/// No credentials: the poller sends nothing (no transport) and the uploader holds every
/// line on disk, paused until the agent hands it credentials (a new file, a SIGHUP).
#[test]
fn without_credentials_the_uploader_pauses_and_keeps_the_lines() {
    use crate::logship::LogTransport;
    let mut logs = super::logs::AppLogs::without_credentials();
    let rec = crate::logqueue::QueuedRecord {
        id: 1,
        ts_ms: 0,
        level: crate::logging::Level::Info,
        subsystem: "agent".into(),
        message: "x".into(),
    };
    assert!(matches!(
        logs.send_batch(&[rec]),
        Err(TransportError::Refused(_))
    ));
}
