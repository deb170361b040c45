//! Log queue figures for BENCHMARKS.md: append throughput, bytes on disk per line, replay
//! throughput (file transport and a loopback HTTP receiver), memory with 100 MB queued.
//!
//! Run: `scripts/bench-logs.sh` (or `cargo bench --bench logqueue`). `SVC_BENCH_DIR` picks the
//! scratch directory (default: the system temp dir; use a real disk, not tmpfs, for fsync cost).
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)] // a measurement harness
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use svc::logging::Level;
use svc::logqueue::{LogQueue, QueueConfig, QueuedRecord};
use svc::logship::{
    batch_json, LogFileSink, LogTransport, ShipOutcome, Shipper, ShipperConfig, TransportError,
};

/// A typical agent line (~80 bytes of message).
fn line(i: u64) -> String {
    format!(
        "module svc-server restarted pid={} after exit status 1 (attempt {})",
        4000 + i % 1000,
        i % 7
    )
}

/// (Rss, Pss) in KiB from /proc/self/smaps_rollup.
fn mem_kib() -> (u64, u64) {
    let text = fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("Rss:"), field("Pss:"))
}

fn fresh(base: &Path, name: &str) -> PathBuf {
    let d = base.join(name);
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn drain<T: LogTransport>(s: &mut Shipper<T>) -> u64 {
    let mut n = 0;
    loop {
        match s.ship_once().unwrap() {
            ShipOutcome::Sent { records, .. } => n += records as u64,
            ShipOutcome::Empty => return n,
            other => panic!("{other:?}"),
        }
    }
}

/// Minimal HTTP/1.1 receiver: reads each POST body, counts records, answers 200.
fn http_receiver() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/logs", listener.local_addr().unwrap());
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            serve(stream, &c);
        }
    });
    (url, count)
}

/// HTTP/1.1 keep-alive: requests are answered on one connection until the client closes it.
fn serve(stream: TcpStream, count: &AtomicU64) {
    let mut r = BufReader::new(stream);
    while serve_one(&mut r, count) {}
}

fn serve_one(r: &mut BufReader<TcpStream>, count: &AtomicU64) -> bool {
    let mut len = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    if r.read_exact(&mut body).is_err() {
        return false;
    }
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    count.fetch_add(
        v["records"].as_array().unwrap().len() as u64,
        Ordering::Relaxed,
    );
    r.get_mut()
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        .is_ok()
}

struct HttpTransport {
    url: String,
}

impl LogTransport for HttpTransport {
    fn send_batch(&mut self, batch: &[QueuedRecord]) -> Result<(), TransportError> {
        let body = serde_json::to_vec(&batch_json(batch)).unwrap();
        let resp = minreq::post(self.url.as_str())
            .with_header("Content-Type", "application/json")
            .with_body(body)
            .with_timeout(30)
            .send()
            .map_err(|e| TransportError::Unavailable(e.to_string()))?;
        if resp.status_code == 200 {
            Ok(())
        } else {
            Err(TransportError::Unavailable(resp.status_code.to_string()))
        }
    }
}

