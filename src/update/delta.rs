//! Binary deltas (docs/updates.md, *Deltas*): the new version of a binary made from the one
//! that runs and a small patch, instead of downloaded whole.
//!
//! The format, `svc-delta-v1`: the 8 bytes `SVCDLT01`, the new file's size (u64, little
//! endian), then a zlib stream of a bsdiff patch as the `bsdiff` crate writes it (records of
//! three u64 LE: `mix` bytes added to the old file's bytes, `copy` bytes taken as they are,
//! then a signed `seek` in the old file; each followed by its `mix + copy` bytes).
//! `svc-delta-v2`: `SVCDLT02`, the size, then the same bsdiff patch as an LZMA stream with
//! its 13-byte `.lzma` header (properties byte, dictionary size u32 LE, the patch's size u64
//! LE): a quarter to two fifths smaller than zlib on our binaries (BENCHMARKS.md, "Binary
//! deltas").
//! The header is the sender's: a dictionary above [`MAX_DICT`] or more than 4 literal
//! context and position bits are refused before anything is allocated.
//!
//! Applying is streamed: the old file in memory (the running binary, a few MiB), the patch
//! read 64 KiB at a time through a 32 KiB inflate window (v2: an LZMA dictionary of at most
//! [`MAX_DICT`], and never more than the patch's declared size), the result written as it is made
//! and never longer than the size announced for the full artifact. A delta adds no trust:
//! its result goes through the same checks (size, sha256, signature, ELF, version) as a
//! full download.
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use miniz_oxide::inflate::stream::{inflate, InflateState};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};
use sha2::{Digest, Sha256};

use super::download::{self, DownloadOptions, Fetched};
use super::{io_err, Artifact, UpdateError, SUB};
use crate::paths::Paths;
use crate::protocol::Delta;
use std::path::PathBuf;

/// The first bytes of an `svc-delta-v1` delta.
pub const MAGIC: &[u8; 8] = b"SVCDLT01";
/// The first bytes of an `svc-delta-v2` delta (an LZMA header follows the size).
pub const MAGIC_V2: &[u8; 8] = b"SVCDLT02";
/// The largest LZMA dictionary a v2 delta may ask for: 8 MiB, twice a 4 MiB binary's patch
/// (a larger window finds nothing more in it); svc-release never writes more.
pub const MAX_DICT: u32 = 8 << 20;
/// The most literal context plus position bits a v2 delta may ask for (LZMA2's own rule):
/// the decoder's probability tables grow with 2^(lc+lp), 24 KiB at 4, 6 MiB at 12.
const MAX_LC_LP: u8 = 4;

/// A delta's format, as an offer names it (`deltas[].format`, absent: v1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `svc-delta-v1`: bsdiff + zlib, what every agent with delta support applies.
    V1,
    /// `svc-delta-v2`: bsdiff + LZMA, smaller; agents before it skip it by its name.
    V2,
}

impl Format {
    /// The name in an offer; `None` for v1, which older agents know without one.
    pub fn offer_name(self) -> Option<&'static str> {
        match self {
            Format::V1 => None,
            Format::V2 => Some("svc-delta-v2"),
        }
    }

    /// The format an offer names, `None` when this agent does not know it.
    pub fn from_offer(name: Option<&str>) -> Option<Format> {
        match name {
            None | Some("svc-delta-v1") => Some(Format::V1),
            Some("svc-delta-v2") => Some(Format::V2),
            Some(_) => None,
        }
    }

    /// The formats svc-release makes, v1 first (the one every agent reads); a later one is
    /// published only when it is smaller.
    pub const ALL: &'static [Format] = &[Format::V1, Format::V2];
}

