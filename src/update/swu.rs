//! SWUpdate images (`.swu`): a CPIO "newc" archive led by `sw-description` (libconfig
//! syntax), the format gooseBit accepts and SWUpdate users publish (docs/hawkbit.md, *SWUpdate
//! images*). The vendor's release tool writes them ([`write_newc`], [`sw_description`]); the
//! engine takes the files out of a downloaded one ([`Engine::unpack_swu`]).
//!
//! An archive is hostile input until proven otherwise. The reader is bounded everywhere: the
//! header fields are checked against what is left of the archive, names are at most
//! [`MAX_NAME`] bytes of `[A-Za-z0-9._+-]` (no `/`, so no path leaves the extraction
//! directory), `sw-description` at most [`MAX_SW_DESCRIPTION`] bytes and the first entry, only
//! regular files, each named once by `sw-description` (extra, missing or repeated files refuse
//! the archive). Trust does not come from the archive or its server: each file must match the
//! sha256 that `sw-description` gives it, and the vendor signature (the device's one scheme,
//! [`Artifact::signed_message`]) that `sw-description` carries for it binds name, version,
//! architecture, sha256 and size. Only then are the files handed to the engine, as
//! `file://` artifacts, which checks them again on its one verify/activate path.
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{io_err, Artifact, Engine, UpdateError, SUB};
use crate::encoding::hex;
use crate::paths::Paths;

/// Most bytes of `sw-description` (a few images: a few KiB).
pub const MAX_SW_DESCRIPTION: u64 = 64 * 1024;
/// Most bytes of an entry's name.
pub const MAX_NAME: usize = 128;
/// Most images one `sw-description` may name.
pub const MAX_IMAGES: usize = 4;
/// Most nesting of libconfig groups and lists.
const MAX_DEPTH: usize = 16;
/// The property of an image that carries the vendor signature.
pub const SIGNATURE_PROPERTY: &str = "svc-signature";
/// The image names the engine installs, and the machine config.
pub(crate) const CONFIG_NAME: &str = "config";
/// The name an archive's download goes by (the log, the byte budget's `waiting`).
pub(crate) const ARTIFACT_NAME: &str = "swu";

fn bad(m: impl Into<String>) -> UpdateError {
    UpdateError::BadArtifact(format!("swu: {}", m.into()))
}

// ---- CPIO newc --------------------------------------------------------------------------

/// One entry's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    pub mode: u32,
    pub size: u64,
}

const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const TRAILER: &str = "TRAILER!!!";

/// Reads CPIO newc (`070701`, or `070702` whose checksum is not relied on) entry by entry,
/// never past `len` bytes.
pub(crate) struct NewcReader<R: Read> {
    inner: R,
    pos: u64,
    len: u64,
}

impl<R: Read> NewcReader<R> {
    pub(crate) fn new(inner: R, len: u64) -> Self {
        NewcReader { inner, pos: 0, len }
    }

    fn read_exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), UpdateError> {
        if self.pos + buf.len() as u64 > self.len {
            return Err(bad(format!(
                "truncated: {what} at byte {} runs past the end of the archive ({} bytes)",
                self.pos, self.len
            )));
        }
        // The length was checked: a failing read is the device's fault, not the archive's.
        self.inner
            .read_exact(buf)
            .map_err(io_err(format!("reading {what} at byte {}", self.pos)))?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn skip_pad(&mut self) -> Result<(), UpdateError> {
        let pad = ((4 - self.pos % 4) % 4) as usize;
        let mut b = [0u8; 3];
        self.read_exact(&mut b[..pad], "padding")
    }

    /// The next entry's header; its data is read with [`NewcReader::data`] before the next.
    pub(crate) fn next_entry(&mut self) -> Result<Entry, UpdateError> {
        let at = self.pos;
        let mut h = [0u8; 110];
        self.read_exact(&mut h, "a header")?;
        if &h[..6] != b"070701" && &h[..6] != b"070702" {
            return Err(bad(format!(
                "byte {at}: not a CPIO newc header (magic {:?}); a .swu is a newc archive",
                String::from_utf8_lossy(&h[..6])
            )));
        }
        let field = |i: usize| -> Result<u32, UpdateError> {
            let s = &h[6 + 8 * i..14 + 8 * i];
            std::str::from_utf8(s)
                .ok()
                .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|s| u32::from_str_radix(s, 16).ok())
                .ok_or_else(|| bad(format!("byte {at}: header field {i} is not 8 hex digits")))
        };
        let mode = field(1)?;
        let size = u64::from(field(6)?);
        let namesize = field(11)? as usize;
        if !(2..=MAX_NAME + 1).contains(&namesize) {
            return Err(bad(format!(
                "byte {at}: a name of {namesize} bytes (1 to {MAX_NAME} and a NUL)"
            )));
        }
        let mut name = vec![0u8; namesize];
        self.read_exact(&mut name, "a name")?;
        if name.pop() != Some(0) || name.contains(&0) {
            return Err(bad(format!("byte {at}: the name is not NUL-terminated")));
        }
        let name = String::from_utf8(name)
            .map_err(|_| bad(format!("byte {at}: the name is not UTF-8")))?;
        self.skip_pad()?;
        if size > self.len - self.pos {
            return Err(bad(format!(
                "truncated or lying: entry {name:?} claims {size} bytes; {} are left in the archive",
                self.len - self.pos
            )));
        }
        Ok(Entry { name, mode, size })
    }

    /// Streams `e`'s data into `out` and returns its sha256 (lowercase hex).
    pub(crate) fn data(&mut self, e: &Entry, out: &mut dyn Write) -> Result<String, UpdateError> {
        let mut left = e.size;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            self.read_exact(&mut buf[..n], &format!("the data of {:?}", e.name))?;
            h.update(&buf[..n]);
            // A full disk is not a refusal of the archive: the next try may have room.
            out.write_all(&buf[..n])
                .map_err(io_err(format!("writing {:?}", e.name)))?;
            left -= n as u64;
        }
        self.skip_pad()?;
        Ok(hex(&h.finalize()))
    }
}

