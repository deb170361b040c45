//! Streamed, resumable downloads into `cache/<name>-<version>.part`.
//!
//! - Bytes go from the socket (or a `file://` source) to the `.part` file in 64 KiB chunks and
//!   through sha256 on the way; the file is never held in memory.
//! - A sidecar `<part>.json` keeps the URL, the expected sha256 and the server's validator
//!   (ETag or Last-Modified). A later attempt, in this process or after a restart, resumes
//!   with `Range: bytes=<part length>-` and `If-Range: <validator>`; a `200` reply means the
//!   file changed or ranges are unsupported, and the download restarts from zero.
//! - Limits: the announced size (abort when exceeded), free space (statvfs) before starting
//!   and every MiB on the way (a full disk ends the download and frees its bytes: it is not a
//!   network error to retry), a per-request deadline, and a bounded number of attempts that
//!   made no progress.
//! - 4xx other than 408/429 fail at once: no retry storm against a missing file.
//! - A stop request (SIGTERM) ends a download at its next chunk, its bytes kept: the daemon's
//!   loop may be inside it (the hawkBit `.swu`), and systemd's stop timeout is short.
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::encoding::hex;
use sha2::{Digest, Sha256};

use super::{crash_point, io_err, Artifact, UpdateError, SUB};
use crate::http::HttpError;
use crate::paths::Paths;

const CHUNK: usize = 64 * 1024;
/// Bytes between two reads of the cache's free space while downloading.
const SPACE_CHECK_EVERY: u64 = 1024 * 1024;

#[derive(Debug, Clone)]
pub struct DownloadOptions {
    /// Deadline of one HTTP request, body included (minreq's timeout is per request, in
    /// whole seconds). A long download spans several requests; each resumes where the last
    /// one stopped.
    pub request_timeout: Duration,
    /// Attempts in a row that added less than `min_progress` bytes before giving up.
    pub max_attempts: u32,
    pub min_progress: u64,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// At most one progress line per interval.
    pub progress_interval: Duration,
    /// Cap when neither the app nor the server announces a size (pinned URLs).
    pub max_unannounced_size: u64,
    /// Free space to leave in the cache file system.
    pub free_space_margin: u64,
    /// A `file://` management directory: `file://` sources are read only beneath it, with
    /// no symbolic link followed in any component (`fsutil::Dir::open_beneath`). Without
    /// it, a `file://` source's last component is still never followed.
    pub file_root: Option<PathBuf>,
    /// Told `(bytes so far, total)` with each progress line (at most once per
    /// `progress_interval`): a backend's progress report (hawkBit's feedback, issue 46).
    pub on_progress: Option<ProgressHook>,
    /// The byte budget (`budget`): a download over http(s) whose remaining announced bytes
    /// do not fit waits (`UpdateError::OverBudget`) before its first request. `None`: off.
    pub budget: Option<super::budget::Gate>,
}

/// See [`DownloadOptions::on_progress`]. It runs on the download's thread, between chunks.
#[derive(Clone)]
pub struct ProgressHook(pub std::sync::Arc<dyn Fn(u64, Option<u64>) + Send + Sync>);

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions {
            request_timeout: Duration::from_secs(300),
            max_attempts: 5,
            min_progress: 64 * 1024,
            backoff_initial: Duration::from_secs(2),
            backoff_max: Duration::from_secs(60),
            progress_interval: Duration::from_secs(5),
            max_unannounced_size: 1024 * 1024 * 1024,
            free_space_margin: 16 * 1024 * 1024,
            file_root: None,
            on_progress: None,
            budget: None,
        }
    }
}

/// Validators a server gave for the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Validators {
    #[serde(default)]
    pub etag: Option<String>,
    #[serde(default)]
    pub last_modified: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Sidecar {
    url: String,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    validators: Validators,
}

/// Result of [`fetch`].
#[derive(Debug)]
pub enum Fetched {
    /// The whole file is in `part` (fsynced), with its sha256 (lowercase hex).
    Complete {
        part: PathBuf,
        sha256: String,
        validators: Validators,
    },
    /// A conditional request for a pinned URL got `304 Not Modified`.
    NotModified,
}