/// Why a delta was not used. The delta's own bytes (format, corruption, truncation, a
/// record reaching outside the files), the offer's description of it, the running binary it
/// needs, the vendor's rule, or our I/O. Callers decide on the variant
/// ([`DeltaError::is_refusal`]); the text is for the log and the status.
#[derive(Debug)]
pub enum DeltaError {
    /// Shorter than the 16-byte header.
    NoHeader,
    /// Neither `SVCDLT01` nor `SVCDLT02`.
    NotThisFormat,
    /// An `SVCDLT02` delta whose LZMA header asks for a dictionary above [`MAX_DICT`].
    DictionaryTooLarge {
        asked: u32,
    },
    /// An `SVCDLT02` delta whose LZMA properties byte is invalid or asks for more than
    /// [`MAX_LC_LP`] literal bits.
    LzmaProperties(u8),
    /// The header's size is not the target's.
    SizeDiffers {
        announced: u64,
        target: u64,
    },
    /// The compressed stream ends early (a truncated download).
    StreamEndsEarly,
    /// The compressed stream is corrupted (miniz_oxide's word for how).
    Corrupted(String),
    /// Bytes after the end of the compressed stream.
    TrailingBytes,
    /// A record would write past the target's size.
    TooLong {
        limit: u64,
    },
    /// A record would read past the end of the running binary.
    ReadsPastOld,
    /// A record would seek outside the running binary.
    SeeksOutside,
    /// The stream ends inside a record.
    EndsInRecord,
    /// The whole made another size than the target's.
    MadeOtherSize {
        made: u64,
        target: u64,
    },
    /// The offer's sha256 of the delta is not 64 hex digits.
    BadSha256(String),
    /// The delta announces as many bytes as the full artifact or more.
    NotSmaller {
        from: String,
        size: u64,
        full: u64,
    },
    /// Its server answered 304 to an unconditional request.
    NotModified,
    /// The target names no size and sha256 to check a result against.
    TargetUnhashed,
    /// Nothing of that name runs to apply a delta to.
    NothingRuns {
        name: String,
    },
    /// No delta offered is from the running binary.
    NoneFromRunning {
        offered: usize,
        name: String,
        running: String,
    },
    /// The deltas from the running binary are all in formats this agent does not know.
    UnknownFormats {
        name: String,
        formats: Vec<String>,
    },
    /// No delta could be used and the vendor's rule (`delta_fallback`) forbids the full
    /// download; `miss` is what happened to the deltas.
    NoFallback {
        miss: Box<Miss>,
    },
    Io(String, io::Error),
}

impl std::fmt::Display for DeltaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use DeltaError::*;
        match self {
            NoHeader => f.write_str("shorter than its 16-byte header"),
            NotThisFormat => {
                f.write_str("not an svc-delta-v1 or -v2 file (magic SVCDLT01, SVCDLT02)")
            }
            DictionaryTooLarge { asked } => write!(
                f,
                "its LZMA header asks for a dictionary of {asked} bytes, more than the {MAX_DICT} allowed"
            ),
            LzmaProperties(b) => write!(
                f,
                "its LZMA properties byte {b} is invalid or asks for more than {MAX_LC_LP} literal bits"
            ),
            SizeDiffers { announced, target } => write!(
                f,
                "it makes a file of {announced} bytes, the target has {target}"
            ),
            StreamEndsEarly => f.write_str("truncated: its compressed stream ends early"),
            Corrupted(how) => write!(f, "corrupted compressed stream ({how})"),
            TrailingBytes => f.write_str("bytes after the end of its compressed stream"),
            TooLong { limit } => write!(f, "it makes more than the target's {limit} bytes"),
            ReadsPastOld => f.write_str("it reads past the end of the running binary"),
            SeeksOutside => f.write_str("it seeks outside the running binary"),
            EndsInRecord => f.write_str("truncated: it ends inside a record"),
            MadeOtherSize { made, target } => {
                write!(f, "it makes {made} bytes, the target has {target}")
            }
            BadSha256(s) => write!(f, "delta sha256 {s:?} is not 64 hex digits"),
            NotSmaller { from, size, full } => write!(
                f,
                "the delta from {from} announces {size} bytes, not less than the full artifact's {full}"
            ),
            NotModified => f.write_str("the delta's server answered 304 to an unconditional request"),
            TargetUnhashed => f.write_str(
                "the target names no size and sha256 to check a delta's result against",
            ),
            NothingRuns { name } => write!(f, "no {name} runs yet to apply a delta to"),
            NoneFromRunning {
                offered,
                name,
                running,
            } => write!(
                f,
                "none of the {offered} deltas offered is from the running {name} (sha256 {running})"
            ),
            UnknownFormats { name, formats } => write!(
                f,
                "the deltas from the running {name} are in formats this agent does not read: {}",
                formats.join(", ")
            ),
            NoFallback { miss } => write!(
                f,
                "no usable delta and the vendor's rule forbids the full download: {miss}"
            ),
            Io(c, e) => write!(f, "{c}: {e}"),
        }
    }
}

impl std::error::Error for DeltaError {}

impl DeltaError {
    /// A refusal of the delta (its bytes, its description) or of the offer by the rule,
    /// which trying again cannot change; not an I/O fault.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, DeltaError::Io(..))
    }
}

/// Makes a delta from `old` to `new` in `format` (svc-release; never on a device).
pub fn make(old: &[u8], new: &[u8], format: Format) -> io::Result<Vec<u8>> {
    let mut all = make_each(old, new, &[format])?;
    Ok(all.pop().map(|(_, d)| d).unwrap_or_default())
}

