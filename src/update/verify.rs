//! Checks a downloaded file must pass before it may become a link target: size, sha256,
//! ed25519 signature (when the device has a vendor key), ELF header for this machine, and
//! the new binary's own `version --json`.
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rustls::pki_types::SignatureVerificationAlgorithm;
use rustls::SignatureScheme;
use sha2::{Digest, Sha256};

use super::{io_err, Artifact, UpdateError, UpdateOptions, SUB};
use crate::encoding::{base64_decode, hex, unhex};
use crate::paths::Paths;

/// All checks on a complete download whose streamed sha256 is `sha256`.
pub(crate) fn verify_file(
    paths: &Paths,
    a: &Artifact,
    file: &Path,
    sha256: &str,
    opts: &UpdateOptions,
) -> Result<(), UpdateError> {
    let size = std::fs::metadata(file)
        .map_err(io_err(format!("stat {}", file.display())))?
        .len();
    if let Some(expected) = a.size {
        if size != expected {
            return Err(UpdateError::SizeMismatch {
                expected,
                actual: size,
            });
        }
    }
    match &a.sha256 {
        Some(expected) if !expected.eq_ignore_ascii_case(sha256) => {
            return Err(UpdateError::ShaMismatch {
                expected: expected.to_ascii_lowercase(),
                actual: sha256.to_string(),
            })
        }
        Some(_) => {}
        None => crate::info!(
            SUB,
            "{}: pinned URL without sha256; downloaded content has sha256 {sha256}",
            a.name
        ),
    }
    check_signature(paths, a)?;
    check_elf(file)?;
    if opts.run_version_check {
        // Executable only now that the bytes are known good.
        std::fs::set_permissions(file, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .map_err(io_err(format!("chmod {}", file.display())))?;
        let info = version_check(file, &a.name, opts.version_timeout)?;
        if !a.is_pin() && info.version.trim_start_matches('v') != a.version.trim_start_matches('v')
        {
            return Err(UpdateError::VersionCheck(format!(
                "binary reports version {:?}, the app announced {:?}",
                info.version, a.version
            )));
        }
    }
    Ok(())
}

/// `file` against a server's sha1: only a check of the transfer (gooseBit gives no other
/// hash of an image; the trust comes from elsewhere: a signed description, RAUC's keyring).
pub(crate) fn check_sha1(file: &Path, want: &str) -> Result<(), UpdateError> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    read_through(file, |b| ctx.update(b))?;
    let got = hex(ctx.finish().as_ref());
    if !want.eq_ignore_ascii_case(&got) {
        return Err(UpdateError::Sha1Mismatch {
            expected: want.to_ascii_lowercase(),
            actual: got,
        });
    }
    Ok(())
}

/// Reads `file` through in 64 KiB chunks, each handed to `each`; the bytes read.
fn read_through(file: &Path, mut each: impl FnMut(&[u8])) -> Result<u64, UpdateError> {
    let mut f = File::open(file).map_err(io_err(format!("opening {}", file.display())))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(io_err(format!("reading {}", file.display())))?;
        if n == 0 {
            return Ok(size);
        }
        each(&buf[..n]);
        size += n as u64;
    }
}

/// Size and sha256 of a file on disk against the artifact (re-check of a cached file).
pub(crate) fn check_file_hash(file: &Path, a: &Artifact) -> Result<(), UpdateError> {
    let mut h = Sha256::new();
    let size = read_through(file, |b| h.update(b))?;
    if let Some(expected) = a.size {
        if expected != size {
            return Err(UpdateError::SizeMismatch {
                expected,
                actual: size,
            });
        }
    }
    let actual = hex(&h.finalize());
    match &a.sha256 {
        Some(e) if !e.eq_ignore_ascii_case(&actual) => Err(UpdateError::ShaMismatch {
            expected: e.to_ascii_lowercase(),
            actual,
        }),
        _ => Ok(()),
    }
}