/// What the last download of a pinned URL left for the next conditional request.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PinState {
    pub url: String,
    /// The version it was installed as (`<announced>+<sha12>`).
    pub version: String,
    #[serde(default)]
    pub etag: Option<String>,
    #[serde(default)]
    pub last_modified: Option<String>,
}

impl PinState {
    fn path(paths: &Paths, name: &str) -> PathBuf {
        paths.state_dir().join(format!("pin-{name}.json"))
    }
    pub(crate) fn load(paths: &Paths, name: &str) -> Option<PinState> {
        let bytes = fs::read(Self::path(paths, name)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
    pub(crate) fn save(&self, paths: &Paths, name: &str) -> Result<(), UpdateError> {
        let p = Self::path(paths, name);
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| UpdateError::Record(format!("pin state: {e}")))?;
        crate::fsutil::atomic_write(&p, &bytes, 0o644)
            .map_err(io_err(format!("writing {}", p.display())))
    }
}

/// `cache/<name>-<version>.part`, or `cache/<name>-pin.part` for a pinned URL (its version
/// is known only once downloaded).
pub(crate) fn part_path(paths: &Paths, a: &Artifact) -> PathBuf {
    let v = if a.is_pin() {
        "pin"
    } else {
        a.version.as_str()
    };
    paths.cache_dir().join(format!("{}-{}.part", a.name, v))
}

pub(crate) fn sidecar_path(part: &Path) -> PathBuf {
    let mut s = part.as_os_str().to_os_string();
    s.push(".json");
    PathBuf::from(s)
}

/// Removes a failed or rejected download and its sidecar.
pub(crate) fn discard(part: &Path) {
    let _ = fs::remove_file(part);
    discard_sidecar(part);
}

pub(crate) fn discard_sidecar(part: &Path) {
    let _ = fs::remove_file(sidecar_path(part));
}

enum Origin {
    Http { url: String },
    File(PathBuf),
}

fn source_of(url: &str) -> Result<Origin, UpdateError> {
    if let Some(p) = url.strip_prefix("file://") {
        if p.starts_with('/') {
            return Ok(Origin::File(PathBuf::from(p)));
        }
    } else if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(Origin::Http {
            url: url.to_string(),
        });
    }
    Err(UpdateError::UnsupportedUrl(url.to_string()))
}

/// One download in progress.
struct Job<'a> {
    a: &'a Artifact,
    opts: &'a DownloadOptions,
    part: PathBuf,
    file: File,
    hasher: Sha256,
    offset: u64,
    /// Abort when more bytes than this arrive.
    limit: u64,
    /// Total size when known (announced, or from the server), for progress and crash points.
    total: Option<u64>,
    sidecar: Sidecar,
    last_log: Instant,
    bytes_at_last_log: u64,
    half_passed: bool,
    /// Bytes written since free space was last read.
    unchecked: u64,
}

enum Failure {
    /// Worth another attempt (network, 5xx, 408/429, timeouts); `retry_after` from the
    /// server when it said so.
    Transient(String, Option<Duration>),
    Fatal(UpdateError),
}

#[derive(Debug, PartialEq, Eq)]
enum AttemptEnd {
    Done,
    NotModified,
}

/// Downloads `a` into its `.part` file, resuming an earlier partial download when the
/// sidecar shows it is the same file. `conditional` (pinned URLs) adds If-None-Match /
/// If-Modified-Since to a fresh request.
pub(crate) fn fetch(
    paths: &Paths,
    a: &Artifact,
    opts: &DownloadOptions,
    conditional: Option<&PinState>,
) -> Result<Fetched, UpdateError> {
    fetch_into(part_path(paths, a), a, opts, conditional)
}