/// Writes `entries` (name, bytes) as one CPIO newc archive with its trailer, padded to 512
/// bytes as cpio(1) does. Names are checked as the reader checks them.
pub fn write_newc(out: &mut dyn Write, entries: &[(&str, &[u8])]) -> std::io::Result<u64> {
    let mut pos = 0u64;
    let put = |out: &mut dyn Write, b: &[u8], pos: &mut u64| -> std::io::Result<()> {
        out.write_all(b)?;
        *pos += b.len() as u64;
        Ok(())
    };
    let all = entries
        .iter()
        .map(|(n, d)| (*n, *d, S_IFREG | 0o644))
        .chain([(TRAILER, &[][..], 0)]);
    for (ino, (name, data, mode)) in all.enumerate() {
        if name != TRAILER && !plain_name(name) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{name:?} is not a plain file name"),
            ));
        }
        let size = u32::try_from(data.len()).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "a file over 4 GiB")
        })?;
        let header = format!(
            "070701{:08x}{mode:08x}{:08x}{:08x}{:08x}{:08x}{size:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            ino + 1,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        put(out, header.as_bytes(), &mut pos)?;
        put(out, name.as_bytes(), &mut pos)?;
        put(out, &[0], &mut pos)?;
        put(out, &[0; 3][..((4 - pos % 4) % 4) as usize], &mut pos)?;
        put(out, data, &mut pos)?;
        put(out, &[0; 3][..((4 - pos % 4) % 4) as usize], &mut pos)?;
    }
    let pad = (512 - pos % 512) % 512;
    put(out, &vec![0; pad as usize], &mut pos)?;
    Ok(pos)
}

/// A file name that stays in its directory: `[A-Za-z0-9._+-]`, not `.` or `..`.
pub(crate) fn plain_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= MAX_NAME
        && n != "."
        && n != ".."
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
}

// ---- libconfig (the subset sw-description uses) -------------------------------------------

/// A libconfig value. Numbers are kept as their text: `sw-description` fields the agent reads
/// are strings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Group(Vec<(String, Value)>),
    /// `( ... )` lists and `[ ... ]` arrays alike.
    List(Vec<Value>),
    Str(String),
    Number(String),
    Bool(bool),
}

impl Value {
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Group(g) => g.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Why `sw-description` is refused, naming where: a line of its text, or a setting by its
/// path (`software.x86_64.images[0].sha256`). Carried up as [`UpdateError::SwDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DescriptionError {
    /// Not the libconfig subset read here; `what`: the fault found at that line.
    Syntax {
        line: usize,
        what: String,
    },
    NoSoftware,
    /// A setting that must be a string is missing or of another type.
    Missing {
        at: String,
    },
    /// A string setting outside its rule; `rule` says which.
    Invalid {
        at: String,
        value: String,
        rule: &'static str,
    },
    /// No group for this machine's architecture; `boards`: the groups there are.
    NoBoard {
        arch: String,
        boards: Vec<String>,
    },
    NotAList {
        at: String,
    },
    ImageCount {
        at: String,
        count: usize,
    },
    /// An image of a name this agent does not take.
    UnknownName {
        at: String,
        name: String,
    },
    BadSignature {
        at: String,
    },
    /// A second image of the same filename or name.
    Duplicate {
        at: String,
    },
}

/// The rule of versions (`software.version`, each image's `version`).
const VERSION_RULE: &str = "is empty or has characters outside [A-Za-z0-9._+-]";

impl std::fmt::Display for DescriptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use DescriptionError::*;
        match self {
            Syntax { line, what } => write!(f, "sw-description line {line}: {what}"),
            NoSoftware => f.write_str("sw-description has no software group"),
            Missing { at } => write!(f, "{at} is missing or not a string"),
            Invalid { at, value, rule } => write!(f, "{at} {value:?} {rule}"),
            NoBoard { arch, boards } => write!(
                f,
                "sw-description has nothing for this machine (software.{arch}); it is for {boards:?}"
            ),
            NotAList { at } => write!(f, "{at} is missing or not a list"),
            ImageCount { at, count } => {
                write!(f, "{at} has {count} entries (1 to {MAX_IMAGES})")
            }
            UnknownName { at, name } => write!(
                f,
                "{at} {name:?}: this agent takes svc-agent, svc-server and config"
            ),
            BadSignature { at } => write!(f, "{at} is not a signature string"),
            Duplicate { at } => write!(f, "{at}: a second image of that filename or name"),
        }
    }
}

impl std::error::Error for DescriptionError {}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

/// Parses libconfig text: settings `name = value;` (or `:`, `;` or `,` optional), groups
/// `{}`, lists `()`, arrays `[]`, strings with escapes (adjacent ones joined), integers,
/// floats, booleans, and `#`, `//`, `/* */` comments. `@include` is refused (a file the
/// archive does not hold). Depth is bounded.
pub(crate) fn parse_libconfig(text: &str) -> Result<Value, DescriptionError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.settings(0, None)?;
    p.ws()?;
    if p.i != p.s.len() {
        return Err(p.err("unexpected text after the last setting"));
    }
    Ok(v)
}