fn ed25519() -> Option<&'static dyn SignatureVerificationAlgorithm> {
    rustls::crypto::ring::default_provider()
        .signature_verification_algorithms
        .mapping
        .iter()
        .find(|(s, _)| *s == SignatureScheme::ED25519)
        .and_then(|(_, algs)| algs.first().copied())
}

/// When `Paths::signing_key()` exists, the artifact must carry a valid signature by one of
/// its keys (more than one during a key rotation).
pub(crate) fn check_signature(paths: &Paths, a: &Artifact) -> Result<(), UpdateError> {
    let key_path = paths.signing_key();
    let key_bytes = match read_bounded(&key_path, MAX_KEY_FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(UpdateError::Signature(format!(
                "vendor key {} unreadable: {e}",
                key_path.display()
            )))
        }
    };
    let keys = parse_public_keys(&key_bytes)
        .map_err(|e| UpdateError::Signature(format!("vendor key {}: {e}", key_path.display())))?;
    if a.is_pin() {
        return Err(UpdateError::Signature(
            "this device requires signed artifacts; a pinned URL without sha256 cannot be signed"
                .into(),
        ));
    }
    verify_signature(&keys, a, super::this_target())
}

/// Whether the device has a vendor key file: then every piece of authority from outside
/// must be signed by it (an unreadable or malformed file counts: it refuses, never waives).
pub(crate) fn vendor_key_present(paths: &Paths) -> bool {
    !matches!(
        std::fs::symlink_metadata(paths.signing_key()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound
    )
}

/// The largest vendor key file read: a few keys, not a stream.
pub const MAX_KEY_FILE: u64 = 4096;
/// At most this many keys in one key file (two during a rotation; some room to spare).
pub(crate) const MAX_KEYS: usize = 4;

/// `path`'s content, refused when larger than `limit` bytes.
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    File::open(path)?.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(out)
}

/// Why a vendor key file gives no keys (the caller names the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFileError {
    /// Neither 32 raw bytes nor text.
    NotText,
    /// This line (from 1) is not a key.
    BadLine(usize),
    /// Only empty lines and comments.
    NoKey,
    TooMany(usize),
}

impl fmt::Display for KeyFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const WHAT: &str = "not an ed25519 public key (32 bytes raw, hex or base64, one a line)";
        match self {
            KeyFileError::NotText => f.write_str(WHAT),
            KeyFileError::BadLine(n) => write!(f, "line {n}: {WHAT}"),
            KeyFileError::NoKey => write!(f, "no key: {WHAT}"),
            KeyFileError::TooMany(n) => write!(f, "{n} keys; at most {MAX_KEYS}"),
        }
    }
}

impl std::error::Error for KeyFileError {}

/// The keys of a vendor key file (`/etc/svc-signing.pub`): 32 raw bytes, or text with one
/// key a line (64 hex digits or base64); empty lines and `#` comments are skipped. Two
/// keys are accepted during a rotation (docs/updates.md), at most [`MAX_KEYS`].
pub fn parse_public_keys(bytes: &[u8]) -> Result<Vec<Vec<u8>>, KeyFileError> {
    // 32 bytes are the raw key, whatever they look like: no text key is 32 characters long.
    if bytes.len() == 32 {
        return Ok(vec![bytes.to_vec()]);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| KeyFileError::NotText)?;
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = decode_key(line.as_bytes(), 32).ok_or(KeyFileError::BadLine(n + 1))?;
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(KeyFileError::NoKey);
    }
    if keys.len() > MAX_KEYS {
        return Err(KeyFileError::TooMany(keys.len()));
    }
    Ok(keys)
}