/// Makes a delta from `old` to `new` in each of `formats`, the bsdiff (the slow part) once.
pub fn make_each(old: &[u8], new: &[u8], formats: &[Format]) -> io::Result<Vec<(Format, Vec<u8>)>> {
    let mut patch = Vec::new();
    bsdiff::diff(old, new, &mut patch)?;
    formats
        .iter()
        .map(|&format| {
            let (magic, body) = match format {
                Format::V1 => (
                    MAGIC,
                    miniz_oxide::deflate::compress_to_vec_zlib(&patch, 10),
                ),
                Format::V2 => (MAGIC_V2, lzma_pack(&patch)?),
            };
            let mut out = Vec::with_capacity(16 + body.len());
            out.extend_from_slice(magic);
            out.extend_from_slice(&(new.len() as u64).to_le_bytes());
            out.extend_from_slice(&body);
            Ok((format, out))
        })
        .collect()
}

/// The patch as an LZMA stream with its `.lzma` header: about xz -9e's settings (a 273-byte
/// nice length, a binary-tree match finder), a dictionary as large as the patch (at
/// most [`MAX_DICT`]), and lc=1 lp=2 pb=2, which fit machine code's 4-byte words and made
/// our aarch64 patches about 2 % smaller than xz's defaults (lc=3 lp=0).
fn lzma_pack(patch: &[u8]) -> io::Result<Vec<u8>> {
    use lzma_rust2::{LzmaOptions, LzmaWriter};
    // Above 16 MiB of patch (four binaries of the 4 MiB goal; the tests' debug builds) xz
    // -9e's search would keep the vendor's host for minutes: xz -1's fast one instead.
    let big = patch.len() > 16 << 20;
    let mut o = LzmaOptions::with_preset(if big { 1 } else { 9 });
    o.dict_size = u32::try_from(patch.len())
        .unwrap_or(MAX_DICT)
        .clamp(4096, MAX_DICT);
    (o.lc, o.lp, o.pb) = (1, 2, 2);
    if !big {
        o.nice_len = LzmaOptions::NICE_LEN_MAX;
    }
    let mut w = LzmaWriter::new_use_header(Vec::new(), &o, Some(patch.len() as u64))?;
    w.write_all(patch)?;
    w.finish()
}

/// What [`apply`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub size: u64,
    pub sha256: String,
}

/// Applies the delta read from `patch` to `old`, writing the result to `out`; the result
/// must be exactly `size` bytes (the full artifact's announced size). Memory: `old`, a
/// 64 KiB input buffer, a 64 KiB output buffer and the inflate state (about 40 KiB); for
/// `svc-delta-v2`, in place of the inflate state, the LZMA dictionary (at most [`MAX_DICT`]
/// and the patch's declared size) and its 24 KiB of probabilities.
pub fn apply(
    old: &[u8],
    patch: &mut dyn Read,
    out: &mut dyn Write,
    size: u64,
) -> Result<Applied, DeltaError> {
    let mut header = [0u8; 16];
    patch
        .read_exact(&mut header)
        .map_err(|_| DeltaError::NoHeader)?;
    let v2 = match &header[..8] {
        m if m == MAGIC => false,
        m if m == MAGIC_V2 => true,
        _ => return Err(DeltaError::NotThisFormat),
    };
    let announced = u64::from_le_bytes(header[8..16].try_into().unwrap_or([0; 8]));
    if announced != size {
        return Err(DeltaError::SizeDiffers {
            announced,
            target: size,
        });
    }
    let mut sink = Patcher {
        old,
        out,
        hasher: Sha256::new(),
        written: 0,
        limit: size,
        oldpos: 0,
        ctrl: [0; 24],
        have: 0,
        mix_left: 0,
        copy_left: 0,
        seek: 0,
    };
    if v2 {
        lzma_unpack(patch, &mut sink)?;
        return sink.finish();
    }
    let mut state = InflateState::new_boxed(DataFormat::Zlib);
    let mut inbuf = vec![0u8; 64 * 1024];
    let mut outbuf = vec![0u8; 64 * 1024];
    let (mut start, mut end, mut eof) = (0usize, 0usize, false);
    loop {
        if start == end && !eof {
            end = patch
                .read(&mut inbuf)
                .map_err(|e| DeltaError::Io("reading the delta".into(), e))?;
            start = 0;
            eof = end == 0;
        }
        let flush = if eof { MZFlush::Finish } else { MZFlush::None };
        let r = inflate(&mut state, &inbuf[start..end], &mut outbuf, flush);
        start += r.bytes_consumed;
        sink.push(&outbuf[..r.bytes_written])?;
        match r.status {
            Ok(MZStatus::StreamEnd) => break,
            Ok(_) => {}
            Err(MZError::Buf) if eof && r.bytes_written == 0 => {
                return Err(DeltaError::StreamEndsEarly)
            }
            Err(MZError::Buf) => {}
            Err(e) => return Err(DeltaError::Corrupted(format!("{e:?}"))),
        }
    }
    if start < end || (!eof && patch.read(&mut inbuf[..1]).map_or(true, |n| n > 0)) {
        return Err(DeltaError::TrailingBytes);
    }
    sink.finish()
}