/// [`fetch`] into a `.part` file of the caller's choosing (svc-server's registry downloads
/// module packages with it). The size and hash are checked by the caller (see
/// [`super::verify::check_file_hash`]); this only streams, limits and resumes.
pub(crate) fn fetch_into(
    part: PathBuf,
    a: &Artifact,
    opts: &DownloadOptions,
    conditional: Option<&PinState>,
) -> Result<Fetched, UpdateError> {
    let source = source_of(&a.url)?;
    let mut job = Job::start(part, a, opts, conditional)?;
    // A part that already holds every announced byte (crash after the download) needs no
    // request; verification decides whether it is good.
    let complete = a.size.is_some_and(|s| s > 0 && s == job.offset);
    if let (Some(gate), Origin::Http { .. }, false) = (&opts.budget, &source, complete) {
        // What a resumed download still needs; a file:// source costs no network byte.
        let need = a.size.map_or(0, |s| s.saturating_sub(job.offset));
        super::budget::admit(gate, &super::budget::SystemClock, &a.name, &a.version, need)?;
    }
    if !complete && job.attempts(&source, conditional)? == AttemptEnd::NotModified {
        discard(&job.part);
        return Ok(Fetched::NotModified);
    }
    job.file
        .sync_all()
        .map_err(io_err(format!("fsync {}", job.part.display())))?;
    crash_point("download-complete");
    let sha256 = hex(&job.hasher.finalize_reset());
    crate::info!(
        SUB,
        "{} {}: downloaded {} bytes, sha256 {}",
        a.name,
        a.version,
        job.offset,
        sha256
    );
    Ok(Fetched::Complete {
        part: job.part,
        sha256,
        validators: job.sidecar.validators,
    })
}

impl<'a> Job<'a> {
    /// Opens `part` for `a`: resumed when its sidecar names the same URL and hash (its
    /// bytes hashed again), else emptied; the free space checked; the sidecar written.
    fn start(
        part: PathBuf,
        a: &'a Artifact,
        opts: &'a DownloadOptions,
        conditional: Option<&PinState>,
    ) -> Result<Job<'a>, UpdateError> {
        let cache = part.parent().map(Path::to_path_buf).unwrap_or_default();
        fs::create_dir_all(&cache).map_err(io_err(format!("creating {}", cache.display())))?;
        let want = Sidecar {
            url: a.url.clone(),
            sha256: a.sha256.clone(),
            validators: Validators::default(),
        };
        // A partial download is only trusted when its sidecar names the same URL and hash.
        let sidecar =
            crate::fsutil::read_regular(&sidecar_path(&part), crate::fsutil::STATE_FILE_LIMIT)
                .ok()
                .and_then(|b| serde_json::from_slice::<Sidecar>(&b).ok())
                .filter(|s| s.url == want.url && s.sha256 == want.sha256);
        let mut offset = match (&sidecar, fs::metadata(&part)) {
            (Some(_), Ok(m)) => m.len(),
            _ => 0,
        };
        let limit = a.size.unwrap_or(opts.max_unannounced_size);
        if offset > limit {
            // Not a prefix of the file: nothing to resume from.
            crate::warn!(
                SUB,
                "{} {}: the partial download {} holds {offset} bytes, more than the {limit} expected: discarded, downloading from the start",
                a.name,
                a.version,
                part.display()
            );
            offset = 0;
        } else if a.is_pin() && conditional.is_some() {
            // A conditional check must start from a clean slate.
            offset = 0;
        }
        if offset == 0 {
            discard(&part);
        }
        check_space(&cache, a.size.map(|s| s.saturating_sub(offset)), opts)?;