/// The one signature check, on devices and in the release tool: `a.signature` is a valid
/// ed25519 signature by one of `keys` over [`Artifact::signed_message`] for `target`.
pub fn verify_signature(keys: &[Vec<u8>], a: &Artifact, target: &str) -> Result<(), UpdateError> {
    let sig_text = a
        .signature
        .as_deref()
        .ok_or_else(|| UpdateError::Signature("artifact has no signature".into()))?;
    let sig = decode_key(sig_text.as_bytes(), 64).ok_or_else(|| {
        UpdateError::Signature("signature is not 64 bytes of hex or base64".into())
    })?;
    let alg = ed25519()
        .ok_or_else(|| UpdateError::Signature("no ed25519 in the crypto provider".into()))?;
    let message = a.signed_message(target);
    if keys
        .iter()
        .any(|key| alg.verify_signature(key, &message, &sig).is_ok())
    {
        return Ok(());
    }
    Err(UpdateError::Signature(format!(
        "bad signature for {} {} ({target}): not made by the vendor key{} over this name, version, sha256 and size",
        a.name,
        a.version,
        if keys.len() > 1 { "s" } else { "" }
    )))
}

/// Raw bytes of length `len`, or the same as hex or base64 text (surrounding space ignored).
pub(crate) fn decode_key(bytes: &[u8], len: usize) -> Option<Vec<u8>> {
    if bytes.len() == len {
        return Some(bytes.to_vec());
    }
    let text = std::str::from_utf8(bytes).ok()?.trim();
    if text.len() == 2 * len {
        if let Some(v) = unhex(text) {
            return Some(v);
        }
    }
    base64_decode(text).filter(|v| v.len() == len)
}

/// `e_machine` of this build's architecture.
pub fn this_machine() -> u16 {
    machine_of_arch(std::env::consts::ARCH)
}

/// ELF magic, this machine's class (64/32-bit), little-endian, executable (ET_EXEC or a
/// PIE's ET_DYN), `e_machine` of this architecture.
pub(crate) fn check_elf(file: &Path) -> Result<(), UpdateError> {
    let mut h = [0u8; 20];
    let mut f = File::open(file).map_err(io_err(format!("opening {}", file.display())))?;
    let mut got = 0;
    while got < h.len() {
        let n = f
            .read(&mut h[got..])
            .map_err(io_err(format!("reading {}", file.display())))?;
        if n == 0 {
            break;
        }
        got += n;
    }
    check_elf_header(&h[..got])
}

pub(crate) fn check_elf_header(h: &[u8]) -> Result<(), UpdateError> {
    check_elf_header_for(h, this_machine())
}

/// `e_machine` of a Rust target arch name (`x86_64`, `aarch64`, ...), 0 when unknown.
pub fn machine_of_arch(arch: &str) -> u16 {
    match arch {
        "x86_64" => 62,
        "aarch64" => 183,
        "arm" => 40,
        "riscv64" => 243,
        "x86" => 3,
        _ => 0,
    }
}

/// The Rust target arch name of an `e_machine`, when it is one of ours.
pub fn arch_of_machine(machine: u16) -> Option<&'static str> {
    ["x86_64", "aarch64", "arm", "riscv64", "x86"]
        .into_iter()
        .find(|a| machine_of_arch(a) == machine)
}

/// The header checks of [`check_elf`] for a device whose `e_machine` is `machine` (the
/// release tool checks a binary for the target it is signed for).
pub fn check_elf_header_for(h: &[u8], machine: u16) -> Result<(), UpdateError> {
    if h.len() < 20 || &h[..4] != b"\x7fELF" {
        return Err(UpdateError::NotElf("no ELF magic".into()));
    }
    // 32-bit: arm (40) and x86 (3); every other machine of ours is 64-bit.
    let want_class = if machine == 40 || machine == 3 { 1 } else { 2 };
    if h[4] != want_class {
        return Err(UpdateError::NotElf(format!(
            "ELF class {} (the target needs {want_class})",
            h[4]
        )));
    }
    if h[5] != 1 {
        return Err(UpdateError::NotElf("not little-endian".into()));
    }
    let e_type = u16::from_le_bytes([h[16], h[17]]);
    if e_type != 2 && e_type != 3 {
        return Err(UpdateError::NotElf(format!(
            "e_type {e_type} is not an executable"
        )));
    }
    let actual = u16::from_le_bytes([h[18], h[19]]);
    if actual != machine {
        return Err(UpdateError::WrongArch {
            expected: machine,
            actual,
        });
    }
    Ok(())
}