/// Decodes a v2 delta's LZMA stream into `sink`, 64 KiB at a time, after checking what its
/// header asks the device to allocate.
fn lzma_unpack(patch: &mut dyn Read, sink: &mut Patcher) -> Result<(), DeltaError> {
    let mut h = [0u8; 13];
    patch.read_exact(&mut h).map_err(|_| DeltaError::NoHeader)?;
    let props = h[0];
    let (lc, lp) = (props % 9, props / 9 % 5);
    if props >= 9 * 5 * 5 || lc + lp > MAX_LC_LP {
        return Err(DeltaError::LzmaProperties(props));
    }
    let dict = u32::from_le_bytes([h[1], h[2], h[3], h[4]]);
    if dict > MAX_DICT {
        return Err(DeltaError::DictionaryTooLarge { asked: dict });
    }
    let raw = u64::from_le_bytes(h[5..13].try_into().unwrap_or([0xff; 8]));
    // The dictionary it allocates is the smaller of `dict` and `raw`.
    let mut r = lzma_rust2::LzmaReader::new_with_props(&mut *patch, raw, props, dict, None)
        .map_err(lzma_error)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = r.read(&mut buf).map_err(lzma_error)?;
        if n == 0 {
            break;
        }
        sink.push(&buf[..n])?;
    }
    // The decoder reads ahead: what it holds past the stream's end counts as trailing too.
    let (rest, unused) = r.into_parts();
    if !unused.is_empty() || rest.read(&mut [0u8; 1]).map_or(true, |n| n > 0) {
        return Err(DeltaError::TrailingBytes);
    }
    Ok(())
}

fn lzma_error(e: io::Error) -> DeltaError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        DeltaError::StreamEndsEarly
    } else {
        DeltaError::Corrupted(format!("LZMA: {e}"))
    }
}

/// The bsdiff records, pushed a slice at a time as they inflate.
struct Patcher<'a> {
    old: &'a [u8],
    out: &'a mut dyn Write,
    hasher: Sha256,
    written: u64,
    limit: u64,
    oldpos: u64,
    ctrl: [u8; 24],
    /// Bytes of `ctrl` read so far.
    have: usize,
    mix_left: u64,
    copy_left: u64,
    seek: i64,
}

impl Patcher<'_> {
    fn push(&mut self, mut data: &[u8]) -> Result<(), DeltaError> {
        let mut buf = [0u8; 4096];
        while !data.is_empty() {
            if self.mix_left == 0 && self.copy_left == 0 {
                let n = (24 - self.have).min(data.len());
                self.ctrl[self.have..self.have + n].copy_from_slice(&data[..n]);
                self.have += n;
                data = &data[n..];
                if self.have == 24 {
                    self.have = 0;
                    self.record()?;
                }
                continue;
            }
            if self.mix_left > 0 {
                let n = (self.mix_left.min(data.len() as u64) as usize).min(buf.len());
                let from = self.oldpos as usize;
                for (i, b) in buf[..n].iter_mut().enumerate() {
                    *b = data[i].wrapping_add(self.old[from + i]);
                }
                self.oldpos += n as u64;
                self.mix_left -= n as u64;
                data = &data[n..];
                self.emit(&buf[..n])?;
            } else {
                let n = self.copy_left.min(data.len() as u64) as usize;
                self.emit(&data[..n])?;
                self.copy_left -= n as u64;
                data = &data[n..];
            }
            if self.mix_left == 0 && self.copy_left == 0 {
                self.seek_old()?;
            }
        }
        Ok(())
    }

    /// A record's header: its lengths checked against the old file and the announced size
    /// before any of its bytes are taken.
    fn record(&mut self) -> Result<(), DeltaError> {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&self.ctrl[i * 8..i * 8 + 8]);
            w
        };
        let mix = u64::from_le_bytes(word(0));
        let copy = u64::from_le_bytes(word(1));
        // bsdiff's sign-and-magnitude offset.
        let raw = u64::from_le_bytes(word(2));
        let magnitude = (raw & !(1 << 63)) as i64;
        self.seek = if raw >> 63 == 1 {
            -magnitude
        } else {
            magnitude
        };
        let total = mix
            .checked_add(copy)
            .and_then(|t| t.checked_add(self.written))
            .filter(|t| *t <= self.limit);
        if total.is_none() {
            return Err(DeltaError::TooLong { limit: self.limit });
        }
        if self
            .oldpos
            .checked_add(mix)
            .is_none_or(|e| e > self.old.len() as u64)
        {
            return Err(DeltaError::ReadsPastOld);
        }
        self.mix_left = mix;
        self.copy_left = copy;
        if mix == 0 && copy == 0 {
            self.seek_old()?;
        }
        Ok(())
    }

    fn seek_old(&mut self) -> Result<(), DeltaError> {
        let pos = i128::from(self.oldpos) + i128::from(self.seek);
        if pos < 0 || pos > self.old.len() as i128 {
            return Err(DeltaError::SeeksOutside);
        }
        self.oldpos = pos as u64;
        self.seek = 0;
        Ok(())
    }

    fn emit(&mut self, bytes: &[u8]) -> Result<(), DeltaError> {
        let before = self.written;
        self.written += bytes.len() as u64;
        // The power-cut campaign's cut in the middle of an apply (test builds only).
        if before * 2 < self.limit && self.written * 2 >= self.limit {
            super::crash_point("delta-applying");
        }
        self.hasher.update(bytes);
        self.out
            .write_all(bytes)
            .map_err(|e| DeltaError::Io("writing the result".into(), e))
    }

    fn finish(self) -> Result<Applied, DeltaError> {
        if self.have != 0 || self.mix_left != 0 || self.copy_left != 0 {
            return Err(DeltaError::EndsInRecord);
        }
        if self.written != self.limit {
            return Err(DeltaError::MadeOtherSize {
                made: self.written,
                target: self.limit,
            });
        }
        Ok(Applied {
            size: self.written,
            sha256: crate::encoding::hex(&self.hasher.finalize()),
        })
    }
}