        let file = crate::fsutil::Dir::open(&cache)
            .and_then(|d| d.open_for_update(part.file_name().unwrap_or_default(), 0o644))
            .map_err(io_err(format!("opening {}", part.display())))?;
        let mut job = Job {
            a,
            opts,
            part,
            file,
            hasher: Sha256::new(),
            offset: 0,
            limit,
            total: a.size,
            sidecar: sidecar.unwrap_or(want),
            last_log: Instant::now(),
            bytes_at_last_log: 0,
            half_passed: false,
            // The first chunk reads the free space.
            unchecked: SPACE_CHECK_EVERY,
        };
        if offset > 0 {
            job.rehash_existing(offset)?;
            crate::info!(
                SUB,
                "{} {}: resuming download at byte {}",
                a.name,
                a.version,
                offset
            );
        }
        job.save_sidecar()?;
        crash_point("download-started");
        Ok(job)
    }

    /// Attempts until the download is complete (or not modified): a transient failure is
    /// retried after a backoff while attempts make progress, within the budget; a fatal
    /// one removes the download. A stop request or a spent budget keeps the bytes so far
    /// for resuming.
    fn attempts(
        &mut self,
        source: &Origin,
        conditional: Option<&PinState>,
    ) -> Result<AttemptEnd, UpdateError> {
        let (a, opts) = (self.a, self.opts);
        let mut failures = 0u32;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let before = self.offset;
            let r = match source {
                Origin::File(p) => self.attempt_file(p),
                Origin::Http { url } => self.attempt_http(url, conditional),
            };
            let (msg, retry_after) = match r {
                Ok(end) => return Ok(end),
                Err(Failure::Fatal(e)) => {
                    crate::error!(SUB, "{} {}: download failed: {e}", a.name, a.version);
                    discard(&self.part);
                    return Err(e);
                }
                Err(Failure::Transient(msg, retry_after)) => (msg, retry_after),
            };
            if crate::signals::stop_requested() {
                // Stopping (SIGTERM): the bytes so far are kept for the next start.
                crate::info!(
                    SUB,
                    "{} {}: download stopped at byte {} ({msg}); kept for resuming",
                    a.name,
                    a.version,
                    self.offset
                );
                return Err(self.kept_for_resuming(attempts, msg));
            }
            let gained = self.offset.saturating_sub(before);
            failures = if gained >= opts.min_progress {
                1
            } else {
                failures + 1
            };
            if failures >= opts.max_attempts {
                crate::error!(
                    SUB,
                    "{} {}: giving up after {attempts} attempts: {msg} ({} bytes kept for resuming)",
                    a.name,
                    a.version,
                    self.offset
                );
                return Err(self.kept_for_resuming(attempts, msg));
            }
            // Retry-After is a floor over the backoff, as for polls, within backoff_max.
            let delay = retry_after
                .unwrap_or_default()
                .max(backoff(opts, failures))
                .min(opts.backoff_max);
            crate::warn!(
                SUB,
                "{} {}: attempt {attempts} failed at byte {}: {msg}; retrying in {:.1}s",
                a.name,
                a.version,
                self.offset,
                delay.as_secs_f64()
            );
            let _wait = crate::watchdog::waiting(delay);
            std::thread::sleep(delay);
        }
    }
}

/// The agent's one backoff rule (`backoff`), counted from the download's
/// failures: random in [initial, min(max, initial·2^(failures−1))].
fn backoff(opts: &DownloadOptions, failures: u32) -> Duration {
    crate::backoff::delay(
        opts.backoff_initial,
        opts.backoff_max,
        failures.saturating_sub(1),
        crate::backoff::Jitter::from_entropy().next_unit(),
    )
}

pub(crate) fn check_space(
    dir: &Path,
    needed: Option<u64>,
    opts: &DownloadOptions,
) -> Result<(), UpdateError> {
    let Some(needed) = needed else { return Ok(()) };
    let available =
        crate::sys::free_bytes(dir).map_err(io_err(format!("statvfs {}", dir.display())))?;
    let needed = needed.saturating_add(opts.free_space_margin);
    if needed > available {
        return Err(UpdateError::NoSpace {
            needed,
            available,
            margin: opts.free_space_margin,
        });
    }
    Ok(())
}