fn main() {
    let base = std::env::var_os("SVC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("svc-bench-logs-{}", std::process::id()))
        });
    fs::create_dir_all(&base).unwrap();
    println!("scratch dir: {}", base.display());
    let (rss, pss) = mem_kib();
    println!("memory at start: rss {rss} KiB, pss {pss} KiB");
    println!("message: {:?} ({} bytes)", line(1), line(1).len());

    // 1. Append throughput below the cap (default config: 64 KiB buffer, fsync every 1 s).
    let n = 1_000_000u64;
    let dir = fresh(&base, "append");
    let mut q = LogQueue::open(&dir, QueueConfig::with_cap(1 << 30)).unwrap();
    let msgs: Vec<String> = (0..1000).map(line).collect();
    let t = Instant::now();
    for i in 0..n {
        q.append(Level::Info, "svc-server", &msgs[(i % 1000) as usize])
            .unwrap();
    }
    q.sync().unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "append: {n} lines in {secs:.2} s = {:.0} lines/s (incl. final fsync)",
        n as f64 / secs
    );
    println!(
        "bytes on disk per line: {:.1} (message {} bytes, subsystem 10 bytes)",
        q.bytes_on_disk() as f64 / n as f64,
        line(1).len()
    );
    drop(q);

    // 1b. Append at the cap: every append may evict (default 16 MiB cap, mixed levels).
    let dir = fresh(&base, "append-capped");
    let mut q = LogQueue::open(&dir, QueueConfig::default()).unwrap();
    let levels = [
        Level::Debug,
        Level::Debug,
        Level::Info,
        Level::Info,
        Level::Warn,
    ];
    let t = Instant::now();
    for i in 0..n {
        q.append(
            levels[(i % 5) as usize],
            "svc-server",
            &msgs[(i % 1000) as usize],
        )
        .unwrap();
    }
    q.sync().unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "append over a full 16 MiB queue (evicting): {:.0} lines/s, {} bytes queued, dropped {:?}",
        n as f64 / secs,
        q.bytes_on_disk(),
        q.dropped()
    );
    drop(q);

    // 1c. The whole path: info!() -> scrub (2 secrets) -> stderr (to /dev/null) -> queue.
    let dir = fresh(&base, "facade");
    let q = Arc::new(Mutex::new(
        LogQueue::open(&dir, QueueConfig::with_cap(1 << 30)).unwrap(),
    ));
    svc::logship::attach(q.clone());
    svc::logging::register_secret("bench-psk-0123456789");
    svc::logging::register_secret("bench-key-abcdef");
    let devnull = fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    // SAFETY: plain fd juggling on fds this process owns; stderr is restored below.
    let saved = unsafe { libc::dup(2) };
    // SAFETY: as above; `devnull` outlives the redirection.
    unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&devnull), 2) };
    let facade_n = 200_000u64;
    let t = Instant::now();
    for i in 0..facade_n {
        svc::info!("svc-server", "{}", msgs[(i % 1000) as usize]);
    }
    q.lock().unwrap().sync().unwrap();
    let secs = t.elapsed().as_secs_f64();
    // SAFETY: restores the stderr saved above.
    unsafe { libc::dup2(saved, 2) };
    println!(
        "through the logging facade (scrub + stderr to /dev/null + queue): {:.0} lines/s",
        facade_n as f64 / secs
    );
    drop(q);

    // 2. Replay of 100k queued lines to the file transport (fdatasync per batch of 500).
    let lines = 100_000u64;
    let dir = fresh(&base, "replay-file");
    let mgmt = fresh(&base, "replay-file-mgmt");
    {
        let mut q = LogQueue::open(&dir, QueueConfig::default()).unwrap();
        for i in 0..lines {
            q.append(Level::Info, "svc-server", &msgs[(i % 1000) as usize])
                .unwrap();
        }
    }
    // Opening scans (and CRC-checks) every queued record: the cost at agent start.
    let t = Instant::now();
    let q = LogQueue::open(&dir, QueueConfig::default()).unwrap();
    println!(
        "open (scan + verify) of {lines} queued lines, {} bytes: {:.1} ms",
        q.bytes_on_disk(),
        t.elapsed().as_secs_f64() * 1000.0
    );
    let q = Arc::new(Mutex::new(q));
    let mut s = Shipper::new(q, LogFileSink::new(&mgmt), ShipperConfig::default());
    let t = Instant::now();
    let sent = drain(&mut s);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "replay to file transport: {sent} lines in {secs:.2} s = {:.0} lines/s",
        sent as f64 / secs
    );
    drop(s);

    // 3. Replay to a loopback HTTP receiver (one POST per batch, new connection each).
    let (url, received) = http_receiver();
    let dir = fresh(&base, "replay-http");
    {
        let mut q = LogQueue::open(&dir, QueueConfig::default()).unwrap();
        for i in 0..lines {
            q.append(Level::Info, "svc-server", &msgs[(i % 1000) as usize])
                .unwrap();
        }
    }
    let q = Arc::new(Mutex::new(
        LogQueue::open(&dir, QueueConfig::default()).unwrap(),
    ));
    let mut s = Shipper::new(q, HttpTransport { url }, ShipperConfig::default());
    let t = Instant::now();
    let sent = drain(&mut s);
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(received.load(Ordering::Relaxed), sent);
    println!(
        "replay to loopback HTTP: {sent} lines in {secs:.2} s = {:.0} lines/s",
        sent as f64 / secs
    );
    drop(s);

    // 4. Memory while 100 MB is queued (cap 128 MiB), then while it drains.
    let dir = fresh(&base, "memory");
    let mgmt = fresh(&base, "memory-mgmt");
    let mut q = LogQueue::open(&dir, QueueConfig::with_cap(128 << 20)).unwrap();
    let (rss0, pss0) = mem_kib();
    println!("memory: queued_MB rss_KiB pss_KiB");
    println!("memory: {:>4} {rss0} {pss0}", 0);
    let mut i = 0u64;
    for mb in [10u64, 25, 50, 100] {
        while q.bytes_on_disk() < mb * 1_000_000 {
            q.append(Level::Info, "svc-server", &msgs[(i % 1000) as usize])
                .unwrap();
            i += 1;
        }
        q.flush().unwrap();
        let (rss, pss) = mem_kib();
        println!("memory: {mb:>4} {rss} {pss}");
    }
    q.sync().unwrap();
    let q = Arc::new(Mutex::new(q));
    let mut s = Shipper::new(q.clone(), LogFileSink::new(&mgmt), ShipperConfig::default());
    let mut sent = 0u64;
    let mut peak = (0, 0);
    loop {
        match s.ship_once().unwrap() {
            ShipOutcome::Sent { records, .. } => sent += records as u64,
            ShipOutcome::Empty => break,
            other => panic!("{other:?}"),
        }
        if sent % 100_000 < 500 {
            let m = mem_kib();
            peak = (peak.0.max(m.0), peak.1.max(m.1));
        }
    }
    println!(
        "memory while draining {sent} lines (100 MB): peak rss {} KiB, pss {} KiB",
        peak.0, peak.1
    );
    drop(s);
    drop(q);
    let _ = fs::remove_dir_all(&base);
}