/// [`apply`] from file to file (the `apply-delta` command, benches/delta.sh). The old file is
/// read whole: at most `max_old` bytes. OUT is written as the agent writes every file: a
/// fresh temp file beside it (0644: not executable until its hash is checked), renamed over
/// OUT once whole, so a link planted at OUT is replaced, never written through, and a
/// refused delta leaves OUT as it was.
pub fn apply_files(
    old: &Path,
    patch: &Path,
    out: &Path,
    max_old: u64,
) -> Result<Applied, DeltaError> {
    let old_bytes = super::verify::read_bounded(old, max_old)
        .map_err(|e| DeltaError::Io(format!("reading {}", old.display()), e))?;
    let mut p =
        File::open(patch).map_err(|e| DeltaError::Io(format!("opening {}", patch.display()), e))?;
    let mut header = [0u8; 16];
    p.read_exact(&mut header)
        .map_err(|_| DeltaError::NoHeader)?;
    let size = u64::from_le_bytes(header[8..16].try_into().unwrap_or([0; 8]));
    let (f, tmp) = crate::fsutil::create_temp(out, 0o644)
        .map_err(|e| DeltaError::Io(format!("creating a temp file beside {}", out.display()), e))?;
    let written = (|| {
        let mut o = io::BufWriter::new(f);
        let mut whole = io::Cursor::new(header).chain(p);
        let applied = apply(&old_bytes, &mut whole, &mut o, size)?;
        let io_err = |e| DeltaError::Io(format!("writing {}", out.display()), e);
        o.into_inner()
            .map_err(|e| io_err(e.into_error()))?
            .sync_all()
            .map_err(io_err)?;
        crate::fsutil::durable_rename(&tmp, out).map_err(io_err)?;
        Ok(applied)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Most bytes of the running binary read to apply a delta to it.
const MAX_OLD: u64 = 256 * 1024 * 1024;

/// Why the engine did not obtain a target by delta.
#[derive(Debug)]
pub enum Miss {
    /// No delta fits (none from the running binary, no size or hash to check against).
    Unusable(DeltaError),
    /// The delta was tried and failed: a refusal (its bytes) or a fault (network, disk).
    Failed(UpdateError),
}

impl std::fmt::Display for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Miss::Unusable(e) => write!(f, "{e}"),
            Miss::Failed(e) => write!(f, "the delta failed: {e}"),
        }
    }
}