impl Job<'_> {
    /// Ends the download with its bytes synced and kept for the next attempt to resume.
    fn kept_for_resuming(&self, attempts: u32, last: String) -> UpdateError {
        let _ = self.file.sync_all();
        UpdateError::Network {
            url: self.a.url.clone(),
            attempts,
            last,
        }
    }

    fn rehash_existing(&mut self, len: u64) -> Result<(), UpdateError> {
        let mut f =
            File::open(&self.part).map_err(io_err(format!("reading {}", self.part.display())))?;
        let mut buf = vec![0u8; CHUNK];
        let mut left = len;
        while left > 0 {
            let n = f
                .read(&mut buf[..(left.min(CHUNK as u64) as usize)])
                .map_err(io_err(format!("reading {}", self.part.display())))?;
            if n == 0 {
                break;
            }
            self.hasher.update(&buf[..n]);
            left -= n as u64;
            crate::watchdog::progress();
        }
        self.offset = len - left;
        self.file
            .set_len(self.offset)
            .map_err(io_err(format!("truncating {}", self.part.display())))?;
        Ok(())
    }

    fn restart_from_zero(&mut self) -> Result<(), Failure> {
        self.file.set_len(0).map_err(|e| {
            Failure::Fatal(io_err(format!("truncating {}", self.part.display()))(e))
        })?;
        self.offset = 0;
        self.hasher = Sha256::new();
        self.half_passed = false;
        Ok(())
    }

    fn save_sidecar(&self) -> Result<(), UpdateError> {
        let p = sidecar_path(&self.part);
        let bytes = serde_json::to_vec(&self.sidecar)
            .map_err(|e| UpdateError::Record(format!("download sidecar: {e}")))?;
        crate::fsutil::atomic_write(&p, &bytes, 0o644)
            .map_err(io_err(format!("writing {}", p.display())))
    }

    fn attempt_file(&mut self, src: &Path) -> Result<AttemptEnd, Failure> {
        let fatal = |ctx: String| move |e| Failure::Fatal(io_err(ctx)(e));
        let opened = match &self.opts.file_root {
            Some(root) => match src.strip_prefix(root) {
                Ok(rel) => crate::fsutil::Dir::open(root).and_then(|d| d.open_beneath(rel)),
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("outside the management directory {}", root.display()),
                )),
            },
            None => crate::fsutil::open_regular(src),
        };
        let mut f = opened.map_err(fatal(format!("opening {}", src.display())))?;
        let len = f
            .metadata()
            .map_err(fatal(format!("stat {}", src.display())))?
            .len();
        if self.total.is_none() {
            self.total = Some(len);
        }
        if len < self.offset {
            self.restart_from_zero()?;
        }
        f.seek(SeekFrom::Start(self.offset))
            .map_err(fatal(format!("seeking {}", src.display())))?;
        self.pump(&mut f)
            .map_err(|e| {
                if crate::signals::stop_requested() {
                    Failure::Transient(e.to_string(), None)
                } else {
                    Failure::Fatal(io_err(format!("copying {}", src.display()))(e))
                }
            })?
            .map_or(Ok(AttemptEnd::Done), |e| Err(Failure::Fatal(e)))
    }

    fn attempt_http(
        &mut self,
        url: &str,
        conditional: Option<&PinState>,
    ) -> Result<AttemptEnd, Failure> {
        let secs = self.opts.request_timeout.as_secs().max(1);
        let resuming = self.offset > 0;
        let mut headers: Vec<(&str, String)> = Vec::new();
        if resuming {
            headers.push(("Range", format!("bytes={}-", self.offset)));
            let v = &self.sidecar.validators;
            if let Some(val) = v.etag.as_ref().or(v.last_modified.as_ref()) {
                headers.push(("If-Range", val.clone()));
            } else if self.a.sha256.is_none() {
                // Without a validator or a hash nothing would catch a changed file.
                self.restart_from_zero()?;
                return self.attempt_http(url, conditional);
            }
        } else if let Some(c) = conditional {
            if let Some(e) = &c.etag {
                headers.push(("If-None-Match", e.clone()));
            }
            if let Some(lm) = &c.last_modified {
                headers.push(("If-Modified-Since", lm.clone()));
            }
        }
        let req = headers.into_iter().fold(
            crate::http::get(url, secs)
                .follow_redirects()
                .identity(self.a.identity.clone()),
            |r, (k, v)| r.header(k, v),
        );
        let mut resp = req.send().map_err(|e| match e {
            HttpError::Network(m) => Failure::Transient(m, None),
            refused => Failure::Fatal(UpdateError::UnsupportedUrl(refused.to_string())),
        })?;
        let header = |name: &str| resp.header(name).map(|v| v.trim().to_string());
        let status = resp.status();
        let content_length = header("content-length").and_then(|v| v.parse::<u64>().ok());
        let validators = Validators {
            etag: header("etag"),
            last_modified: header("last-modified"),
        };
        let retry_after = header("retry-after")
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_secs);
        match status {
            304 if conditional.is_some() && !resuming => return Ok(AttemptEnd::NotModified),
            206 if resuming => {
                let start = header("content-range").and_then(|v| parse_content_range_start(&v));
                if start != Some(self.offset) {
                    self.restart_from_zero()?;
                    return Err(Failure::Transient(
                        format!(
                            "206 for an unexpected range (start {start:?}); restarting from zero"
                        ),
                        Some(Duration::ZERO),
                    ));
                }
            }
            200 => {
                if resuming {
                    crate::info!(
                        SUB,
                        "{} {}: server sent the whole file (changed, or no ranges); restarting from zero",
                        self.a.name,
                        self.a.version
                    );
                    self.restart_from_zero()?;
                }
                self.sidecar.validators = validators;
                self.save_sidecar().map_err(Failure::Fatal)?;
                if self.total.is_none() {
                    self.total = content_length;
                    if let Some(cl) = content_length {
                        if cl > self.limit {
                            return Err(Failure::Fatal(UpdateError::TooLarge {
                                limit: self.limit,
                            }));
                        }
                        let dir = self
                            .part
                            .parent()
                            .map(Path::to_path_buf)
                            .unwrap_or_default();
                        check_space(&dir, Some(cl), self.opts).map_err(Failure::Fatal)?;
                    }
                }
            }
            416 => {
                self.restart_from_zero()?;
                return Err(Failure::Transient(
                    "416 range not satisfiable; restarting".into(),
                    None,
                ));
            }
            408 | 429 | 500..=599 => {
                return Err(Failure::Transient(
                    format!("HTTP {status} {}", resp.reason()),
                    retry_after,
                ))
            }
            _ => {
                return Err(Failure::Fatal(UpdateError::HttpStatus {
                    url: url.to_string(),
                    status,
                    reason: resp.reason().to_string(),
                }))
            }
        }
        if let Some(cl) = content_length {
            if self.offset.saturating_add(cl) > self.limit {
                return Err(Failure::Fatal(UpdateError::TooLarge { limit: self.limit }));
            }
        }
        let start = self.offset;
        match self.pump(&mut resp) {
            Err(e) => Err(Failure::Transient(format!("connection lost: {e}"), None)),
            Ok(Some(e)) => Err(Failure::Fatal(e)),
            Ok(None) => {
                let got = self.offset - start;
                match content_length {
                    Some(cl) if got < cl => Err(Failure::Transient(
                        format!("connection closed after {got} of {cl} bytes"),
                        None,
                    )),
                    _ => Ok(AttemptEnd::Done),
                }
            }
        }
    }

    /// Copies `src` to the part file until EOF. `Err` is a read error (the network: worth
    /// another attempt); `Ok(Some(e))` ends the download for good: a limit, a full disk or
    /// another write error (retrying would only fill the disk again).
    fn pump(&mut self, src: &mut dyn Read) -> std::io::Result<Option<UpdateError>> {
        let mut buf = vec![0u8; CHUNK];
        self.file.seek(SeekFrom::Start(self.offset))?;
        loop {
            if crate::signals::stop_requested() {
                // A stop is not held up by a long download (the daemon's loop may be in it).
                return Err(std::io::Error::other("the process is stopping"));
            }
            let n = match src.read(&mut buf) {
                Ok(0) => return Ok(None),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if self.offset + n as u64 > self.limit {
                return Ok(Some(UpdateError::TooLarge { limit: self.limit }));
            }
            if let Some(e) = self.space_check(n as u64) {
                return Ok(Some(e));
            }
            if let Err(e) = self.file.write_all(&buf[..n]) {
                return Ok(Some(self.write_error(e)));
            }
            self.hasher.update(&buf[..n]);
            self.offset += n as u64;
            self.progress();
        }
    }

    /// Re-reads the free space every [`SPACE_CHECK_EVERY`] bytes: a download stops while
    /// `free_space_margin` is still free (another writer took the room, or nobody announced
    /// the size), so that the answer cache, status and log queue can still be written. It
    /// asks for the margin and the bytes up to the next check, or to the announced end when
    /// that is nearer: the check before the download admitted the bytes still to come, and
    /// asking for a whole MiB more than that stopped an admitted download in its last MiB,
    /// at the same byte on every later attempt (the power-cut campaign, run 2627, cut 699).
    fn space_check(&mut self, n: u64) -> Option<UpdateError> {
        self.unchecked += n;
        if self.unchecked < SPACE_CHECK_EVERY {
            return None;
        }
        self.unchecked = 0;
        let to_come = self
            .total
            .map_or(SPACE_CHECK_EVERY, |t| t.saturating_sub(self.offset))
            .min(SPACE_CHECK_EVERY);
        let needed = self.opts.free_space_margin + to_come;
        match crate::sys::free_bytes(self.part.parent().unwrap_or(Path::new("/"))) {
            Ok(available) if available < needed => Some(UpdateError::NoSpace {
                needed,
                available,
                margin: self.opts.free_space_margin,
            }),
            Ok(_) => None,
            Err(e) => Some(io_err(format!("statvfs {}", self.part.display()))(e)),
        }
    }

    fn write_error(&self, e: std::io::Error) -> UpdateError {
        if e.raw_os_error() == Some(libc::ENOSPC) {
            let dir = self.part.parent().unwrap_or(Path::new("/"));
            UpdateError::NoSpace {
                needed: self.opts.free_space_margin,
                available: crate::sys::free_bytes(dir).unwrap_or(0),
                margin: self.opts.free_space_margin,
            }
        } else {
            io_err(format!("writing {}", self.part.display()))(e)
        }
    }

    fn progress(&mut self) {
        crate::watchdog::progress();
        if let Some(total) = self.total {
            if !self.half_passed && total > 0 && self.offset * 2 >= total {
                self.half_passed = true;
                crash_point("download-half");
            }
        }
        let elapsed = self.last_log.elapsed();
        if elapsed < self.opts.progress_interval {
            return;
        }
        let rate = (self.offset.saturating_sub(self.bytes_at_last_log)) as f64
            / elapsed.as_secs_f64().max(1e-3);
        let pct = match self.total {
            Some(t) if t > 0 => format!("{:.0}%", self.offset as f64 * 100.0 / t as f64),
            _ => "?%".into(),
        };
        crate::info!(
            SUB,
            "{} {}: {pct} ({:.1} of {} MiB) at {:.1} MiB/s",
            self.a.name,
            self.a.version,
            self.offset as f64 / 1048576.0,
            self.total
                .map(|t| format!("{:.1}", t as f64 / 1048576.0))
                .unwrap_or_else(|| "?".into()),
            rate / 1048576.0
        );
        self.last_log = Instant::now();
        self.bytes_at_last_log = self.offset;
        if let Some(hook) = &self.opts.on_progress {
            (hook.0)(self.offset, self.total);
        }
    }
}