impl Parser<'_> {
    fn err(&self, m: &str) -> DescriptionError {
        let line = self.s[..self.i.min(self.s.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        DescriptionError::Syntax {
            line,
            what: m.to_string(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) -> Result<(), DescriptionError> {
        loop {
            match (self.peek(), self.s.get(self.i + 1)) {
                (Some(b' ' | b'\t' | b'\r' | b'\n'), _) => self.i += 1,
                (Some(b'#'), _) | (Some(b'/'), Some(b'/')) => {
                    while self.peek().is_some_and(|b| b != b'\n') {
                        self.i += 1;
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    let rest = &self.s[self.i + 2..];
                    let end = rest
                        .windows(2)
                        .position(|w| w == b"*/")
                        .ok_or_else(|| self.err("a comment that does not end"))?;
                    self.i += end + 4;
                }
                _ => return Ok(()),
            }
        }
    }

    /// Settings up to `close` (or the end of the text at the top level).
    fn settings(&mut self, depth: usize, close: Option<u8>) -> Result<Value, DescriptionError> {
        let mut out: Vec<(String, Value)> = Vec::new();
        loop {
            self.ws()?;
            match (self.peek(), close) {
                (None, None) => return Ok(Value::Group(out)),
                (None, Some(_)) => return Err(self.err("a group that does not end")),
                (Some(c), Some(want)) if c == want => {
                    self.i += 1;
                    return Ok(Value::Group(out));
                }
                (Some(b'@'), _) => return Err(self.err("@include is not supported")),
                _ => {}
            }
            let start = self.i;
            while self
                .peek()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b"-_*".contains(&b))
            {
                self.i += 1;
            }
            let name = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
            if name.is_empty() || !self.s[start].is_ascii_alphabetic() && self.s[start] != b'*' {
                return Err(self.err("expected a setting name"));
            }
            self.ws()?;
            match self.peek() {
                Some(b'=' | b':') => self.i += 1,
                _ => return Err(self.err(&format!("expected = or : after {name:?}"))),
            }
            let v = self.value(depth + 1)?;
            if out.iter().any(|(k, _)| *k == name) {
                return Err(self.err(&format!("{name:?} is set twice")));
            }
            out.push((name, v));
            self.ws()?;
            if let Some(b';' | b',') = self.peek() {
                self.i += 1;
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, DescriptionError> {
        if depth > MAX_DEPTH {
            return Err(self.err(&format!("nested deeper than {MAX_DEPTH}")));
        }
        self.ws()?;
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                self.settings(depth, Some(b'}'))
            }
            Some(open @ (b'(' | b'[')) => {
                self.i += 1;
                let close = if open == b'(' { b')' } else { b']' };
                let mut items = Vec::new();
                loop {
                    self.ws()?;
                    if self.peek() == Some(close) {
                        self.i += 1;
                        return Ok(Value::List(items));
                    }
                    items.push(self.value(depth + 1)?);
                    self.ws()?;
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(c) if c == close => {}
                        _ => return Err(self.err("expected , or the end of the list")),
                    }
                }
            }
            Some(b'"') => {
                let mut s = Vec::new();
                while self.peek() == Some(b'"') {
                    self.string(&mut s)?;
                    self.ws()?;
                }
                String::from_utf8(s)
                    .map(Value::Str)
                    .map_err(|_| self.err("a string that is not UTF-8"))
            }
            Some(c) if c.is_ascii_alphanumeric() || b"+-.".contains(&c) => {
                let start = self.i;
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
                {
                    self.i += 1;
                }
                let word = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                match word.to_ascii_lowercase().as_str() {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    _ if word.as_bytes()[0].is_ascii_digit()
                        || b"+-.".contains(&word.as_bytes()[0]) =>
                    {
                        Ok(Value::Number(word))
                    }
                    _ => Err(self.err(&format!("{word:?} is not a value"))),
                }
            }
            _ => Err(self.err("expected a value")),
        }
    }

    fn string(&mut self, out: &mut Vec<u8>) -> Result<(), DescriptionError> {
        self.i += 1;
        loop {
            let Some(c) = self.peek() else {
                return Err(self.err("a string that does not end"));
            };
            self.i += 1;
            match c {
                b'"' => return Ok(()),
                b'\\' => {
                    let e = self
                        .peek()
                        .ok_or_else(|| self.err("a string that does not end"))?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'f' => out.push(0x0c),
                        b'\\' | b'"' => out.push(e),
                        b'x' => {
                            let h = self
                                .s
                                .get(self.i..self.i + 2)
                                .and_then(crate::encoding::hex_byte);
                            out.push(h.ok_or_else(|| self.err("a bad \\x escape"))?);
                            self.i += 2;
                        }
                        _ => return Err(self.err("an unknown escape in a string")),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

// ---- sw-description ---------------------------------------------------------------------

/// One image of `sw-description`: the fields the agent reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The entry's name in the archive.
    pub filename: String,
    /// `svc-agent`, `svc-server` or `config`.
    pub name: String,
    pub version: String,
    /// Lowercase hex.
    pub sha256: String,
    /// `properties.svc-signature`: the vendor's signature (base64) of the artifact.
    pub signature: Option<String>,
}

/// What the agent reads of `sw-description` (docs/hawkbit.md, *SWUpdate images*):
/// `software.version`, and under `software.<arch>` (the board name: the architecture)
/// `hardware-compatibility` and `images`, each with `filename`, `name`, `version`,
/// `sha256` and `properties.svc-signature`. Everything else is parsed and ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwDescription {
    pub version: String,
    pub images: Vec<Image>,
}

fn field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a str, DescriptionError> {
    v.get(key)
        .and_then(Value::str)
        .ok_or_else(|| DescriptionError::Missing {
            at: format!("{at}.{key}"),
        })
}

fn plain_version(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 64
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
}

/// Reads `sw-description` for the board (architecture) `arch`.
pub(crate) fn parse_sw_description(
    text: &str,
    arch: &str,
) -> Result<SwDescription, DescriptionError> {
    use DescriptionError as E;
    let invalid = |at: String, value: &str, rule| E::Invalid {
        at,
        value: value.to_string(),
        rule,
    };
    let root = parse_libconfig(text)?;
    let sw = root
        .get("software")
        .filter(|v| matches!(v, Value::Group(_)))
        .ok_or(E::NoSoftware)?;
    let version = field(sw, "version", "software")?.to_string();
    if !plain_version(&version) {
        return Err(invalid("software.version".into(), &version, VERSION_RULE));
    }
    let Some(board) = sw.get(arch).filter(|v| matches!(v, Value::Group(_))) else {
        let boards = match sw {
            Value::Group(g) => g
                .iter()
                .filter(|(_, v)| matches!(v, Value::Group(_)))
                .map(|(k, _)| k.clone())
                .collect(),
            _ => Vec::new(),
        };
        return Err(E::NoBoard {
            arch: arch.to_string(),
            boards,
        });
    };
    let at = format!("software.{arch}.images");
    let Some(Value::List(images)) = board.get("images") else {
        return Err(E::NotAList { at });
    };
    if images.is_empty() || images.len() > MAX_IMAGES {
        return Err(E::ImageCount {
            at,
            count: images.len(),
        });
    }
    let mut out: Vec<Image> = Vec::new();
    for (i, img) in images.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let filename = field(img, "filename", &at)?.to_string();
        if !plain_name(&filename) || filename.starts_with("sw-description") {
            return Err(invalid(
                format!("{at}.filename"),
                &filename,
                "is not a plain file name of [A-Za-z0-9._+-]",
            ));
        }
        let name = field(img, "name", &at)?.to_string();
        if !super::NAMES.contains(&name.as_str()) && name != CONFIG_NAME {
            return Err(E::UnknownName {
                at: format!("{at}.name"),
                name,
            });
        }
        let version = field(img, "version", &at)?.to_string();
        if !plain_version(&version) {
            return Err(invalid(format!("{at}.version"), &version, VERSION_RULE));
        }
        let sha256 = field(img, "sha256", &at)?.to_ascii_lowercase();
        if !crate::encoding::is_sha256_hex(&sha256) {
            return Err(invalid(
                format!("{at}.sha256"),
                &sha256,
                "is not 64 hex digits",
            ));
        }
        let signature = match img.get("properties").map(|p| p.get(SIGNATURE_PROPERTY)) {
            None | Some(None) => None,
            Some(Some(Value::Str(s))) if s.len() <= 256 => Some(s.clone()),
            Some(Some(_)) => {
                return Err(E::BadSignature {
                    at: format!("{at}.properties.{SIGNATURE_PROPERTY}"),
                })
            }
        };
        if out.iter().any(|o| o.filename == filename || o.name == name) {
            return Err(E::Duplicate { at });
        }
        out.push(Image {
            filename,
            name,
            version,
            sha256,
            signature,
        });
    }
    Ok(SwDescription {
        version,
        images: out,
    })
}

fn quoted(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                o.push('\\');
                o.push(c)
            }
            c if (c as u32) < 0x20 => o.push_str(&format!("\\x{:02x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The `sw-description` the release tool writes: version, the board (architecture) with
/// `hardware-compatibility = ["default"]` (the revision gooseBit gives a device that names
/// none), and one image per file with its sha256 and signature.
pub fn sw_description(version: &str, arch: &str, images: &[Image]) -> String {
    let mut s = format!(
        "software =\n{{\n\tversion = {};\n\tdescription = {};\n\t{arch} =\n\t{{\n\t\thardware-compatibility = [ \"default\" ];\n\t\timages: (\n",
        quoted(version),
        quoted(&format!("svc {version} for {arch}, written by svc-release")),
    );
    for (i, img) in images.iter().enumerate() {
        s.push_str(&format!(
            "\t\t\t{{\n\t\t\t\tfilename = {};\n\t\t\t\tname = {};\n\t\t\t\tversion = {};\n\t\t\t\ttype = \"rawfile\";\n\t\t\t\tpath = {};\n\t\t\t\tsha256 = {};\n",
            quoted(&img.filename),
            quoted(&img.name),
            quoted(&img.version),
            quoted(&format!("/tmp/svc-swu/{}", img.filename)),
            quoted(&img.sha256),
        ));
        if let Some(sig) = &img.signature {
            s.push_str(&format!(
                "\t\t\t\tproperties = {{ {SIGNATURE_PROPERTY} = {}; }};\n",
                quoted(sig)
            ));
        }
        s.push_str(if i + 1 == images.len() {
            "\t\t\t}\n"
        } else {
            "\t\t\t},\n"
        });
    }
    s.push_str("\t\t);\n\t};\n}\n");
    s
}

// ---- taking the files out -------------------------------------------------------------------

/// A file taken out of an archive, checked against `sw-description` and the vendor key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub size: u64,
    pub signature: Option<String>,
    pub path: PathBuf,
}

impl Unpacked {
    /// The engine's artifact for this file: a `file://` URL, the sha256 and signature from
    /// `sw-description`, the size from the archive.
    pub fn artifact(&self) -> Artifact {
        Artifact {
            name: self.name.clone(),
            version: self.version.clone(),
            url: format!("file://{}", self.path.display()),
            sha256: Some(self.sha256.clone()),
            size: Some(self.size),
            signature: self.signature.clone(),
            identity: None,
        }
    }
}

/// Takes the files out of the archive `swu` into `dir` (created; emptied first), checking
/// everything in the module comment. `arch` is the board name to read. On any error nothing
/// is left in `dir`.
pub(crate) fn extract(
    paths: &crate::paths::Paths,
    swu: &Path,
    dir: &Path,
    arch: &str,
) -> Result<(SwDescription, Vec<Unpacked>), UpdateError> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let out = extract_into(paths, swu, dir, arch);
    if out.is_err() {
        let _ = fs::remove_dir_all(dir);
    }
    out
}

fn extract_into(
    paths: &crate::paths::Paths,
    swu: &Path,
    dir: &Path,
    arch: &str,
) -> Result<(SwDescription, Vec<Unpacked>), UpdateError> {
    let f = File::open(swu).map_err(io_err(format!("opening {}", swu.display())))?;
    let len = f
        .metadata()
        .map_err(io_err(format!("stat {}", swu.display())))?
        .len();
    walk(
        NewcReader::new(std::io::BufReader::new(f), len),
        arch,
        Some((paths, dir)),
    )
}

/// Every check of [`extract`] but the vendor signature, on an archive in memory, writing
/// nothing (the fuzz target's entry, and a vendor's check of an image).
pub fn inspect(bytes: &[u8], arch: &str) -> Result<SwDescription, UpdateError> {
    walk(NewcReader::new(bytes, bytes.len() as u64), arch, None).map(|(d, _)| d)
}

/// Reads the archive; with `to`, writes each file into its directory and checks it against
/// the device's vendor key.
fn walk<R: Read>(
    mut r: NewcReader<R>,
    arch: &str,
    to: Option<(&crate::paths::Paths, &Path)>,
) -> Result<(SwDescription, Vec<Unpacked>), UpdateError> {
    let first = r.next_entry()?;
    if first.name != "sw-description" {
        return Err(bad(format!(
            "the first entry is {:?}; a .swu begins with sw-description",
            first.name
        )));
    }
    if first.mode & S_IFMT != S_IFREG || first.size > MAX_SW_DESCRIPTION {
        return Err(bad(format!(
            "sw-description is not a regular file of at most {MAX_SW_DESCRIPTION} bytes"
        )));
    }
    let mut text = Vec::new();
    r.data(&first, &mut text)?;
    let text = String::from_utf8(text).map_err(|_| bad("sw-description is not UTF-8"))?;
    let desc = parse_sw_description(&text, arch).map_err(UpdateError::SwDescription)?;
    let mut got: Vec<Unpacked> = Vec::new();
    let mut sig_seen = false;
    loop {
        let e = r.next_entry()?;
        if e.name == TRAILER {
            break;
        }
        if e.name == "sw-description.sig" && !sig_seen && e.size <= MAX_SW_DESCRIPTION {
            // SWUpdate's own signature (CMS/RSA), not the vendor key's: not relied on.
            sig_seen = true;
            r.data(&e, &mut std::io::sink())?;
            continue;
        }
        let Some(img) = desc.images.iter().find(|i| i.filename == e.name) else {
            return Err(bad(format!(
                "the archive holds {:?}, which sw-description does not name",
                e.name
            )));
        };
        if got.iter().any(|g| g.name == img.name) {
            return Err(bad(format!("{:?} is in the archive twice", e.name)));
        }
        if e.mode & S_IFMT != S_IFREG {
            return Err(bad(format!(
                "{:?} is not a regular file (mode {:o})",
                e.name, e.mode
            )));
        }
        let (sha, path) = match to {
            Some((_, dir)) => {
                let path = dir.join(&img.filename);
                let mut out =
                    File::create(&path).map_err(io_err(format!("creating {}", path.display())))?;
                let sha = r.data(&e, &mut out)?;
                out.sync_all()
                    .map_err(io_err(format!("syncing {}", path.display())))?;
                (sha, path)
            }
            None => (r.data(&e, &mut std::io::sink())?, PathBuf::new()),
        };
        if sha != img.sha256 {
            return Err(bad(format!(
                "{:?} does not match sw-description: sha256 {sha}, sw-description says {}",
                e.name, img.sha256
            )));
        }
        let u = Unpacked {
            name: img.name.clone(),
            version: img.version.clone(),
            sha256: sha,
            size: e.size,
            signature: img.signature.clone(),
            path,
        };
        // The vendor key's verdict now, on every file, before any reaches the engine (which
        // checks again on its own path): a bad archive is refused whole. The config too: on
        // a device with a vendor key an unsigned one is refused as a wrongly signed one is
        // (issue 40); nothing but this check vouches for it.
        if let Some((paths, _)) = to {
            super::verify::check_signature(paths, &u.artifact())
                .map_err(|err| bad(format!("{:?}: {err}", e.name)))?;
        }
        got.push(u);
    }
    if let Some(missing) = desc
        .images
        .iter()
        .find(|i| !got.iter().any(|g| g.name == i.name))
    {
        return Err(bad(format!(
            "sw-description names {:?}, which the archive does not hold",
            missing.filename
        )));
    }
    Ok((desc, got))
}

/// A `.swu` a server offers: where, and what its server says of it.
#[derive(Debug, Clone)]
pub struct SwuOffer {
    pub url: String,
    /// The version the server gives (it read it from `sw-description`); must agree.
    pub version: String,
    pub size: u64,
    /// Lowercase hex; at least one of the two. gooseBit gives only sha1.
    pub sha256: Option<String>,
    pub sha1: Option<String>,
    pub identity: Option<crate::http::Identity>,
}

/// The record of the files taken out of the last image, in `cache/swu/`.
const MANIFEST: &str = "manifest.json";

#[derive(serde::Serialize, serde::Deserialize)]
struct Manifest {
    key: String,
    files: Vec<(String, String, String, u64, Option<String>, String)>,
}

impl Engine {
    /// Downloads the `.swu` of `offer` through the engine's resumable download (Range +
    /// If-Range), checks the server's hash of it, and takes its files out into
    /// `cache/swu/` (see the module comment). The files are returned as artifacts for
    /// [`Engine::stage`]; one archive unpacked stays there while its action runs, so a
    /// repeated offer is not downloaded again.
    pub fn unpack_swu(&self, offer: &SwuOffer) -> Result<Vec<Unpacked>, UpdateError> {
        let hash = offer
            .sha256
            .clone()
            .or_else(|| offer.sha1.clone())
            .ok_or_else(|| bad("the server gives no sha256 or sha1 for the archive"))?;
        if !(hash.len() == 64 || hash.len() == 40) || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(format!("the archive's hash {hash:?} is not hex")));
        }
        let root = self.paths.cache_dir().join("swu");
        let key = format!("{}|{}|{}", offer.url, hash.to_ascii_lowercase(), offer.size);
        let manifest_path = root.join(MANIFEST);
        if let Some(files) = fs::read(&manifest_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            .filter(|m| m.key == key)
            .map(|m| m.files)
        {
            let unpacked: Vec<Unpacked> = files
                .into_iter()
                .map(|(name, version, sha256, size, signature, path)| Unpacked {
                    name,
                    version,
                    sha256,
                    size,
                    signature,
                    path: PathBuf::from(path),
                })
                .collect();
            if unpacked
                .iter()
                .all(|u| fs::metadata(&u.path).is_ok_and(|m| m.len() == u.size))
            {
                return Ok(unpacked);
            }
        }
        // A new archive: whatever an earlier one left goes, except this archive's partial
        // download, which resumes (`Range`), also after a restart. It is named by the
        // archive's whole hash and size, so the bytes of another image are never appended to.
        let part = root.join(format!(
            "{}-{}.swu.part",
            hash.to_ascii_lowercase(),
            offer.size
        ));
        clear_all_but(&root, &part)?;
        let a = Artifact {
            name: ARTIFACT_NAME.into(),
            version: offer.version.clone(),
            url: offer.url.clone(),
            sha256: offer.sha256.clone(),
            size: Some(offer.size),
            signature: None,
            identity: offer.identity.clone(),
        };
        let fetched = super::download::fetch_into(part.clone(), &a, &self.opts.download, None)?;
        let super::Fetched::Complete { part, sha256, .. } = fetched else {
            return Err(UpdateError::Record("unexpected 304 for an archive".into()));
        };
        let checked = check_archive_hash(&part, offer, &sha256).and_then(|()| {
            let (desc, files) = extract(
                &self.paths,
                &part,
                &root.join("files"),
                super::this_target(),
            )?;
            if desc.version != offer.version {
                return Err(bad(format!(
                    "sw-description says version {}, the server offers {}",
                    desc.version, offer.version
                )));
            }
            Ok(files)
        });
        super::download::discard(&part);
        if checked.is_err() {
            // Nothing of a refused archive stays.
            let _ = fs::remove_dir_all(root.join("files"));
        }
        let files = checked?;
        let m = Manifest {
            key,
            files: files
                .iter()
                .map(|u| {
                    (
                        u.name.clone(),
                        u.version.clone(),
                        u.sha256.clone(),
                        u.size,
                        u.signature.clone(),
                        u.path.display().to_string(),
                    )
                })
                .collect(),
        };
        let bytes = serde_json::to_vec(&m).map_err(|e| UpdateError::Record(e.to_string()))?;
        crate::fsutil::atomic_write(&manifest_path, &bytes, 0o644)
            .map_err(io_err(format!("writing {}", manifest_path.display())))?;
        crate::info!(
            SUB,
            "swu {}: {}",
            offer.version,
            files
                .iter()
                .map(|u| format!("{} {}", u.name, u.version))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(files)
    }
}

/// Empties `root` (made when missing) but for the partial download `part` and its sidecar.
fn clear_all_but(root: &Path, part: &Path) -> Result<(), UpdateError> {
    fs::create_dir_all(root).map_err(io_err(format!("creating {}", root.display())))?;
    // The manifest vouches for the files (it is written last), so it goes first: a cut
    // part-way through leaves no manifest naming files already gone.
    let manifest = root.join(MANIFEST);
    match fs::remove_file(&manifest) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io_err(format!("removing {}", manifest.display()))(e))
        }
        _ => {}
    }
    let keep = [part.to_path_buf(), super::download::sidecar_path(part)];
    let entries = fs::read_dir(root).map_err(io_err(format!("listing {}", root.display())))?;
    for e in entries.flatten() {
        let p = e.path();
        if keep.contains(&p) && e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let gone = match e.file_type() {
            Ok(t) if t.is_dir() => fs::remove_dir_all(&p),
            _ => fs::remove_file(&p),
        };
        gone.map_err(io_err(format!("removing {}", p.display())))?;
    }
    Ok(())
}

/// The archive against the server's hash: its sha256 when given, else its sha1 (what
/// gooseBit gives). Only a check of the transfer: trust comes from sw-description's sha256s
/// and the vendor signature.
fn check_archive_hash(part: &Path, offer: &SwuOffer, sha256: &str) -> Result<(), UpdateError> {
    if let Some(want) = &offer.sha256 {
        if !want.eq_ignore_ascii_case(sha256) {
            return Err(UpdateError::ShaMismatch {
                expected: want.to_ascii_lowercase(),
                actual: sha256.to_string(),
            });
        }
        return Ok(());
    }
    let Some(want) = &offer.sha1 else {
        return Err(bad("the server gives no hash of the archive"));
    };
    super::verify::check_sha1(part, want)
}

/// Drops everything the last image left in `cache/swu/` (its unpacked files, which the
/// engine has copied into its cache by now, and their manifest): once its action is over,
/// each build is on disk once (issue 46). A missing directory is nothing to do.
pub(crate) fn drop_unpacked(paths: &Paths) -> Result<(), UpdateError> {
    let root = paths.cache_dir().join("swu");
    match fs::symlink_metadata(&root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return fs::remove_file(&root).map_err(io_err(format!("removing {}", root.display())))
        }
        Err(_) => return Ok(()),
    }
    clear_all_but(&root, Path::new(""))?;
    fs::remove_dir(&root).map_err(io_err(format!("removing {}", root.display())))
}

/// Where the engine keeps the files it took out of the last image.
fn files_dir(paths: &Paths) -> PathBuf {
    paths.cache_dir().join("swu").join("files")
}

/// Whether `path` is a file the engine took out of an image (in [`files_dir`], by plain
/// names only): the one kind of `file://` target the hawkBit backend hands the engine,
/// which verifies it again (sha256, signature) as any download.
pub(crate) fn is_unpacked(paths: &Paths, path: &Path) -> bool {
    path.strip_prefix(files_dir(paths)).is_ok_and(|rest| {
        rest.components().count() > 0
            && rest
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
    })
}

/// Why [`read_unpacked`] gives no bytes; each names the path.
#[derive(Debug)]
pub(crate) enum UnpackedError {
    /// Not in [`files_dir`] by plain names.
    NotUnpacked(PathBuf),
    NotRegular(PathBuf),
    TooLarge {
        path: PathBuf,
        cap: u64,
    },
    Io {
        path: PathBuf,
        err: std::io::Error,
    },
}

impl std::fmt::Display for UnpackedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnpackedError::NotUnpacked(p) => {
                write!(f, "{} is not a file taken out of an image", p.display())
            }
            UnpackedError::NotRegular(p) => write!(f, "{} is not a regular file", p.display()),
            UnpackedError::TooLarge { path, cap } => {
                write!(f, "{} is larger than {cap} bytes", path.display())
            }
            UnpackedError::Io { path, err } => write!(f, "{}: {err}", path.display()),
        }
    }
}