/// Obtains `a` by one of `deltas` (URLs already resolved and allowed): the one whose `from`
/// is the running binary's sha256, downloaded (resumable, into `cache/<name>-<version>.delta.part`)
/// and applied into `a`'s own `.part`. Returns that part and its sha256, which is `a`'s:
/// the caller verifies it exactly as a full download. Disk: the delta plus the result; the
/// delta's file is removed once applied.
pub(crate) fn obtain(
    paths: &Paths,
    a: &Artifact,
    deltas: &[Delta],
    opts: &DownloadOptions,
) -> Result<(PathBuf, String), Miss> {
    let (Some(size), Some(want)) = (a.size, a.sha256.as_deref()) else {
        return Err(Miss::Unusable(DeltaError::TargetUnhashed));
    };
    let running = paths.bin_dir().join(&a.name);
    let old = match super::verify::read_bounded(&running, MAX_OLD) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Miss::Unusable(DeltaError::NothingRuns {
                name: a.name.clone(),
            }))
        }
        Err(e) => {
            return Err(Miss::Failed(io_err(format!(
                "reading {}",
                running.display()
            ))(e)))
        }
    };
    let running_sha = crate::encoding::hex(&Sha256::digest(&old));
    let from_running: Vec<&Delta> = deltas
        .iter()
        .filter(|d| d.from.eq_ignore_ascii_case(&running_sha))
        .collect();
    if from_running.is_empty() {
        return Err(Miss::Unusable(DeltaError::NoneFromRunning {
            offered: deltas.len(),
            name: a.name.clone(),
            running: running_sha,
        }));
    }
    // Of the formats this agent reads, the smallest: a format it does not know is never
    // downloaded (an offer may name one for newer agents beside an older one).
    let Some(d) = from_running
        .iter()
        .filter(|d| Format::from_offer(d.format.as_deref()).is_some())
        .min_by_key(|d| d.size)
    else {
        return Err(Miss::Unusable(DeltaError::UnknownFormats {
            name: a.name.clone(),
            formats: from_running
                .iter()
                .map(|d| d.format.clone().unwrap_or_default())
                .collect(),
        }));
    };
    let refuse = |e: DeltaError| Miss::Failed(UpdateError::Delta(e));
    if !crate::encoding::is_sha256_hex(&d.sha256) {
        return Err(refuse(DeltaError::BadSha256(d.sha256.clone())));
    }
    if d.size >= size {
        // Never more on the wire than the full artifact: a "delta" that large is refused
        // before a byte of it is fetched.
        return Err(refuse(DeltaError::NotSmaller {
            from: running_sha,
            size: d.size,
            full: size,
        }));
    }
    let delta_part = paths
        .cache_dir()
        .join(format!("{}-{}.delta.part", a.name, a.version));
    let delta_art = Artifact {
        url: d.url.clone(),
        sha256: Some(d.sha256.to_ascii_lowercase()),
        size: Some(d.size),
        signature: None,
        ..a.clone()
    };
    let fetched =
        download::fetch_into(delta_part.clone(), &delta_art, opts, None).map_err(Miss::Failed)?;
    let Fetched::Complete { part, sha256, .. } = fetched else {
        download::discard(&delta_part);
        return Err(refuse(DeltaError::NotModified));
    };
    if !sha256.eq_ignore_ascii_case(&d.sha256) {
        download::discard(&part);
        return Err(Miss::Failed(UpdateError::ShaMismatch {
            expected: d.sha256.clone(),
            actual: sha256,
        }));
    }
    let out_path = download::part_path(paths, a);
    download::discard(&out_path);
    download::check_space(&paths.cache_dir(), Some(size), opts).map_err(Miss::Failed)?;
    let applied = apply_into(&old, &part, &out_path, size);
    download::discard(&part);
    let applied = match applied {
        Ok(x) => x,
        Err(e) => {
            download::discard(&out_path);
            return Err(Miss::Failed(e));
        }
    };
    if !applied.sha256.eq_ignore_ascii_case(want) {
        download::discard(&out_path);
        return Err(Miss::Failed(UpdateError::ShaMismatch {
            expected: want.to_string(),
            actual: applied.sha256,
        }));
    }
    crate::info!(
        SUB,
        "{} {}: made from the running binary by a delta of {} bytes ({} full)",
        a.name,
        a.version,
        d.size,
        size
    );
    Ok((out_path, applied.sha256))
}