/// What a binary says about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct VersionInfo {
    pub binary_name: String,
    pub version: String,
    #[serde(default)]
    pub target: String,
}

/// The ELF section that carries a build's release stamp: what `version --json` says, as
/// bytes the release tool reads without running the binary (issue 40: the host that holds
/// the private key never executes what it signs).
pub const STAMP_SECTION: &str = ".svc_release";
/// The stamp's first word; the format is `svc-release-stamp/1 binary_name=N version=V
/// target=T`, one line, NUL padding allowed after it. Written by `svc::release_stamp!`
/// (`src/sys.rs`).
const STAMP_MAGIC: &str = "svc-release-stamp/1";

/// Why a binary's release stamp cannot be read (the caller names the binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StampError {
    NotElf64,
    /// The section table or a section runs past the file, or is malformed.
    Sections,
    TwoStamps,
    /// The section is there but does not hold a stamp.
    NotAStamp,
}

impl fmt::Display for StampError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StampError::NotElf64 => f.write_str("not a 64-bit little-endian ELF file"),
            StampError::Sections => f.write_str("the ELF section table is truncated or malformed"),
            StampError::TwoStamps => write!(f, "two {STAMP_SECTION} sections"),
            StampError::NotAStamp => {
                write!(f, "the {STAMP_SECTION} section is not a release stamp")
            }
        }
    }
}

impl std::error::Error for StampError {}

/// The release stamp of an ELF file's bytes, read from its section table, never by running
/// it. `Ok(None)`: the file has no [`STAMP_SECTION`] (not an svc build, or an old one).
/// Only 64-bit little-endian ELF (x86_64, aarch64: what releases are made for).
pub fn release_stamp(elf: &[u8]) -> Result<Option<VersionInfo>, StampError> {
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    let truncated = StampError::Sections;
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return Err(StampError::NotElf64);
    }
    let shoff = u64_at(0x28).ok_or(truncated)? as usize;
    let shentsize = u16_at(0x3a).ok_or(truncated)? as usize;
    let shnum = u16_at(0x3c).ok_or(truncated)? as usize;
    let shstrndx = u16_at(0x3e).ok_or(truncated)? as usize;
    if shnum == 0 {
        return Ok(None);
    }
    if shentsize < 64 || shstrndx >= shnum {
        return Err(truncated);
    }
    // (name offset, file offset, size) of section `i`.
    let section = |i: usize| -> Option<(usize, usize, usize)> {
        let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((
            u32_at(h)? as usize,
            usize::try_from(u64_at(h + 24)?).ok()?,
            usize::try_from(u64_at(h + 32)?).ok()?,
        ))
    };
    let bytes_of = |off: usize, size: usize| elf.get(off..off.checked_add(size)?);
    let (_, str_off, str_size) = section(shstrndx).ok_or(truncated)?;
    let names = bytes_of(str_off, str_size).ok_or(truncated)?;
    let mut found: Option<&[u8]> = None;
    for i in 0..shnum {
        let (name, off, size) = section(i).ok_or(truncated)?;
        let name = names.get(name..).unwrap_or_default();
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if name == STAMP_SECTION.as_bytes() {
            if found.is_some() {
                return Err(StampError::TwoStamps);
            }
            found = Some(bytes_of(off, size).ok_or(truncated)?);
        }
    }
    let Some(raw) = found else {
        return Ok(None);
    };
    parse_stamp(raw).map(Some)
}

