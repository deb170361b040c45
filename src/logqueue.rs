//! Persistent, byte-capped, crash-safe queue of log records waiting to be shipped.
//!
//! Layout of the queue directory (`/opt/svc/logqueue/` on a device):
//! - `seg-<first id, 20 digits>.log`: append-only segments of framed records. Fully
//!   acknowledged segments are deleted whole, which is what makes acks cheap.
//! - `state.json`: ack cursor, id floor and per-level drop counts, written with
//!   [`fsutil::atomic_write`].
//!
//! Segments are append-only logs, the one kind of file not written through `atomic_write`:
//! rewriting a file per line would cost an fsync per line; instead the framing makes a torn
//! append detectable. Segments rewritten by eviction do go through temp + `durable_rename`.
//!
//! Frame: `len: u32 LE | crc32(payload): u32 LE | payload`, payload =
//! `id: u64 | ts_ms: u64 | level: u8 | subsystem len: u8 | subsystem | message`.
//! On open every segment is scanned; the first frame that is short, oversized, fails its CRC
//! or does not carry a larger id than the one before it ends the segment, and the file is
//! truncated there. A record torn by a power cut is therefore dropped, and nothing before it.
//!
//! Durability window (see `docs/logs.md`): appends go through a userspace buffer that reaches
//! the kernel when it fills, every `flush_interval`, on any error-level record, and on
//! [`LogQueue::flush`]; the kernel's copy is fsynced every `sync_interval` and on
//! [`LogQueue::sync`]. A killed process loses at most the buffered records; a power cut at most
//! the last `sync_interval` of records.
//!
//! Memory does not grow with the queue: records are streamed from disk; only one small summary
//! per segment (sizes and counts per level) is held.
use crate::fsutil;
use crate::logging::Level;
use std::collections::VecDeque;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Frame header: length and checksum.
const HEADER: usize = 8;
/// Fixed part of the payload: id, timestamp, level, subsystem length.
const FIXED: usize = 18;
/// Longer messages are cut (on a char boundary) so that one line cannot fill the queue.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024;
const MAX_PAYLOAD: usize = FIXED + 255 + MAX_MESSAGE_BYTES;
const STATE_FILE: &str = "state.json";

/// Drop order when the queue is full: index 0 goes first.
const DROP_ORDER: [Level; 4] = [Level::Debug, Level::Info, Level::Warn, Level::Error];

fn rank(level: Level) -> usize {
    match level {
        Level::Debug => 0,
        Level::Info => 1,
        Level::Warn => 2,
        Level::Error => 3,
    }
}

fn level_from_u8(b: u8) -> Option<Level> {
    match b {
        3 => Some(Level::Error),
        4 => Some(Level::Warn),
        6 => Some(Level::Info),
        7 => Some(Level::Debug),
        _ => None,
    }
}

/// Tuning of a [`LogQueue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// Upper bound of the segment bytes on disk. Default 16 MiB (an SD card's worth).
    pub cap_bytes: u64,
    /// A segment is sealed and a new one started past this size.
    pub segment_bytes: u64,
    /// Userspace buffer size.
    pub buffer_bytes: usize,
    /// Longest time a record stays in the userspace buffer (checked on append and maintain).
    pub flush_interval: Duration,
    /// Longest time written records stay un-fsynced (checked on append and maintain).
    pub sync_interval: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig::with_cap(16 * 1024 * 1024)
    }
}

impl QueueConfig {
    /// Defaults with the given cap; segments are a sixteenth of it (4 KiB to 4 MiB), so that
    /// eviction and ack deletion work in small steps.
    pub fn with_cap(cap_bytes: u64) -> Self {
        QueueConfig {
            cap_bytes,
            segment_bytes: (cap_bytes / 16).clamp(4096, 4 * 1024 * 1024),
            buffer_bytes: 64 * 1024,
            flush_interval: Duration::from_millis(200),
            sync_interval: Duration::from_secs(1),
        }
    }
}

/// One record read back from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedRecord {
    /// Unique, increasing across restarts; the receiver drops duplicates by it.
    pub id: u64,
    /// Milliseconds since the Unix epoch when the record was queued.
    pub ts_ms: u64,
    pub level: Level,
    pub subsystem: String,
    pub message: String,
}