/// [`apply`] from the delta's file into a new file at `out` (no link followed), synced.
fn apply_into(old: &[u8], delta: &Path, out: &Path, size: u64) -> Result<Applied, UpdateError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut input = io::BufReader::new(
        File::open(delta).map_err(io_err(format!("opening {}", delta.display())))?,
    );
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(out)
        .map_err(io_err(format!("creating {}", out.display())))?;
    let mut w = io::BufWriter::with_capacity(64 * 1024, file);
    let applied = apply(old, &mut input, &mut w, size).map_err(|e| match e {
        DeltaError::Io(c, err) => UpdateError::Io { context: c, err },
        refused => UpdateError::Delta(refused),
    })?;
    let file = w
        .into_inner()
        .map_err(|e| io_err(format!("writing {}", out.display()))(e.into_error()))?;
    file.sync_all()
        .map_err(io_err(format!("fsync {}", out.display())))?;
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[seed as usize % 4])
            .collect()
    }

    fn run(old: &[u8], d: &[u8], size: u64) -> Result<(Vec<u8>, Applied), DeltaError> {
        let mut out = Vec::new();
        let a = apply(old, &mut &d[..], &mut out, size)?;
        Ok((out, a))
    }

    #[test]
    fn round_trip_and_small() {
        let old = sample(200_000, 1);
        let mut new = old.clone();
        new[1000..1010].copy_from_slice(b"0123456789");
        new.splice(5000..5000, b"inserted".iter().copied());
        let d = make(&old, &new, Format::V1).unwrap();
        assert!(d.len() < 2000, "{}", d.len());
        let (out, a) = run(&old, &d, new.len() as u64).unwrap();
        assert_eq!(out, new);
        assert_eq!(a.size, new.len() as u64);
    }

    /// A stand-in for aarch64 code of `n` words: calls (BL) to word 10 and page loads
    /// (ADRP) of page 0x100 between other words, with `gap` words of other code put in at
    /// word 100 (as a linker lays out code that grew: everything after it moves, the
    /// targets before it stay).
    fn code(n: u32, seed: u32, gap: u32) -> Vec<u8> {
        let word = |j: u32| {
            let p = if j < 100 { j } else { j + gap };
            match j % 4 {
                0 => 0x9400_0000 | 10u32.wrapping_sub(p) & 0x03ff_ffff,
                1 => {
                    let imm = 0x100u32.wrapping_sub((p * 4) >> 12) & 0x1f_ffff;
                    0x9000_0000 | (imm & 3) << 29 | (imm >> 2) << 5 | 3
                }
                2 => j.wrapping_mul(2654435761) ^ seed,
                _ => 0xd503_201f, // nop
            }
        };
        let filler = (0..gap).map(|k| k.wrapping_mul(40503) ^ seed);
        (0..100)
            .map(word)
            .chain(filler)
            .chain((100..n).map(word))
            .flat_map(u32::to_le_bytes)
            .collect()
    }

    #[test]
    fn v2_round_trips_and_is_smaller_than_v1() {
        let old = code(50_000, 7, 0);
        // Code inserted near the start: every call and page load after it moves.
        let new = code(50_000, 7, 64);
        let both = make_each(&old, &new, Format::ALL).unwrap();
        let (v1, v2) = (&both[0].1, &both[1].1);
        assert_eq!((both[0].0, both[1].0), (Format::V1, Format::V2));
        assert_eq!(&v2[..8], MAGIC_V2);
        let (out, a) = run(&old, v2, new.len() as u64).unwrap();
        assert_eq!(out, new);
        assert_eq!(a.sha256, crate::encoding::hex(&Sha256::digest(&new)));
        assert_eq!(run(&old, v1, new.len() as u64).unwrap().0, new);
        assert!(v2.len() < v1.len(), "v2 {} v1 {}", v2.len(), v1.len());
    }

    /// A v2 delta with its LZMA header's properties byte, dictionary and patch size set.
    fn v2_with_header(props: u8, dict: u32, raw: u64) -> Vec<u8> {
        let old = code(1000, 1, 0);
        let mut d = make(&old, &old, Format::V2).unwrap();
        d[16] = props;
        d[17..21].copy_from_slice(&dict.to_le_bytes());
        d[21..29].copy_from_slice(&raw.to_le_bytes());
        d
    }

    #[test]
    fn v2_asking_for_a_huge_dictionary_or_literal_tables_is_refused() {
        let old = code(1000, 1, 0);
        let n = old.len() as u64;
        // 4 GiB of dictionary for a patch it says is 1 TiB: refused from the header.
        let e = run(&old, &v2_with_header(93, 0xffff_fff0, 1 << 40), n).unwrap_err();
        assert!(
            matches!(e, DeltaError::DictionaryTooLarge { asked: 0xffff_fff0 }),
            "{e}"
        );
        assert!(
            e.to_string().contains("more than the 8388608 allowed"),
            "{e}"
        );
        // One byte over the cap, and the cap itself (then the stream decides).
        let e = run(&old, &v2_with_header(93, MAX_DICT + 1, 1 << 40), n).unwrap_err();
        assert!(matches!(e, DeltaError::DictionaryTooLarge { .. }), "{e}");
        // lc=8 lp=4: probability tables of 6 MiB; and a byte no LZMA stream has.
        for props in [8 + 9 * 4, 225, 255] {
            let e = run(&old, &v2_with_header(props, 4096, 4096), n).unwrap_err();
            assert!(
                matches!(e, DeltaError::LzmaProperties(p) if p == props),
                "{e}"
            );
            assert!(e.to_string().contains("literal bits"), "{e}");
        }
        // The header cut short.
        let d = v2_with_header(93, 4096, 4096);
        for cut in 16..29 {
            let e = run(&old, &d[..cut], n).unwrap_err();
            assert!(matches!(e, DeltaError::NoHeader), "cut at {cut}: {e}");
        }
    }

    #[test]
    fn formats_by_offer_name() {
        assert_eq!(Format::from_offer(None), Some(Format::V1));
        assert_eq!(Format::from_offer(Some("svc-delta-v1")), Some(Format::V1));
        assert_eq!(Format::from_offer(Some("svc-delta-v2")), Some(Format::V2));
        assert_eq!(Format::from_offer(Some("svc-delta-v9")), None);
        assert_eq!(Format::V2.offer_name(), Some("svc-delta-v2"));
        assert_eq!(Format::ALL[0], Format::V1);
    }

    #[test]
    fn corrupted_truncated_and_wrong_size_are_refused() {
        for format in [Format::V1, Format::V2] {
            refused_when_damaged(format);
        }
    }

    fn refused_when_damaged(format: Format) {
        let old = code(12_500, 1, 0);
        let mut new = code(12_500, 1, 1);
        new[10] ^= 0xff;
        let d = make(&old, &new, format).unwrap();
        let n = new.len() as u64;
        // Truncated at every length: never a panic, always an error.
        for cut in 0..d.len() {
            assert!(run(&old, &d[..cut], n).is_err(), "cut at {cut}");
        }
        // A flipped byte anywhere: an error, or a result that differs (the sha256 check);
        // but v2's dictionary size (bytes 17..21), which still decodes right when it grows, and
        // the last 4 bytes of its range coder's flush, which a decoder need not read whole.
        for i in 0..d.len() {
            let mut c = d.clone();
            c[i] ^= 0x55;
            if let Ok((out, _)) = run(&old, &c, n) {
                let harmless = format == Format::V2 && ((17..21).contains(&i) || i + 4 >= d.len());
                assert!(harmless || out != new, "flip at {i}");
            }
        }
        assert!(run(&old, &d, n - 1).is_err());
        assert!(run(&old, &d, n + 1).is_err());
        let mut trailing = d.clone();
        trailing.push(0);
        assert!(run(&old, &trailing, n).is_err());
        // Applied to another old file: a different result, or a refusal.
        let other = code(12_500, 2, 0);
        if let Ok((out, _)) = run(&other, &d, n) {
            assert_ne!(out, new);
        }
    }

    #[test]
    fn a_record_past_the_size_or_the_old_file_is_refused_before_its_bytes() {
        let old = vec![1u8; 100];
        // Each forged record in both formats: v2's LZMA stream meets the same checks.
        for v2 in [false, true] {
            let forge = |mix: u64, copy: u64, seek: u64, size: u64| {
                let mut p = Vec::new();
                p.extend_from_slice(&mix.to_le_bytes());
                p.extend_from_slice(&copy.to_le_bytes());
                p.extend_from_slice(&seek.to_le_bytes());
                let mut d = if v2 { MAGIC_V2 } else { MAGIC }.to_vec();
                d.extend_from_slice(&size.to_le_bytes());
                if v2 {
                    d.extend_from_slice(&lzma_pack(&p).unwrap());
                } else {
                    d.extend_from_slice(&miniz_oxide::deflate::compress_to_vec_zlib(&p, 6));
                }
                d
            };
            let e = run(&old, &forge(0, u64::MAX, 0, 10), 10).unwrap_err();
            assert!(matches!(e, DeltaError::TooLong { limit: 10 }), "{e}");
            assert!(e.to_string().contains("more than the target"), "{e}");
            let e = run(&old, &forge(200, 0, 0, 200), 200).unwrap_err();
            assert!(matches!(e, DeltaError::ReadsPastOld), "{e}");
            let e = run(&old, &forge(0, 0, 1 << 63 | 5, 10), 10).unwrap_err();
            assert!(matches!(e, DeltaError::SeeksOutside), "{e}");
        }
    }

    /// `apply-delta OUT`: a link planted at OUT is replaced, not written through; a refused
    /// delta leaves OUT as it was and no temp file beside it.
    #[test]
    fn apply_files_replaces_a_link_at_out_and_keeps_out_on_a_refusal() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("svc-delta-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let old = sample(50_000, 1);
        let mut new = old.clone();
        new[100..110].copy_from_slice(b"0123456789");
        let (old_p, patch, out, victim) = (
            dir.join("old"),
            dir.join("patch"),
            dir.join("out"),
            dir.join("victim"),
        );
        std::fs::write(&old_p, &old).unwrap();
        std::fs::write(&patch, make(&old, &new, Format::V2).unwrap()).unwrap();
        std::fs::write(&victim, b"keep").unwrap();
        symlink(&victim, &out).unwrap();
        let a = apply_files(&old_p, &patch, &out, 1 << 20).unwrap();
        assert_eq!(a.size, new.len() as u64);
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            b"keep",
            "written through the link"
        );
        assert!(!std::fs::symlink_metadata(&out)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&out).unwrap(), new);
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);

        let mut bad = std::fs::read(&patch).unwrap();
        let n = bad.len();
        bad.truncate(n - 5);
        std::fs::write(&patch, bad).unwrap();
        assert!(apply_files(&old_p, &patch, &out, 1 << 20).is_err());
        assert_eq!(
            std::fs::read(&out).unwrap(),
            new,
            "a refused delta changed OUT"
        );
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["old", "out", "patch", "victim"],
            "a temp file was left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