fn parse_stamp(raw: &[u8]) -> Result<VersionInfo, StampError> {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let bad = StampError::NotAStamp;
    let text = std::str::from_utf8(&raw[..end]).map_err(|_| bad)?;
    let mut words = text.trim_end_matches('\n').split(' ');
    if words.next() != Some(STAMP_MAGIC) {
        return Err(bad);
    }
    let (mut name, mut version, mut target) = (None, None, None);
    for w in words {
        let (k, v) = w.split_once('=').ok_or(bad)?;
        let slot = match k {
            "binary_name" => &mut name,
            "version" => &mut version,
            "target" => &mut target,
            _ => continue,
        };
        if slot.replace(v.to_string()).is_some() || v.is_empty() {
            return Err(bad);
        }
    }
    match (name, version, target) {
        (Some(binary_name), Some(version), Some(target)) => Ok(VersionInfo {
            binary_name,
            version,
            target,
        }),
        _ => Err(bad),
    }
}

/// Runs `<file> version --json` (bounded by `timeout`) and requires
/// `binary_name == expected_name`.
pub fn version_check(
    file: &Path,
    expected_name: &str,
    timeout: Duration,
) -> Result<VersionInfo, UpdateError> {
    let info = version_info(file, timeout)?;
    if info.binary_name != expected_name {
        return Err(UpdateError::VersionCheck(format!(
            "binary_name is {:?}, expected {expected_name:?}",
            info.binary_name
        )));
    }
    Ok(info)
}

