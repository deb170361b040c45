//! Streamed downloads to a `.part` file: hashed while written, never held in memory,
//! resumed with an HTTP Range request after a dropped connection or a restart, bounded by
//! the announced size, after a free-space check; a bad or failed file is removed.
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub enum DownloadError {
    /// Worth another try later (network, 5xx).
    Transient(String),
    /// The artifact is wrong (size, sha256, 4xx): retrying the same cannot help.
    Bad(String),
}

impl fmt::Display for DownloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DownloadError::Transient(e) | DownloadError::Bad(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for DownloadError {}

/// What was downloaded.
pub struct Got {
    pub size: u64,
    pub sha256: String,
}

/// Attempts per download (each resumes where the last stopped).
const ATTEMPTS: u32 = 4;

fn hex(b: &[u8]) -> String {
    crate::protocol::file::hex(b)
}

/// Downloads `url` into `part`, then checks size and sha256 (when given). On any failure
/// that cannot be resumed the part file is removed.
pub fn fetch(
    url: &str,
    part: &Path,
    size: Option<u64>,
    sha256: Option<&str>,
) -> Result<Got, DownloadError> {
    let dir = part.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| DownloadError::Transient(format!("creating {}: {e}", dir.display())))?;
    if let (Some(size), Some(free)) = (size, crate::fsutil::free_bytes(dir)) {
        // Room for the file and a margin, so the device never fills up.
        if free < size + 16 * 1024 * 1024 {
            return Err(DownloadError::Transient(format!(
                "not enough free space in {}: {free} bytes free, {size} needed plus a 16 MiB margin",
                dir.display()
            )));
        }
    }
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        match fetch_once(url, part, size) {
            Ok(()) => {
                last = None;
                break;
            }
            Err(DownloadError::Bad(e)) => {
                let _ = std::fs::remove_file(part);
                return Err(DownloadError::Bad(e));
            }
            Err(e) => {
                crate::warn!(
                    "update",
                    "download of {url} interrupted ({e}); resuming (attempt {})",
                    attempt + 2
                );
                last = Some(e);
                std::thread::sleep(Duration::from_secs(1 << attempt.min(4)));
            }
        }
    }
    if let Some(e) = last {
        return Err(e); // the part file stays: the next try resumes it
    }
    let (got_size, got_sha) =
        hash_file(part).map_err(|e| DownloadError::Transient(e.to_string()))?;
    let fail = |why: String| {
        let _ = std::fs::remove_file(part);
        Err(DownloadError::Bad(why))
    };
    if let Some(s) = size {
        if got_size != s {
            return fail(format!(
                "{url}: got {got_size} bytes, the app announced {s}"
            ));
        }
    }
    if let Some(want) = sha256 {
        if !want.eq_ignore_ascii_case(&got_sha) {
            return fail(format!(
                "{url}: sha256 {got_sha} does not match the announced {want}"
            ));
        }
    }
    Ok(Got {
        size: got_size,
        sha256: got_sha,
    })
}

fn hash_file(p: &Path) -> std::io::Result<(u64, String)> {
    let mut f = std::fs::File::open(p)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n_total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        n_total += n as u64;
    }
    Ok((n_total, hex(&h.finalize())))
}

/// One attempt: appends to `part` from where it ends.
fn fetch_once(url: &str, part: &Path, size: Option<u64>) -> Result<(), DownloadError> {
    let have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
    if size.is_some_and(|s| have >= s) {
        return Ok(());
    }
    let (mut body, restart): (Box<dyn Read>, bool) = if let Some(path) = url.strip_prefix("file://")
    {
        let mut f =
            std::fs::File::open(path).map_err(|e| DownloadError::Bad(format!("{url}: {e}")))?;
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(have))
            .map_err(|e| DownloadError::Transient(e.to_string()))?;
        (Box::new(f), false)
    } else if url.starts_with("https://") || url.starts_with("http://") {
        // The timeout bounds the whole transfer: generous, at 50 kB/s for the announced size.
        let secs = 300 + size.unwrap_or(0) / 50_000;
        let mut req = minreq::get(url).with_timeout(secs);
        if have > 0 {
            req = req.with_header("Range", format!("bytes={have}-"));
        }
        let resp = req
            .send_lazy()
            .map_err(|e| DownloadError::Transient(format!("{url}: {e}")))?;
        match resp.status_code {
            206 => (Box::new(resp), false),
            200 => (Box::new(resp), have > 0),
            404 | 410 => {
                return Err(DownloadError::Bad(format!(
                    "{url}: HTTP {} (not found)",
                    resp.status_code
                )))
            }
            408 | 429 | 500..=599 => {
                return Err(DownloadError::Transient(format!(
                    "{url}: HTTP {}",
                    resp.status_code
                )))
            }
            code => return Err(DownloadError::Bad(format!("{url}: HTTP {code}"))),
        }
    } else {
        return Err(DownloadError::Bad(format!(
            "{url}: unsupported URL (https://, http:// or file://)"
        )));
    };
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(!restart)
        .truncate(restart)
        .open(part)
        .map_err(|e| DownloadError::Transient(format!("{}: {e}", part.display())))?;
    let mut written = if restart { 0 } else { have };
    let mut buf = vec![0u8; 64 * 1024];
    let (started, mut last_report) = (Instant::now(), Instant::now());
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                let _ = out.sync_data();
                return Err(DownloadError::Transient(format!("{url}: {e}")));
            }
        };
        written += n as u64;
        if let Some(s) = size {
            if written > s {
                return Err(DownloadError::Bad(format!(
                    "{url}: more than the announced {s} bytes"
                )));
            }
        }
        out.write_all(&buf[..n])
            .map_err(|e| DownloadError::Transient(format!("{}: {e}", part.display())))?;
        if last_report.elapsed() >= Duration::from_secs(5) {
            let rate = (written - have) as f64 / started.elapsed().as_secs_f64().max(0.001) / 1e6;
            let pct = size
                .map(|s| format!("{:.0}%", 100.0 * written as f64 / s.max(1) as f64))
                .unwrap_or_else(|| format!("{written} bytes"));
            crate::info!("update", "downloading {url}: {pct} at {rate:.1} MB/s");
            last_report = Instant::now();
        }
    }
    out.sync_all()
        .map_err(|e| DownloadError::Transient(e.to_string()))?;
    if size.is_some_and(|s| written < s) {
        return Err(DownloadError::Transient(format!(
            "{url}: connection ended at {written} bytes"
        )));
    }
    Ok(())
}