impl std::error::Error for UnpackedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UnpackedError::Io { err, .. } => Some(err),
            _ => None,
        }
    }
}

/// The bytes of a file taken out of an image, at most `cap` of them: a regular file (not a
/// link) in [`files_dir`].
pub(crate) fn read_unpacked(
    paths: &Paths,
    path: &Path,
    cap: u64,
) -> Result<Vec<u8>, UnpackedError> {
    let io = |err| UnpackedError::Io {
        path: path.to_path_buf(),
        err,
    };
    if !is_unpacked(paths, path) {
        return Err(UnpackedError::NotUnpacked(path.to_path_buf()));
    }
    let meta = fs::symlink_metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(UnpackedError::NotRegular(path.to_path_buf()));
    }
    if meta.len() > cap {
        return Err(UnpackedError::TooLarge {
            path: path.to_path_buf(),
            cap,
        });
    }
    fs::read(path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_in_the_files_folder_are_unpacked_files() {
        let paths = Paths::new(Path::new("/r"));
        let dir = files_dir(&paths);
        assert!(is_unpacked(&paths, &dir.join("svc-server")));
        assert!(!is_unpacked(&paths, &dir));
        assert!(!is_unpacked(&paths, &dir.join("../manifest.json")));
        assert!(!is_unpacked(&paths, &dir.join("a/../../x")));
        assert!(!is_unpacked(&paths, Path::new("/etc/passwd")));
        assert!(matches!(
            read_unpacked(&paths, Path::new("/etc/passwd"), 1 << 20),
            Err(UnpackedError::NotUnpacked(_))
        ));
    }
    use crate::paths::Paths;

    const ARCH: &str = "x86_64";

    fn image(name: &str, body: &[u8]) -> Image {
        Image {
            filename: name.into(),
            name: name.into(),
            version: "2.0.0".into(),
            sha256: hex(&Sha256::digest(body)),
            signature: None,
        }
    }

    fn archive(desc: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut entries: Vec<(&str, &[u8])> = vec![("sw-description", desc.as_bytes())];
        entries.extend_from_slice(files);
        let mut out = Vec::new();
        write_newc(&mut out, &entries).unwrap();
        out
    }

    fn dir(test: &str) -> (Paths, PathBuf) {
        let d = std::env::temp_dir().join(format!("svc-swu-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        (Paths::new(&d), d)
    }

    fn try_extract(test: &str, bytes: &[u8]) -> Result<Vec<Unpacked>, UpdateError> {
        let (paths, d) = dir(test);
        let swu = d.join("a.swu");
        fs::write(&swu, bytes).unwrap();
        let out = d.join("out");
        let r = extract(&paths, &swu, &out, ARCH).map(|(_, f)| f);
        if r.is_err() {
            assert!(!out.exists(), "{test}: nothing is left behind");
        }
        r
    }

    #[test]
    fn a_good_archive_round_trips() {
        let body = b"\x7fELF server bytes".to_vec();
        let desc = sw_description("2.0.0", ARCH, &[image("svc-server", &body)]);
        let bytes = archive(&desc, &[("svc-server", &body)]);
        assert_eq!(bytes.len() % 512, 0);
        let got = try_extract("good", &bytes).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(fs::read(&got[0].path).unwrap(), body);
        assert_eq!(got[0].size, body.len() as u64);
        assert_eq!(got[0].artifact().name, "svc-server");
    }

    #[test]
    fn hostile_archives_are_refused_whole() {
        let body = b"server".to_vec();
        let good = sw_description("2.0.0", ARCH, &[image("svc-server", &body)]);
        let lie = sw_description("2.0.0", ARCH, &[image("svc-server", b"other")]);
        let traversal = good.replace("filename = \"svc-server\"", "filename = \"../svc-server\"");
        let other_arch = sw_description("2.0.0", "aarch64", &[image("svc-server", &body)]);
        let mut truncated = archive(&good, &[("svc-server", &body)]);
        truncated.truncate(300);
        let mut huge = archive(&good, &[("svc-server", &body)]);
        // The second header's filesize field: 0xffffffff.
        let at = huge
            .windows(6)
            .enumerate()
            .filter(|(_, w)| *w == b"070701")
            .nth(1)
            .unwrap()
            .0;
        huge[at + 54..at + 62].copy_from_slice(b"ffffffff");
        let mut badmagic = archive(&good, &[("svc-server", &body)]);
        badmagic[..6].copy_from_slice(b"070707");
        let mut symlink = archive(&good, &[("svc-server", &body)]);
        symlink[at + 14..at + 22].copy_from_slice(b"0000a1ff");
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "lie",
                archive(&lie, &[("svc-server", &body)]),
                "does not match sw-description",
            ),
            (
                "extra",
                archive(&good, &[("svc-server", &body), ("evil", b"x")]),
                "does not name",
            ),
            ("missing", archive(&good, &[]), "does not hold"),
            (
                "twice",
                archive(&good, &[("svc-server", &body), ("svc-server", &body)]),
                "twice",
            ),
            (
                "traversal",
                archive(&traversal, &[("svc-server", &body)]),
                "not a plain file name",
            ),
            (
                "arch",
                archive(&other_arch, &[("svc-server", &body)]),
                "nothing for this machine",
            ),
            ("truncated", truncated, "truncated"),
            ("huge", huge, "claims 4294967295 bytes"),
            ("magic", badmagic, "not a CPIO newc header"),
            ("symlink", symlink, "not a regular file"),
            ("no-software", archive("x = 1;", &[]), "no software group"),
            (
                "not-first",
                {
                    let mut b = Vec::new();
                    write_newc(
                        &mut b,
                        &[
                            ("svc-server", &body[..]),
                            ("sw-description", good.as_bytes()),
                        ],
                    )
                    .unwrap();
                    b
                },
                "begins with sw-description",
            ),
            ("empty", Vec::new(), "truncated"),
        ];
        for (test, bytes, why) in cases {
            let e = try_extract(test, &bytes).unwrap_err();
            assert!(e.is_refusal(), "{test}: {e:?}");
            assert!(e.to_string().contains(why), "{test}: {e}");
        }
        // A name in the archive with a path: refused as unknown, never written.
        let mut entries: Vec<(&str, &[u8])> = vec![("sw-description", good.as_bytes())];
        entries.push(("svc-server", &body));
        let mut bytes = Vec::new();
        write_newc(&mut bytes, &entries).unwrap();
        let s = String::from_utf8_lossy(&bytes).replace("svc-server\0", "../etc/pwd\0");
        let e = try_extract("pathname", s.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"../etc/pwd\", which sw-description does not name"),
            "{e}"
        );
        assert!(write_newc(&mut Vec::new(), &[("../x", b"")]).is_err());
    }

    #[test]
    fn a_device_with_a_vendor_key_needs_the_signature() {
        let (paths, d) = dir("unsigned");
        let key = paths.signing_key();
        fs::create_dir_all(key.parent().unwrap()).unwrap();
        fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
        let body = b"server".to_vec();
        let desc = sw_description("2.0.0", ARCH, &[image("svc-server", &body)]);
        let swu = d.join("a.swu");
        fs::write(&swu, archive(&desc, &[("svc-server", &body)])).unwrap();
        let e = extract(&paths, &swu, &d.join("out"), ARCH).unwrap_err();
        assert!(e.to_string().contains("no signature"), "{e}");
        let mut signed = image("svc-server", &body);
        signed.signature = Some(crate::encoding::base64_encode(&[7u8; 64]));
        let desc = sw_description("2.0.0", ARCH, &[signed]);
        fs::write(&swu, archive(&desc, &[("svc-server", &body)])).unwrap();
        let e = extract(&paths, &swu, &d.join("out"), ARCH).unwrap_err();
        assert!(e.to_string().contains("signature"), "{e}");
        assert!(!d.join("out").exists());
    }

    #[test]
    fn a_device_with_a_vendor_key_needs_the_configs_signature_too() {
        let (paths, d) = dir("unsigned-config");
        let key = paths.signing_key();
        fs::create_dir_all(key.parent().unwrap()).unwrap();
        fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
        let body = br#"{"agent": {}}"#.to_vec();
        let desc = sw_description("7", ARCH, &[image(CONFIG_NAME, &body)]);
        let swu = d.join("c.swu");
        fs::write(&swu, archive(&desc, &[(CONFIG_NAME, &body)])).unwrap();
        let e = extract(&paths, &swu, &d.join("out"), ARCH).unwrap_err();
        assert!(
            e.to_string()
                .contains("\"config\": signature check failed: artifact has no signature"),
            "{e}"
        );
        assert!(!d.join("out").exists());
        // Without a vendor key nothing is signed, the config included (as before).
        fs::remove_file(&key).unwrap();
        let (_, files) = extract(&paths, &swu, &d.join("out"), ARCH).unwrap();
        assert_eq!(files[0].name, CONFIG_NAME);
    }

    #[test]
    fn a_refused_description_says_where_as_a_value() {
        let mut img = image("svc-server", b"x");
        img.sha256 = "zz".into();
        let desc = sw_description("2.0.0", ARCH, &[img]);
        let e = parse_sw_description(&desc, ARCH).unwrap_err();
        assert_eq!(
            e,
            DescriptionError::Invalid {
                at: format!("software.{ARCH}.images[0].sha256"),
                value: "zz".into(),
                rule: "is not 64 hex digits",
            }
        );
        // Carried up typed, and said as before.
        let e = inspect(&archive(&desc, &[]), ARCH).unwrap_err();
        assert!(matches!(e, UpdateError::SwDescription(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "bad artifact: swu: software.{ARCH}.images[0].sha256 \"zz\" is not 64 hex digits"
            )
        );
        assert!(matches!(
            parse_sw_description("software = { version = \"1\"; }\n}", ARCH),
            Err(DescriptionError::Syntax { line: 2, .. })
        ));
    }

    #[test]
    fn the_fuzz_seed_is_a_good_image() {
        let d = inspect(include_bytes!("../../fuzz/seeds/swu/good.swu"), ARCH).unwrap();
        assert_eq!(d.images[0].signature.as_deref(), Some("AAAA"));
    }

    #[test]
    fn libconfig_subset() {
        let v = parse_libconfig(
            "# c\nsoftware = { version = \"1\" \".2\"; /* x */ hw: [\"a\", \"b\"]; n = 0x10L; f = 1.5e3; b = true; l = ( { a = \"\\x41\\\"\"; } ) };\n// end",
        )
        .unwrap();
        let sw = v.get("software").unwrap();
        assert_eq!(sw.get("version"), Some(&Value::Str("1.2".into())));
        assert_eq!(sw.get("b"), Some(&Value::Bool(true)));
        let Some(Value::List(l)) = sw.get("l") else {
            panic!()
        };
        assert_eq!(l[0].get("a"), Some(&Value::Str("A\"".into())));
        for bad in [
            "a = ",
            "a = \"x",
            "a = { b = 1;",
            "@include \"x\"",
            "a = 1; a = 2;",
            "a = /* open",
            "1a = 2;",
            "a = [1,",
            "a = \"\\q\";",
        ] {
            assert!(parse_libconfig(bad).is_err(), "{bad}");
        }
        let deep = format!("a = {}{};", "(".repeat(40), ")".repeat(40));
        assert!(parse_libconfig(&deep)
            .unwrap_err()
            .to_string()
            .contains("nested deeper"));
    }
}