impl QueuedRecord {
    /// The record's object in a log batch (`docs/logs.md`).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "ts": crate::logging::format_timestamp_ms(self.ts_ms),
            "level": self.level.as_str(),
            "subsystem": self.subsystem,
            "message": self.message,
        })
    }

    /// Rough size of the record in a JSON batch, used to bound batches in bytes.
    pub(crate) fn approx_json_bytes(&self) -> usize {
        96 + self.subsystem.len() + self.message.len()
    }
}

/// Records dropped because the queue was full, per level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts {
    pub debug: u64,
    pub info: u64,
    pub warn: u64,
    pub error: u64,
}

impl DropCounts {
    fn get_mut(&mut self, level: Level) -> &mut u64 {
        match level {
            Level::Debug => &mut self.debug,
            Level::Info => &mut self.info,
            Level::Warn => &mut self.warn,
            Level::Error => &mut self.error,
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.debug + self.info + self.warn + self.error
    }

    /// `dropped 3 debug, 5 info lines while offline (log queue full)`.
    pub fn report(&self) -> String {
        let parts: Vec<String> = [
            (self.debug, "debug"),
            (self.info, "info"),
            (self.warn, "warn"),
            (self.error, "error"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, name)| format!("{n} {name}"))
        .collect();
        format!(
            "dropped {} lines while offline (log queue full)",
            parts.join(", ")
        )
    }
}

/// What went wrong in the queue.
#[derive(Debug)]
pub enum QueueError {
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::Io { op, path, source } => {
                write!(f, "log queue: {op} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for QueueError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QueueError::Io { source, .. } => Some(source),
        }
    }
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> QueueError + 'a {
    move |source| QueueError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Summary of one segment file; the only per-segment state kept in memory.
#[derive(Debug, Clone)]
struct Segment {
    name_id: u64,
    path: PathBuf,
    /// Id of the first record (0 when empty).
    first_id: u64,
    /// Id of the last record (0 when empty).
    last_id: u64,
    bytes: u64,
    level_bytes: [u64; 4],
}

impl Segment {
    fn new(dir: &Path, name_id: u64) -> Segment {
        Segment {
            name_id,
            path: dir.join(format!("seg-{name_id:020}.log")),
            first_id: 0,
            last_id: 0,
            bytes: 0,
            level_bytes: [0; 4],
        }
    }
}

/// Where the next unacknowledged record starts, to avoid rescanning a segment per batch.
#[derive(Debug, Clone, Copy)]
struct ReadHint {
    generation: u64,
    segment: u64,
    offset: u64,
    next_id: u64,
}

/// The persistent queue. Not thread-safe by itself: share it as `Arc<Mutex<LogQueue>>`.
pub struct LogQueue {
    dir: PathBuf,
    cfg: QueueConfig,
    segments: VecDeque<Segment>,
    /// Writer of the last segment, if it is open for appending.
    writer: Option<BufWriter<File>>,
    next_id: u64,
    acked: u64,
    dropped: DropCounts,
    total_bytes: u64,
    last_flush: Instant,
    last_sync: Instant,
    /// Bytes have reached the kernel since the last fsync.
    unsynced: bool,
    /// Bytes sit in the userspace buffer.
    unflushed: bool,
    /// Bumped whenever a segment is rewritten, invalidating read hints.
    generation: u64,
    hint: Option<ReadHint>,
    scratch: Vec<u8>,
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct StateFile {
    acked: u64,
    next_id: u64,
    #[serde(default)]
    dropped: DroppedState,
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct DroppedState {
    debug: u64,
    info: u64,
    warn: u64,
    error: u64,
}

enum Next {
    Frame { id: u64, level: Level, len: usize },
    End,
    Bad,
}

/// Reads bytes until `buf` is full or EOF; returns how many were read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads one raw frame (header + payload) into `buf`.
fn read_frame<R: Read>(r: &mut R, buf: &mut Vec<u8>, prev_id: u64) -> io::Result<Next> {
    let mut header = [0u8; HEADER];
    match read_full(r, &mut header)? {
        0 => return Ok(Next::End),
        HEADER => {}
        _ => return Ok(Next::Bad),
    }
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if !(FIXED..=MAX_PAYLOAD).contains(&len) {
        return Ok(Next::Bad);
    }
    buf.clear();
    buf.extend_from_slice(&header);
    buf.resize(HEADER + len, 0);
    if read_full(r, &mut buf[HEADER..])? != len {
        return Ok(Next::Bad);
    }
    let payload = &buf[HEADER..];
    if crc32(payload) != crc {
        return Ok(Next::Bad);
    }
    let id = u64::from_le_bytes(payload[0..8].try_into().unwrap_or([0; 8]));
    let Some(level) = level_from_u8(payload[16]) else {
        return Ok(Next::Bad);
    };
    if id <= prev_id || FIXED + payload[17] as usize > len {
        return Ok(Next::Bad);
    }
    Ok(Next::Frame {
        id,
        level,
        len: HEADER + len,
    })
}

/// Decodes a frame read by [`read_frame`].
fn decode(frame: &[u8]) -> Option<QueuedRecord> {
    let p = frame.get(HEADER..)?;
    let id = u64::from_le_bytes(p.get(0..8)?.try_into().ok()?);
    let ts_ms = u64::from_le_bytes(p.get(8..16)?.try_into().ok()?);
    let level = level_from_u8(*p.get(16)?)?;
    let sub_len = *p.get(17)? as usize;
    let subsystem = std::str::from_utf8(p.get(FIXED..FIXED + sub_len)?).ok()?;
    let message = std::str::from_utf8(p.get(FIXED + sub_len..)?).ok()?;
    Some(QueuedRecord {
        id,
        ts_ms,
        level,
        subsystem: subsystem.to_string(),
        message: message.to_string(),
    })
}

fn truncate_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Appends one encoded frame to `out`; returns its length.
fn encode(
    out: &mut Vec<u8>,
    id: u64,
    ts_ms: u64,
    level: Level,
    subsystem: &str,
    message: &str,
) -> usize {
    let sub = truncate_str(subsystem, 255);
    let msg = truncate_str(message, MAX_MESSAGE_BYTES);
    let len = FIXED + sub.len() + msg.len();
    let start = out.len();
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&ts_ms.to_le_bytes());
    out.push(level as u8);
    out.push(sub.len() as u8);
    out.extend_from_slice(sub.as_bytes());
    out.extend_from_slice(msg.as_bytes());
    let crc = crc32(&out[start + HEADER..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    HEADER + len
}

impl LogQueue {
    /// Opens (creating if needed) the queue in `dir`, recovering from any torn tail.
    pub fn open(dir: impl Into<PathBuf>, cfg: QueueConfig) -> Result<LogQueue, QueueError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(io_err("create", &dir))?;
        // Scrubbed, but still operational detail: root only.
        fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(io_err("chmod", &dir))?;
        let state = read_state(&dir);
        let mut names = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io_err("list", &dir))? {
            let entry = entry.map_err(io_err("list", &dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.contains(".tmp.") {
                // Left by a compaction or state write interrupted by a crash.
                let _ = fs::remove_file(entry.path());
            } else if let Some(id) = name
                .strip_prefix("seg-")
                .and_then(|r| r.strip_suffix(".log"))
                .and_then(|r| r.parse::<u64>().ok())
            {
                names.push(id);
            }
        }
        names.sort_unstable();
        let mut q = LogQueue {
            cfg,
            segments: VecDeque::new(),
            writer: None,
            next_id: state.next_id.max(state.acked + 1).max(1),
            acked: state.acked,
            dropped: DropCounts {
                debug: state.dropped.debug,
                info: state.dropped.info,
                warn: state.dropped.warn,
                error: state.dropped.error,
            },
            total_bytes: 0,
            last_flush: Instant::now(),
            last_sync: Instant::now(),
            unsynced: false,
            unflushed: false,
            generation: 0,
            hint: None,
            scratch: Vec::with_capacity(4096),
            dir,
        };
        let mut prev_id = 0;
        for name_id in names {
            let seg = q.scan_segment(name_id, prev_id)?;
            if seg.last_id == 0 || seg.last_id <= q.acked {
                let _ = fs::remove_file(&seg.path);
                continue;
            }
            prev_id = seg.last_id;
            q.next_id = q.next_id.max(seg.last_id + 1);
            q.total_bytes += seg.bytes;
            q.segments.push_back(seg);
        }
        Ok(q)
    }

    /// Scans a segment, truncating it at the first bad frame.
    fn scan_segment(&mut self, name_id: u64, prev_id: u64) -> Result<Segment, QueueError> {
        let mut seg = Segment::new(&self.dir, name_id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&seg.path)
            .map_err(io_err("open", &seg.path))?;
        let file_len = file.metadata().map_err(io_err("stat", &seg.path))?.len();
        let mut r = BufReader::with_capacity(64 * 1024, &file);
        let mut last = prev_id;
        // Stops at the end or at the first bad frame.
        while let Next::Frame { id, level, len } =
            read_frame(&mut r, &mut self.scratch, last).map_err(io_err("read", &seg.path))?
        {
            last = id;
            if seg.first_id == 0 {
                seg.first_id = id;
            }
            seg.last_id = id;
            seg.bytes += len as u64;
            seg.level_bytes[rank(level)] += len as u64;
        }
        if seg.bytes != file_len {
            // A torn or corrupt tail: keep everything before it, make the cut durable.
            file.set_len(seg.bytes)
                .map_err(io_err("truncate", &seg.path))?;
            file.sync_all().map_err(io_err("fsync", &seg.path))?;
        }
        Ok(seg)
    }

    /// Every record with an id up to this one has been delivered.
    pub fn acked_id(&self) -> u64 {
        self.acked
    }

    /// Bytes of segment data on disk (what the cap bounds).
    pub fn bytes_on_disk(&self) -> u64 {
        self.total_bytes
    }

    /// Drops not yet reported.
    pub fn dropped(&self) -> DropCounts {
        self.dropped
    }

    /// True when no record awaits shipping.
    pub fn is_empty(&self) -> bool {
        self.acked + 1 >= self.next_id
    }

    /// Appends a record stamped with the current time; returns its id.
    pub fn append(
        &mut self,
        level: Level,
        subsystem: &str,
        message: &str,
    ) -> Result<u64, QueueError> {
        self.append_at(crate::logging::now_ms(), level, subsystem, message)
    }

    /// Appends a record with an explicit timestamp; returns its id.
    pub(crate) fn append_at(
        &mut self,
        ts_ms: u64,
        level: Level,
        subsystem: &str,
        message: &str,
    ) -> Result<u64, QueueError> {
        let needs_new = match self.segments.back() {
            None => true,
            Some(s) => self.writer.is_none() || s.bytes >= self.cfg.segment_bytes,
        };
        if needs_new {
            self.start_segment()?;
        }
        let id = self.next_id;
        self.scratch.clear();
        let len = encode(&mut self.scratch, id, ts_ms, level, subsystem, message) as u64;
        let (Some(w), Some(seg)) = (self.writer.as_mut(), self.segments.back_mut()) else {
            return Err(QueueError::Io {
                op: "append",
                path: self.dir.clone(),
                source: io::Error::other("no open segment"),
            });
        };
        if let Err(e) = w.write_all(&self.scratch) {
            // Part of a frame may have reached the file. Never append after it: the scan on
            // open would stop there and hide later records. Start a new segment next time.
            let err = io_err("write", &seg.path)(e);
            self.abandon_writer();
            return Err(err);
        }
        self.next_id += 1;
        if seg.first_id == 0 {
            seg.first_id = id;
        }
        seg.last_id = id;
        seg.bytes += len;
        seg.level_bytes[rank(level)] += len;
        self.total_bytes += len;
        self.unflushed = true;
        if self.total_bytes > self.cfg.cap_bytes {
            // Evict down to a low-water mark so eviction runs once per ~1/16 of the cap.
            let target = self.cfg.cap_bytes - self.cfg.cap_bytes / 16;
            self.evict(self.total_bytes - target)?;
        }
        if level == Level::Error {
            // Errors are what one needs after a crash: hand them to the kernel now.
            self.flush()?;
        }
        self.maintain()?;
        Ok(id)
    }

    /// Seals the current segment (flush + fsync) and starts a new one.
    fn start_segment(&mut self) -> Result<(), QueueError> {
        if self.writer.is_some() {
            self.sync_writer()?;
            self.writer = None;
        }
        // An empty segment of this name (left by a failed first write) is reused, not doubled.
        if self
            .segments
            .back()
            .is_some_and(|s| s.name_id == self.next_id)
        {
            self.segments.pop_back();
        }
        let seg = Segment::new(&self.dir, self.next_id);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&seg.path)
            .map_err(io_err("create", &seg.path))?;
        // Make the new name durable, so that records synced into it are not orphaned.
        fsutil::fsync_dir(&self.dir).map_err(io_err("fsync", &self.dir))?;
        self.writer = Some(BufWriter::with_capacity(self.cfg.buffer_bytes, file));
        self.segments.push_back(seg);
        Ok(())
    }

    /// Hands buffered records to the kernel (they then survive a killed process).
    pub fn flush(&mut self) -> Result<(), QueueError> {
        if let Some(w) = self.writer.as_mut() {
            if self.unflushed {
                if let Err(e) = w.flush() {
                    let err = io_err("write", &self.dir)(e);
                    self.abandon_writer();
                    return Err(err);
                }
                self.unflushed = false;
                self.unsynced = true;
            }
        }
        self.last_flush = Instant::now();
        Ok(())
    }

    /// After a failed write (disk full, I/O error) the open segment may end in a partial
    /// frame: stop appending to it. What was buffered is lost; the summary may overstate the
    /// file, which readers handle as an early end.
    fn abandon_writer(&mut self) {
        if let Some(w) = self.writer.take() {
            // Dropping a BufWriter retries the flush; discard the buffer instead.
            let (_file, _buffered) = w.into_parts();
        }
        self.unflushed = false;
        self.unsynced = false;
        self.generation += 1;
        self.hint = None;
    }

    fn sync_writer(&mut self) -> Result<(), QueueError> {
        self.flush()?;
        if let Some(w) = self.writer.as_mut() {
            if self.unsynced {
                w.get_ref()
                    .sync_data()
                    .map_err(io_err("fsync", &self.dir))?;
            }
        }
        self.unsynced = false;
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Makes every appended record durable (survives a power cut), and the drop counts.
    pub fn sync(&mut self) -> Result<(), QueueError> {
        self.sync_writer()?;
        self.write_state()
    }

    /// Applies the time-based flush/fsync policy; call it periodically when appends are idle.
    pub(crate) fn maintain(&mut self) -> Result<(), QueueError> {
        if self.unflushed && self.last_flush.elapsed() >= self.cfg.flush_interval {
            self.flush()?;
        }
        if self.unsynced && self.last_sync.elapsed() >= self.cfg.sync_interval {
            self.sync_writer()?;
        }
        Ok(())
    }

    fn write_state(&self) -> Result<(), QueueError> {
        let state = StateFile {
            acked: self.acked,
            next_id: self.next_id,
            dropped: DroppedState {
                debug: self.dropped.debug,
                info: self.dropped.info,
                warn: self.dropped.warn,
                error: self.dropped.error,
            },
        };
        let path = self.dir.join(STATE_FILE);
        let bytes = serde_json::to_vec(&state).map_err(|e| QueueError::Io {
            op: "encode",
            path: path.clone(),
            source: io::Error::other(e),
        })?;
        fsutil::atomic_write(&path, &bytes, 0o600).map_err(io_err("write", &path))
    }

    /// Frees at least `need` bytes: lowest level first, oldest first within a level.
    /// Records already acknowledged go first of all, and are not counted as dropped.
    fn evict(&mut self, need: u64) -> Result<(), QueueError> {
        // The open segment may be rewritten: push its buffer out and reopen it later.
        self.sync_writer()?;
        self.writer = None;
        let mut freed = 0u64;
        'levels: for level in DROP_ORDER {
            let mut i = 0;
            while i < self.segments.len() {
                if freed >= need {
                    break 'levels;
                }
                let seg = &self.segments[i];
                let has_acked = seg.first_id != 0 && seg.first_id <= self.acked;
                if seg.level_bytes[rank(level)] > 0 || has_acked {
                    freed += self.rewrite_segment(i, level, need - freed.min(need))?;
                    if self.segments[i].bytes == 0 {
                        let _ = fs::remove_file(&self.segments[i].path);
                        self.segments.remove(i);
                        continue;
                    }
                }
                i += 1;
            }
        }
        self.generation += 1;
        self.hint = None;
        // Drop counts must survive a restart to be reported.
        self.write_state()
    }

    /// Rewrites segment `i` without acknowledged records and without up to `need` bytes of
    /// `level` records (oldest first). Returns the bytes freed.
    fn rewrite_segment(&mut self, i: usize, level: Level, need: u64) -> Result<u64, QueueError> {
        let seg = self.segments[i].clone();
        let src = File::open(&seg.path).map_err(io_err("open", &seg.path))?;
        let mut r = BufReader::with_capacity(64 * 1024, src);
        let (out, tmp) = fsutil::create_temp(&seg.path, 0o600)
            .map_err(io_err("create a temp for", &seg.path))?;
        let mut w = BufWriter::with_capacity(64 * 1024, out);
        let mut kept = Segment::new(&self.dir, seg.name_id);
        let mut freed = 0u64;
        let mut prev = 0;
        let mut buf = std::mem::take(&mut self.scratch);
        let result = (|| {
            while let Next::Frame { id, level: l, len } =
                read_frame(&mut r, &mut buf, prev).map_err(io_err("read", &seg.path))?
            {
                prev = id;
                let drop_acked = id <= self.acked;
                let drop_level = l == level && freed < need;
                if drop_acked || drop_level {
                    freed += len as u64;
                    if !drop_acked {
                        *self.dropped.get_mut(l) += 1;
                    }
                    continue;
                }
                w.write_all(&buf).map_err(io_err("write", &tmp))?;
                if kept.first_id == 0 {
                    kept.first_id = id;
                }
                kept.last_id = id;
                kept.bytes += len as u64;
                kept.level_bytes[rank(l)] += len as u64;
            }
            let f = w.into_inner().map_err(|e| QueueError::Io {
                op: "write",
                path: tmp.clone(),
                source: e.into_error(),
            })?;
            f.sync_all().map_err(io_err("fsync", &tmp))?;
            fsutil::durable_rename(&tmp, &seg.path).map_err(io_err("rename", &seg.path))
        })();
        self.scratch = buf;
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        // Keep the segment's recorded last id when its tail was dropped: ids stay monotonic.
        if kept.last_id == 0 {
            kept.last_id = seg.last_id;
        }
        self.total_bytes -= seg.bytes - kept.bytes;
        self.segments[i] = kept;
        Ok(freed)
    }

    /// Reads up to `max_records` records (and about `max_bytes` of JSON) from the first
    /// unacknowledged one, in id order. Reading does not consume: see [`LogQueue::ack`].
    pub fn read_batch(
        &mut self,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<QueuedRecord>, QueueError> {
        // The open segment's tail may still sit in the buffer.
        self.flush()?;
        let start = self.acked + 1;
        let mut out = Vec::new();
        let mut bytes = 0usize;
        let (mut idx, mut offset) = match self.hint {
            Some(h) if h.generation == self.generation && h.next_id == start => {
                match self.segments.iter().position(|s| s.name_id == h.segment) {
                    Some(i) => (i, h.offset),
                    None => (self.first_segment_with(start), 0),
                }
            }
            _ => (self.first_segment_with(start), 0),
        };
        let mut buf = std::mem::take(&mut self.scratch);
        let result = (|| {
            while idx < self.segments.len() {
                let seg = &self.segments[idx];
                let mut f = File::open(&seg.path).map_err(io_err("open", &seg.path))?;
                f.seek(SeekFrom::Start(offset))
                    .map_err(io_err("seek", &seg.path))?;
                let limit = seg.bytes.saturating_sub(offset);
                let mut r = BufReader::with_capacity(64 * 1024, f.take(limit));
                let mut prev = 0;
                while out.len() < max_records && bytes < max_bytes {
                    match read_frame(&mut r, &mut buf, prev).map_err(io_err("read", &seg.path))? {
                        Next::Frame { id, len, .. } => {
                            prev = id;
                            offset += len as u64;
                            if id < start {
                                continue;
                            }
                            if let Some(rec) = decode(&buf) {
                                bytes += rec.approx_json_bytes();
                                out.push(rec);
                            }
                        }
                        Next::End | Next::Bad => break,
                    }
                }
                // Stay on the last segment: more records may land in it before the next read.
                if out.len() >= max_records || bytes >= max_bytes || idx + 1 >= self.segments.len()
                {
                    break;
                }
                idx += 1;
                offset = 0;
            }
            Ok(())
        })();
        self.scratch = buf;
        result?;
        if let (Some(last), Some(seg)) = (out.last(), self.segments.get(idx)) {
            self.hint = Some(ReadHint {
                generation: self.generation,
                segment: seg.name_id,
                offset,
                next_id: last.id + 1,
            });
        }
        Ok(out)
    }

    fn first_segment_with(&self, id: u64) -> usize {
        self.segments
            .iter()
            .position(|s| s.last_id >= id)
            .unwrap_or(self.segments.len())
    }

    /// Marks every record up to `through_id` delivered: persists the cursor atomically, then
    /// deletes the segments it fully covers (the open one stays until sealed).
    pub fn ack(&mut self, through_id: u64) -> Result<(), QueueError> {
        let through = through_id.min(self.next_id.saturating_sub(1));
        if through <= self.acked {
            return Ok(());
        }
        self.acked = through;
        self.write_state()?;
        let open = self.writer.is_some();
        while self.segments.len() > usize::from(open) {
            match self.segments.front() {
                Some(s) if s.last_id <= self.acked => {
                    let _ = fs::remove_file(&s.path);
                    self.total_bytes -= s.bytes;
                    self.segments.pop_front();
                }
                _ => break,
            }
        }
        Ok(())
    }

    /// When records were dropped, appends one warn record saying how many per level and
    /// resets the counts; returns its id. The shipper calls this before each batch.
    pub(crate) fn take_drop_report(&mut self) -> Result<Option<u64>, QueueError> {
        if self.dropped.total() == 0 {
            return Ok(None);
        }
        let text = self.dropped.report();
        self.dropped = DropCounts::default();
        let id = self.append(Level::Warn, "logqueue", &text)?;
        // The report must be on disk before the counts it replaces are forgotten.
        self.sync()?;
        Ok(Some(id))
    }
}

impl Drop for LogQueue {
    fn drop(&mut self) {
        let _ = self.sync();
    }
}

fn read_state(dir: &Path) -> StateFile {
    // Written atomically, so it is either whole or absent. An unreadable one (tampering, a
    // format from the future) restarts the cursor at 0: duplicates, which the receiver
    // drops by id, are better than losing records.
    fs::read(dir.join(STATE_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static CRC_TABLE: [u32; 256] = crc_table();

/// CRC-32 (IEEE 802.3), as used by zip and gzip.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn frames_round_trip_and_reject_damage() {
        let mut buf = Vec::new();
        let len = encode(&mut buf, 7, 1234, Level::Warn, "agent", "héllo");
        assert_eq!(len, buf.len());
        let mut scratch = Vec::new();
        let Next::Frame { id, level, .. } = read_frame(&mut &buf[..], &mut scratch, 0).unwrap()
        else {
            panic!("frame not read")
        };
        assert_eq!((id, level), (7, Level::Warn));
        let rec = decode(&scratch).unwrap();
        assert_eq!(rec.message, "héllo");
        assert_eq!(rec.subsystem, "agent");
        // An id not above the previous one is a bad frame.
        assert!(matches!(
            read_frame(&mut &buf[..], &mut scratch, 7).unwrap(),
            Next::Bad
        ));
        // A flipped payload bit fails the CRC; a short frame is torn.
        let mut bad = buf.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(
            read_frame(&mut &bad[..], &mut scratch, 0).unwrap(),
            Next::Bad
        ));
        assert!(matches!(
            read_frame(&mut &buf[..buf.len() - 1], &mut scratch, 0).unwrap(),
            Next::Bad
        ));
    }

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let mut buf = Vec::new();
        encode(&mut buf, 1, 0, Level::Info, "x", &long);
        let rec = decode(&buf).unwrap();
        assert!(rec.message.len() <= MAX_MESSAGE_BYTES);
        assert!(rec.message.chars().all(|c| c == 'é'));
    }

    #[test]
    fn drop_report_text() {
        let d = DropCounts {
            debug: 3,
            info: 5,
            warn: 0,
            error: 0,
        };
        assert_eq!(
            d.report(),
            "dropped 3 debug, 5 info lines while offline (log queue full)"
        );
    }
}