/// `bytes 100-199/200` → 100.
fn parse_content_range_start(v: &str) -> Option<u64> {
    let rest = v.trim().strip_prefix("bytes")?.trim_start();
    rest.split('-').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range() {
        assert_eq!(parse_content_range_start("bytes 100-199/200"), Some(100));
        assert_eq!(parse_content_range_start("bytes */200"), None);
    }

    #[test]
    fn urls() {
        assert!(matches!(source_of("file:///a/b"), Ok(Origin::File(_))));
        assert!(matches!(source_of("http://h/x"), Ok(Origin::Http { .. })));
        assert!(source_of("ftp://h/x").is_err());
        assert!(source_of("file://relative").is_err());
        assert!(source_of("/plain/path").is_err());
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let o = DownloadOptions {
            backoff_initial: Duration::from_secs(2),
            backoff_max: Duration::from_secs(10),
            ..Default::default()
        };
        for _ in 0..50 {
            assert_eq!(backoff(&o, 1), Duration::from_secs(2));
            let d = backoff(&o, 3);
            assert!(
                d >= Duration::from_secs(2) && d <= Duration::from_secs(8),
                "{d:?}"
            );
            assert!(backoff(&o, 30) <= Duration::from_secs(10));
        }
    }

    #[test]
    fn too_little_free_space_is_refused_with_the_figures() {
        let dir = std::env::temp_dir();
        let opts = DownloadOptions {
            free_space_margin: 1024,
            ..Default::default()
        };
        assert!(check_space(&dir, None, &opts).is_ok(), "no size announced");
        assert!(check_space(&dir, Some(0), &opts).is_ok());
        let err = check_space(&dir, Some(u64::MAX / 2), &opts).unwrap_err();
        let text = err.to_string();
        let UpdateError::NoSpace {
            needed,
            available,
            margin,
        } = err
        else {
            panic!("not a NoSpace error: {err:?}");
        };
        assert_eq!((needed, margin), (u64::MAX / 2 + 1024, 1024));
        assert!(available < needed);
        assert!(text.contains(&needed.to_string()), "{text}");
    }
}