/// What `<file> version --json` says (bounded by `timeout`).
pub(crate) fn version_info(file: &Path, timeout: Duration) -> Result<VersionInfo, UpdateError> {
    let vc = |m: String| UpdateError::VersionCheck(m);
    let mut cmd = Command::new(file);
    cmd.args(["version", "--json"]);
    let out = crate::process::run(cmd, timeout).map_err(|e| {
        vc(match e {
            crate::process::RunError::TimedOut(_) => {
                format!("`version --json` did not finish within {timeout:?}")
            }
            e => format!("{}: {e}", file.display()),
        })
    })?;
    if !out.success() {
        return Err(vc(format!("`version --json` exited with {}", out.status)));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| vc(format!("`version --json` printed no valid JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::base64_encode;

    fn header(class: u8, data: u8, e_type: u16, machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = data;
        h[16..18].copy_from_slice(&e_type.to_le_bytes());
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h
    }

    #[test]
    fn elf_header_checks() {
        let m = this_machine();
        assert!(check_elf_header(&header(2, 1, 3, m)).is_ok());
        assert!(check_elf_header(&header(2, 1, 2, m)).is_ok());
        assert!(matches!(
            check_elf_header(b"#!/bin/sh\n"),
            Err(UpdateError::NotElf(_))
        ));
        assert!(matches!(
            check_elf_header(&header(1, 1, 3, m)),
            Err(UpdateError::NotElf(_))
        ));
        assert!(matches!(
            check_elf_header(&header(2, 2, 3, m)),
            Err(UpdateError::NotElf(_))
        ));
        assert!(matches!(
            check_elf_header(&header(2, 1, 1, m)),
            Err(UpdateError::NotElf(_))
        ));
        let other = if m == 62 { 183 } else { 62 };
        assert!(matches!(
            check_elf_header(&header(2, 1, 3, other)),
            Err(UpdateError::WrongArch { .. })
        ));
    }

    #[test]
    fn a_build_for_the_other_machine_is_refused_naming_both() {
        // x86_64 offered to an arm64 device and the reverse (issue 42).
        for (device, offered) in [(183u16, 62u16), (62, 183)] {
            let e = check_elf_header_for(&header(2, 1, 3, offered), device).unwrap_err();
            assert!(
                matches!(e, UpdateError::WrongArch { expected, actual } if expected == device && actual == offered)
            );
            let msg = e.to_string();
            for m in [device, offered] {
                let name = arch_of_machine(m).unwrap();
                assert!(
                    msg.contains(&format!("({name})")),
                    "{msg:?} does not name {name}"
                );
            }
        }
    }

    #[test]
    fn this_binary_is_a_valid_elf() {
        check_elf(&std::env::current_exe().unwrap()).unwrap();
    }

    #[test]
    fn key_and_signature_encodings() {
        let raw: Vec<u8> = (0u8..32).collect();
        assert_eq!(decode_key(&raw, 32).unwrap(), raw);
        assert_eq!(decode_key(hex(&raw).as_bytes(), 32).unwrap(), raw);
        let b64 = base64_encode(&raw);
        assert_eq!(decode_key(format!("{b64}\n").as_bytes(), 32).unwrap(), raw);
        assert!(decode_key(b"short", 32).is_none());
    }

    #[test]
    fn key_files_hold_one_key_or_a_few() {
        let k1: Vec<u8> = (0u8..32).collect();
        let k2: Vec<u8> = (100u8..132).collect();
        // Raw 32 bytes, one hex line, base64 lines with a comment and blank lines.
        assert_eq!(parse_public_keys(&k1).unwrap(), vec![k1.clone()]);
        assert_eq!(
            parse_public_keys(format!("{}\n", hex(&k1)).as_bytes()).unwrap(),
            vec![k1.clone()]
        );
        let two = format!(
            "# rotation: old key first\n{}\n\n{}\n",
            base64_encode(&k1),
            hex(&k2)
        );
        assert_eq!(
            parse_public_keys(two.as_bytes()).unwrap(),
            vec![k1.clone(), k2]
        );
        // Malformed lines, an empty file and too many keys refuse (never "unsigned").
        let bad = format!("{}\nnot-a-key\n", hex(&k1));
        assert_eq!(
            parse_public_keys(bad.as_bytes()),
            Err(KeyFileError::BadLine(2))
        );
        assert_eq!(parse_public_keys(b"# nothing\n"), Err(KeyFileError::NoKey));
        let many = format!("{}\n", hex(&k1)).repeat(MAX_KEYS + 1);
        assert_eq!(
            parse_public_keys(many.as_bytes()),
            Err(KeyFileError::TooMany(MAX_KEYS + 1))
        );
    }

    crate::release_stamp!(TEST_STAMP, "svc-agent");

    #[test]
    fn the_release_stamp_is_read_from_the_section_and_says_what_version_json_says() {
        // This test binary carries one (the macro above); read it from our own file.
        std::hint::black_box(&TEST_STAMP);
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let info = release_stamp(&me).unwrap().expect("a stamp");
        // The values `version --json` prints (tests/it/release_tool.rs compares the real
        // builds' output).
        assert_eq!(info.binary_name, "svc-agent");
        assert_eq!(info.version, env!("SVC_VERSION"));
        assert_eq!(info.target, env!("SVC_TARGET"));
        // Malformed stamps are errors, a missing one is None, junk is no ELF.
        assert_eq!(
            parse_stamp(b"svc-release-stamp/1 binary_name=a version=1\0\0"),
            Err(StampError::NotAStamp)
        );
        assert!(parse_stamp(b"other binary_name=a version=1 target=t").is_err());
        assert!(
            parse_stamp(b"svc-release-stamp/1 binary_name=a version=1 version=2 target=t").is_err()
        );
        assert_eq!(
            parse_stamp(b"svc-release-stamp/1 binary_name=a version=1 target=t\n\0\0")
                .unwrap()
                .version,
            "1"
        );
        assert!(release_stamp(b"#!/bin/sh\n").is_err());
        let mut renamed = me.clone();
        let at = renamed
            .windows(STAMP_SECTION.len() + 1)
            .rposition(|w| w == b".svc_release\0")
            .unwrap();
        renamed[at + 1] = b'X';
        assert_eq!(release_stamp(&renamed).unwrap(), None);
        // A section table pointing past the end of the file.
        let mut cut = me.clone();
        cut[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(release_stamp(&cut).is_err());
    }

    #[test]
    fn ed25519_is_available() {
        assert!(ed25519().is_some());
    }
}
