//! svc-release, the vendor's release tool (host side; never installed on devices): an
//! ed25519 key pair, signatures over the message devices check (docs/updates.md), and
//! releases published into a `file://` management directory (docs/releases.md).
//!
//! The signature check is the device's own (`svc::update::verify::verify_signature`), so a
//! release the tool verifies is one a device accepts.
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use svc::fsutil::Dir;
use svc::update::delta::Format;
use svc::update::verify;
use svc::update::{Artifact, UpdateError};

const USAGE: &str = "\
usage: svc-release COMMAND [options]

  keygen KEY                   make an ed25519 key pair: KEY (private, PKCS#8 PEM, mode 0600)
                               and KEY.pub (the public key, the format /etc/svc-signing.pub takes)
  pubkey KEY                   print the public key of the private key KEY
  sign --key KEY BINARY        print the signature (base64) of BINARY for its target
  targets --key KEY [--url-prefix P] [--delta-from OLD... --out DIR] BINARY...
                               print the `targets` JSON of a poll answer for BINARY... (for an
                               HTTPS app; each url is P<sha256>, P defaults to artifacts/);
                               with --delta-from, a delta from each OLD binary of the same name
                               is written to DIR/<its sha256> and named in the target's `deltas`
  delta [--format F] OLD NEW OUT
                               write the delta that makes NEW from OLD to OUT; F: svc-delta-v1
                               (bsdiff + zlib, the default) or svc-delta-v2 (bsdiff + LZMA)
  verify --pub PUB --signature SIG BINARY
                               check a signature of BINARY by PUB (a key file, 1 or 2 keys)
  verify --pub PUB DIR         check every target of the management directory DIR
  init DIR                     make DIR a management directory (an empty poll.json)
  swu --key KEY [--out FILE] [--config CONFIG.json --config-version V] [BINARY...]
                               write an SWUpdate image (.swu: CPIO newc, sw-description first)
                               holding BINARY... and/or the machine config, each with its sha256
                               and signature in sw-description (docs/hawkbit.md); FILE defaults
                               to <name>-<version>-<arch>.swu; a config alone needs --target
  publish --key KEY [--prune] [--config CONFIG.json [--config-version V]]
          [--os-bundle BUNDLE.raucb --os-version V] DIR [BINARY...]
                               copy BINARY... into DIR/artifacts/<sha256>, write their targets
                               (version, sha256, size, signature) into DIR/poll.json atomically;
                               the machine config (--config, else poll.json's own `config`) is
                               validated, signed and published the same way as `signed_config`
                               (devices with a vendor key take no other); --prune removes the
                               artifacts nothing names any more; --os-bundle publishes an OS
                               image (a RAUC bundle) as `targets.os`, format rauc-bundle, signed
                               under the name `os` for the binaries' target or --target;
                               --deltas N (default 3, 0: none) publishes beside each binary a
                               delta from each of the N releases published before it whose
                               file is still in DIR/artifacts (docs/releases.md, *Deltas*);
                               an svc-delta-v2 (LZMA) beside each v1, when it is smaller

  BINARY options: --target x86_64|aarch64 (default: the binary's own ELF architecture; it must
  match), --name svc-agent|svc-server and --version V (default: the binary's release stamp,
  read from its bytes: a binary is never run; required for a binary without a stamp).
";

/// Largest binary the tool reads (svc binaries are a few MiB).
const MAX_BINARY: u64 = 512 * 1024 * 1024;
/// Largest private key file read.
const MAX_PRIVATE_KEY: u64 = 16 * 1024;
/// Same limit as the agent's for a poll answer.
const MAX_ANSWER: u64 = 8 * 1024 * 1024;

// Text errors on purpose: this is the outermost edge of a host tool; every error ends as one
// line on stderr and an exit code, and nothing decides on its kind.
type R<T> = Result<T, String>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => {}
        Err(Failure::Usage(m)) => {
            eprintln!("svc-release: {m}\n\n{USAGE}");
            std::process::exit(2);
        }
        Err(Failure::Error(m)) => {
            eprintln!("svc-release: error: {m}");
            std::process::exit(1);
        }
    }
}

enum Failure {
    Usage(String),
    Error(String),
}

impl From<String> for Failure {
    fn from(m: String) -> Failure {
        Failure::Error(m)
    }
}

#[derive(Default)]
struct Opts {
    key: Option<PathBuf>,
    public: Option<PathBuf>,
    target: Option<String>,
    name: Option<String>,
    version: Option<String>,
    signature: Option<String>,
    url_prefix: Option<String>,
    out: Option<PathBuf>,
    config: Option<PathBuf>,
    config_version: Option<String>,
    os_bundle: Option<PathBuf>,
    os_version: Option<String>,
    prune: bool,
    /// `--deltas N`: deltas from this many earlier releases (`publish`).
    deltas: Option<usize>,
    /// `--delta-from OLD` (`targets`), repeatable.
    delta_from: Vec<PathBuf>,
    /// `--format F` (`delta`).
    format: Option<String>,
    positional: Vec<String>,
}

fn parse(args: &[String]) -> Result<Opts, Failure> {
    let mut o = Opts::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| Failure::Usage(format!("{flag} needs a value")))
        };
        match a.as_str() {
            "--key" => o.key = Some(value(a)?.into()),
            "--pub" => o.public = Some(value(a)?.into()),
            "--target" => o.target = Some(value(a)?),
            "--name" => o.name = Some(value(a)?),
            "--version" => o.version = Some(value(a)?),
            "--signature" => o.signature = Some(value(a)?),
            "--url-prefix" => o.url_prefix = Some(value(a)?),
            "--out" => o.out = Some(value(a)?.into()),
            "--config" => o.config = Some(value(a)?.into()),
            "--config-version" => o.config_version = Some(value(a)?),
            "--os-bundle" => o.os_bundle = Some(value(a)?.into()),
            "--os-version" => o.os_version = Some(value(a)?),
            "--prune" => o.prune = true,
            "--deltas" => {
                let v = value(a)?;
                o.deltas = Some(v.parse().map_err(|_| {
                    Failure::Usage(format!("--deltas {v:?}: a number of releases"))
                })?);
            }
            "--delta-from" => o.delta_from.push(value(a)?.into()),
            "--format" => o.format = Some(value(a)?),
            "-h" | "--help" => return Err(Failure::Usage("help".into())),
            s if s.starts_with("--") => return Err(Failure::Usage(format!("unknown option {s}"))),
            s => o.positional.push(s.to_string()),
        }
    }
    Ok(o)
}

fn run(args: &[String]) -> Result<(), Failure> {
    let Some((cmd, rest)) = args.split_first() else {
        return Err(Failure::Usage("no command".into()));
    };
    let o = parse(rest)?;
    let need = |n: usize, what: &str| -> Result<(), Failure> {
        if o.positional.len() < n || (n == 1 && o.positional.len() != 1) {
            return Err(Failure::Usage(format!("{cmd} needs {what}")));
        }
        Ok(())
    };
    let key_opt = || {
        o.key
            .clone()
            .ok_or_else(|| Failure::Usage(format!("{cmd} needs --key KEY")))
    };
    match cmd.as_str() {
        "keygen" => {
            need(1, "the KEY file to write")?;
            keygen(Path::new(&o.positional[0]))?;
        }
        "pubkey" => {
            need(1, "the private KEY file")?;
            let kp = load_private_key(Path::new(&o.positional[0]))?;
            println!("{}", svc::encoding::base64_encode(kp.public_key().as_ref()));
        }
        "sign" => {
            need(1, "one BINARY")?;
            let kp = load_private_key(&key_opt()?)?;
            let rel = Release::read(Path::new(&o.positional[0]), &o)?.signed(&kp)?;
            println!("{}", rel.artifact.signature.unwrap_or_default());
        }
        "targets" => {
            if o.positional.is_empty() {
                return Err(Failure::Usage("targets needs one BINARY or more".into()));
            }
            let kp = load_private_key(&key_opt()?)?;
            let rels = read_releases(&o.positional, &o, &kp)?;
            let prefix = o.url_prefix.clone().unwrap_or_else(|| "artifacts/".into());
            let mut targets = Map::new();
            let olds = read_delta_bases(&o)?;
            for r in &rels {
                let mut t = r.target_json(&prefix);
                let mut deltas = Vec::new();
                for (path, old) in olds
                    .iter()
                    .filter(|(_, old)| old.artifact.name == r.artifact.name)
                {
                    let dir = o.out.as_deref().ok_or_else(|| {
                        Failure::Usage("--delta-from needs --out DIR for the delta files".into())
                    })?;
                    let made = Delta::make(&old.bytes, old.sha256(), &r.bytes)?;
                    if made.is_empty() {
                        eprintln!(
                            "svc-release: no delta from {}: it would not be smaller",
                            path.display()
                        );
                    }
                    for d in made {
                        let file = dir.join(&d.sha256);
                        svc::fsutil::atomic_write(&file, &d.bytes, 0o644)
                            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
                        deltas.push(d.json(&prefix));
                    }
                }
                if !deltas.is_empty() {
                    t["deltas"] = Value::Array(deltas);
                }
                targets.insert(r.artifact.name.clone(), t);
            }
            let text =
                serde_json::to_string_pretty(&Value::Object(targets)).map_err(|e| e.to_string())?;
            println!("{text}");
        }
        "verify" => {
            let public = o
                .public
                .clone()
                .ok_or_else(|| Failure::Usage("verify needs --pub PUBLIC-KEY-FILE".into()))?;
            need(1, "a BINARY (with --signature) or a management DIR")?;
            let keys = load_public_keys(&public)?;
            let path = Path::new(&o.positional[0]);
            if path.is_dir() {
                verify_dir(path, &keys, o.target.as_deref())?;
            } else {
                let sig = o
                    .signature
                    .clone()
                    .ok_or_else(|| Failure::Usage("verify BINARY needs --signature SIG".into()))?;
                let mut rel = Release::read(path, &o)?;
                rel.artifact.signature = Some(sig);
                verify::verify_signature(&keys, &rel.artifact, &rel.target)
                    .map_err(|e| e.to_string())?;
                println!(
                    "ok: {} {} ({}) signed by {}",
                    rel.artifact.name,
                    rel.artifact.version,
                    rel.target,
                    public.display()
                );
            }
        }
        "delta" => delta(&o)?,
        "init" => {
            need(1, "the DIR")?;
            init(Path::new(&o.positional[0]))?;
        }
        "publish" => {
            if o.positional.is_empty() {
                return Err(Failure::Usage(
                    "publish needs DIR, and one BINARY or more or a config".into(),
                ));
            }
            let kp = load_private_key(&key_opt()?)?;
            publish(&o, &kp)?;
        }
        "swu" => {
            if o.positional.is_empty() && o.config.is_none() {
                return Err(Failure::Usage(
                    "swu needs one BINARY or more, or --config".into(),
                ));
            }
            let kp = load_private_key(&key_opt()?)?;
            let out = swu(&o, &kp)?;
            println!("{}", out.display());
        }
        "-h" | "--help" | "help" => {
            print!("{USAGE}");
        }
        other => return Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
    Ok(())
}

/// `delta OLD NEW OUT [--format F]`: one delta file, v1 unless asked.
fn delta(o: &Opts) -> Result<(), Failure> {
    if o.positional.len() != 3 {
        return Err(Failure::Usage("delta needs OLD NEW OUT".into()));
    }
    let read = |p: &String| {
        verify::read_bounded(Path::new(p), MAX_BINARY).map_err(|e| format!("{p}: {e}"))
    };
    let (old, new) = (read(&o.positional[0])?, read(&o.positional[1])?);
    // v1 unless asked: the format every agent with delta support reads.
    let format = match o.format.as_deref() {
        None => Format::V1,
        Some(f) => Format::from_offer(Some(f)).ok_or_else(|| {
            Failure::Usage(format!("--format {f:?}: svc-delta-v1 or svc-delta-v2"))
        })?,
    };
    let d = svc::update::delta::make(&old, &new, format).map_err(|e| e.to_string())?;
    svc::fsutil::atomic_write(Path::new(&o.positional[2]), &d, 0o644)
        .map_err(|e| format!("cannot write {}: {e}", o.positional[2]))?;
    println!(
        "{}: {} bytes ({:.1} % of {}), sha256 {}",
        format.offer_name().unwrap_or("svc-delta-v1"),
        d.len(),
        100.0 * d.len() as f64 / new.len().max(1) as f64,
        new.len(),
        hex(&Sha256::digest(&d))
    );
    Ok(())
}

// ---- keys ----

fn keygen(key: &Path) -> R<()> {
    let pub_path = pub_path_of(key);
    for p in [key, pub_path.as_path()] {
        if p.symlink_metadata().is_ok() {
            return Err(format!(
                "{} exists; not overwritten (a key is made once; see docs/releases.md for a rotation)",
                p.display()
            ));
        }
    }
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let doc = Ed25519KeyPair::generate_pkcs8v1(&rng)
        .map_err(|_| "could not generate an ed25519 key".to_string())?;
    let kp = Ed25519KeyPair::from_pkcs8(doc.as_ref())
        .map_err(|e| format!("generated key rejected: {e}"))?;
    let pem = pem_encode("PRIVATE KEY", doc.as_ref());
    // 0600 from the first byte, never widened; never through a name someone planted
    // (a link, a FIFO) and never over anything; whole or not at all after a crash.
    svc::fsutil::create_new(key, pem.as_bytes(), 0o600)
        .map_err(|e| format!("cannot create {}: {e}", key.display()))?;
    let public = format!(
        "{}\n",
        svc::encoding::base64_encode(kp.public_key().as_ref())
    );
    svc::fsutil::create_new(&pub_path, public.as_bytes(), 0o644)
        .map_err(|e| format!("cannot create {}: {e}", pub_path.display()))?;
    eprintln!(
        "svc-release: wrote {} (private, keep it off devices) and {} (install it as /etc/svc-signing.pub)",
        key.display(),
        pub_path.display()
    );
    print!("{public}");
    Ok(())
}

fn pub_path_of(key: &Path) -> PathBuf {
    let mut s = key.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = svc::encoding::base64_encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn load_private_key(path: &Path) -> R<Ed25519KeyPair> {
    let bytes = verify::read_bounded(path, MAX_PRIVATE_KEY).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "key {}: no such file (make one with `svc-release keygen {}`)",
            path.display(),
            path.display()
        ),
        _ => format!("key {}: cannot read: {e}", path.display()),
    })?;
    let not_ed = |kind: &str| {
        format!(
            "key {} is {kind}, not an ed25519 private key (make one with `svc-release keygen`)",
            path.display()
        )
    };
    let kp = match PrivateKeyDer::from_pem_slice(&bytes) {
        Ok(PrivateKeyDer::Pkcs8(der)) => Ed25519KeyPair::from_pkcs8(der.secret_pkcs8_der())
            .map_err(|_| not_ed("a PKCS#8 key of another type (RSA, EC, ...)")),
        Ok(PrivateKeyDer::Pkcs1(_)) => Err(not_ed("an RSA key")),
        Ok(PrivateKeyDer::Sec1(_)) => Err(not_ed("an EC key")),
        Ok(_) => Err(not_ed("a key of an unknown type")),
        Err(_) if verify::parse_public_keys(&bytes).is_ok() => Err(format!(
            "key {} is a public key; signing needs the private key (the file without .pub)",
            path.display()
        )),
        Err(_) => Err(not_ed("not a PEM private key")),
    }?;
    if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
        eprintln!(
            "svc-release: warning: private key {} is readable by others (chmod 600 it)",
            path.display()
        );
    }
    Ok(kp)
}

fn load_public_keys(path: &Path) -> R<Vec<Vec<u8>>> {
    let bytes = verify::read_bounded(path, verify::MAX_KEY_FILE)
        .map_err(|e| format!("public key {}: cannot read: {e}", path.display()))?;
    if PrivateKeyDer::from_pem_slice(&bytes).is_ok() {
        return Err(format!(
            "{} is a private key; verify with the public key (KEY.pub)",
            path.display()
        ));
    }
    verify::parse_public_keys(&bytes).map_err(|e| format!("public key {}: {e}", path.display()))
}

// ---- binaries ----

/// A binary read and checked for its target: the artifact as devices see it.
struct Release {
    artifact: Artifact,
    target: String,
    bytes: Vec<u8>,
}

impl Release {
    /// Reads `path` and checks it is an executable ELF of the target (`--target`, or its own
    /// architecture), names it (its release stamp, or `--name`/`--version`). Never runs it.
    fn read(path: &Path, o: &Opts) -> R<Release> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| format!("binary {shown}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("binary {shown} is not a regular file"));
        }
        let bytes = verify::read_bounded(path, MAX_BINARY)
            .map_err(|e| format!("binary {shown}: cannot read: {e}"))?;
        let header = &bytes[..bytes.len().min(20)];
        if header.len() < 20 || &header[..4] != b"\x7fELF" {
            return Err(format!("binary {shown} is not an ELF executable"));
        }
        let machine = u16::from_le_bytes([header[18], header[19]]);
        let own_arch = verify::arch_of_machine(machine);
        let target = match (&o.target, own_arch) {
            (Some(t), _) => {
                if !["x86_64", "aarch64"].contains(&t.as_str()) {
                    return Err(format!("--target {t:?}: x86_64 or aarch64"));
                }
                t.clone()
            }
            (None, Some(a)) => a.to_string(),
            (None, None) => {
                return Err(format!(
                    "binary {shown}: ELF e_machine {machine} is no architecture svc-agent runs on"
                ))
            }
        };
        verify::check_elf_header_for(header, verify::machine_of_arch(&target)).map_err(|e| {
            match e {
                UpdateError::WrongArch { .. } => format!(
                    "binary {shown} is built for {} (ELF e_machine {machine}), not for the target {target}",
                    own_arch.unwrap_or("another architecture")
                ),
                e => format!("binary {shown}: {e}"),
            }
        })?;
        let (name, version) = identify(path, &bytes, &target, o)?;
        if !["svc-agent", "svc-server"].contains(&name.as_str()) {
            return Err(format!(
                "binary {shown} is {name:?}; releases are of svc-agent or svc-server"
            ));
        }
        if version.is_empty()
            || !version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
        {
            return Err(format!(
                "version {version:?}: use only letters, digits and . _ + -"
            ));
        }
        let artifact = unsigned_artifact(name, version, &bytes);
        Ok(Release {
            artifact,
            target,
            bytes,
        })
    }

    /// Signs, then checks the signature with the device's own check.
    fn signed(mut self, kp: &Ed25519KeyPair) -> R<Release> {
        let sig = kp.sign(&self.artifact.signed_message(&self.target));
        self.artifact.signature = Some(svc::encoding::base64_encode(sig.as_ref()));
        verify::verify_signature(
            &[kp.public_key().as_ref().to_vec()],
            &self.artifact,
            &self.target,
        )
        .map_err(|e| format!("self-check of the new signature failed: {e}"))?;
        Ok(self)
    }

    fn sha256(&self) -> &str {
        self.artifact.sha256.as_deref().unwrap_or("")
    }

    fn target_json(&self, prefix: &str) -> Value {
        json!({
            "version": self.artifact.version,
            "url": format!("{prefix}{}", self.sha256()),
            "sha256": self.sha256(),
            "size": self.artifact.size,
            "signature": self.artifact.signature,
        })
    }
}

/// Name and version from the binary's release stamp (the `.svc_release` section every svc
/// build carries: what its `version --json` says), read from its bytes: this process holds
/// the private key and never runs what it signs. `--name`/`--version`, when given, must agree
/// with the stamp; they are required for a binary without one.
fn identify(path: &Path, bytes: &[u8], target: &str, o: &Opts) -> R<(String, String)> {
    let shown = path.display();
    let stamp = verify::release_stamp(bytes).map_err(|e| format!("binary {shown}: {e}"))?;
    let Some(info) = stamp else {
        return match (&o.name, &o.version) {
            (Some(n), Some(v)) => Ok((n.clone(), v.clone())),
            _ => Err(format!(
                "binary {shown} carries no release stamp (the {} section of svc builds); pass --name and --version",
                verify::STAMP_SECTION
            )),
        };
    };
    // The stamp's target triple begins with the architecture (`x86_64-unknown-linux-musl`).
    let stamped_arch = info.target.split('-').next().unwrap_or_default();
    if stamped_arch != target {
        return Err(format!(
            "binary {shown}: its release stamp says target {}, the ELF header and the target are {target} (devices would refuse it)",
            info.target
        ));
    }
    for (flag, given, own) in [
        ("--name", &o.name, &info.binary_name),
        ("--version", &o.version, &info.version),
    ] {
        if let Some(g) = given {
            if g != own {
                return Err(format!(
                    "binary {shown} says it is {own:?}; {flag} {g:?} disagrees (devices would refuse it)"
                ));
            }
        }
    }
    Ok((info.binary_name, info.version))
}

fn read_releases(paths: &[String], o: &Opts, kp: &Ed25519KeyPair) -> R<Vec<Release>> {
    let mut out: Vec<Release> = Vec::new();
    for p in paths {
        let r = Release::read(Path::new(p), o)?.signed(kp)?;
        if out.iter().any(|x| x.artifact.name == r.artifact.name) {
            return Err(format!("two binaries of {}", r.artifact.name));
        }
        if let Some(first) = out.first() {
            if first.target != r.target {
                return Err(format!(
                    "{} is for {} and {} for {}: one answer serves one architecture",
                    paths[0], first.target, p, r.target
                ));
            }
        }
        out.push(r);
    }
    Ok(out)
}

/// A delta from an earlier release to a new one, as published.
struct Delta {
    from: String,
    sha256: String,
    bytes: Vec<u8>,
    format: Format,
}

impl Delta {
    /// The deltas from `old` (whose sha256 is `from`) to `new`, each smaller than `new`
    /// itself (else a device would rather download the full artifact): svc-delta-v1 first,
    /// which every agent with delta support reads and agents before v2 take (the first from
    /// their binary), then an svc-delta-v2 (LZMA) when it is smaller still, which newer
    /// agents take (the smallest they read).
    fn make(old: &[u8], from: &str, new: &[u8]) -> R<Vec<Delta>> {
        let mut out: Vec<Delta> = Vec::new();
        let made = svc::update::delta::make_each(old, new, Format::ALL)
            .map_err(|e| format!("making a delta: {e}"))?;
        for (format, bytes) in made {
            let least = out.iter().map(|d| d.bytes.len()).min().unwrap_or(new.len());
            if bytes.len() < least {
                out.push(Delta {
                    from: from.to_string(),
                    sha256: hex(&Sha256::digest(&bytes)),
                    bytes,
                    format,
                });
            }
        }
        Ok(out)
    }

    fn json(&self, prefix: &str) -> Value {
        let mut v = json!({
            "from": self.from,
            "url": format!("{prefix}{}", self.sha256),
            "size": self.bytes.len(),
            "sha256": self.sha256,
        });
        if let Some(name) = self.format.offer_name() {
            v["format"] = name.into();
        }
        v
    }
}

/// The `--delta-from` binaries, read and checked as releases are (unsigned: a delta's
/// result is checked against the new release's own signature).
fn read_delta_bases(o: &Opts) -> R<Vec<(PathBuf, Release)>> {
    o.delta_from
        .iter()
        .map(|p| Release::read(p, o).map(|r| (p.clone(), r)))
        .collect()
}

/// The sha256 of the releases `publish` makes deltas from for a new release of `name`: the
/// target it replaces, then the ones that target had deltas from (newest first), `n` at most.
fn delta_bases(answer: &Map<String, Value>, name: &str, new_sha: &str, n: usize) -> Vec<String> {
    let Some(t) = answer.get("targets").and_then(|t| t.get(name)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    let earlier = t
        .get("deltas")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| d.get("from").and_then(Value::as_str));
    for sha in t
        .get("sha256")
        .and_then(Value::as_str)
        .into_iter()
        .chain(earlier)
    {
        let ours = svc::encoding::is_sha256_hex(sha);
        if ours && sha != new_sha && !out.iter().any(|s| s == sha) && out.len() < n {
            out.push(sha.to_string());
        }
    }
    out
}

// ---- management directories ----

/// `DIR/poll.json` as a JSON object whose `targets` (when present) is an object.
fn load_answer(dir: &Path) -> R<Map<String, Value>> {
    let not_mgmt = |why: String| {
        format!(
            "{} is not a management directory: {why} (`svc-release init {}` makes one)",
            dir.display(),
            dir.display()
        )
    };
    if !dir.is_dir() {
        return Err(not_mgmt("not a directory".into()));
    }
    let path = dir.join("poll.json");
    // A name in a directory others may write: no link, FIFO or device (fsutil::Dir).
    let bytes = svc::fsutil::read_regular(&path, MAX_ANSWER)
        .map_err(|e| not_mgmt(format!("{}: {e}", path.display())))?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| not_mgmt(format!("{} is not JSON: {e}", path.display())))?;
    let Value::Object(map) = v else {
        return Err(not_mgmt(format!("{} is not a JSON object", path.display())));
    };
    if map.get("targets").is_some_and(|t| !t.is_object()) {
        return Err(not_mgmt(format!(
            "{}: /targets is not an object",
            path.display()
        )));
    }
    Ok(map)
}

fn init(dir: &Path) -> R<()> {
    let path = dir.join("poll.json");
    if path.exists() {
        return Err(format!("{} exists; not overwritten", path.display()));
    }
    svc::fsutil::create_new(&path, b"{\n  \"targets\": {}\n}\n", 0o644)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("svc-release: {} is a management directory", dir.display());
    Ok(())
}

fn publish(o: &Opts, kp: &Ed25519KeyPair) -> R<()> {
    let dir = Path::new(&o.positional[0]);
    // Every check first: bad input changes nothing.
    let mut answer = load_answer(dir)?;
    let rels = read_releases(&o.positional[1..], o, kp)?;
    let config = publishable_config(o, &mut answer, rels.first().map(|r| r.target.as_str()), kp)?;
    let os = read_os_bundle(o, rels.first().map(|r| r.target.as_str()), kp)?;
    if rels.is_empty() && config.is_none() && os.is_none() {
        return Err(format!(
            "nothing to publish: no BINARY, no --config and no config in {}",
            dir.join("poll.json").display()
        ));
    }
    // Every name below DIR through one held descriptor, no link followed (fsutil::Dir): a
    // directory others may write cannot send our writes elsewhere.
    let root = Dir::open(dir).map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    let artifacts = root
        .sub(OsStr::new("artifacts"), true)
        .map_err(|e| format!("cannot create {}/artifacts: {e}", dir.display()))?;
    // Artifacts first, then the answer that names them: a device never sees a target
    // whose file is not complete.
    let files = rels.iter().map(|r| (r.sha256(), r.bytes.as_slice())).chain(
        config
            .iter()
            .map(|(a, bytes)| (a.sha256.as_deref().unwrap_or(""), bytes.as_slice())),
    );
    for (sha256, bytes) in files {
        let name = OsString::from(sha256);
        let present = artifacts
            .read_regular(&name, MAX_BINARY)
            .is_ok_and(|b| b == bytes);
        if !present {
            artifacts
                .write_atomic(&name, bytes, 0o644)
                .map_err(|e| format!("cannot write {}/artifacts/{sha256}: {e}", dir.display()))?;
        }
    }
    // Deltas from the releases before, also before the answer names them.
    let deltas = publish_deltas(o, dir, &artifacts, &answer, &rels)?;
    // The OS bundle streamed (it may be larger than memory), then named like the rest.
    if let Some(r) = &os {
        copy_os_bundle(&artifacts, r, dir)?;
    }
    if let Some((a, _)) = &config {
        answer.insert(
            "signed_config".into(),
            json!({
                "version": a.version,
                "url": format!("artifacts/{}", a.sha256.as_deref().unwrap_or("")),
                "sha256": a.sha256,
                "size": a.size,
                "signature": a.signature,
            }),
        );
    }
    let targets = answer
        .entry("targets")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(t) = targets {
        for r in &rels {
            let mut target = r.target_json("artifacts/");
            if let Some((_, d)) = deltas
                .iter()
                .find(|(n, d)| *n == r.artifact.name && !d.is_empty())
            {
                target["deltas"] = Value::Array(d.clone());
            }
            t.insert(r.artifact.name.clone(), target);
        }
        if let Some(r) = &os {
            let sha = r.artifact.sha256.as_deref().unwrap_or("");
            t.insert(
                OS.into(),
                json!({
                    "version": r.artifact.version,
                    "url": format!("artifacts/{sha}"),
                    "sha256": sha,
                    "size": r.artifact.size,
                    "signature": r.artifact.signature,
                    "format": "rauc-bundle",
                }),
            );
        }
    }
    let mut text =
        serde_json::to_vec_pretty(&Value::Object(answer.clone())).map_err(|e| e.to_string())?;
    text.push(b'\n');
    root.write_atomic(OsStr::new("poll.json"), &text, 0o644)
        .map_err(|e| format!("cannot write {}/poll.json: {e}", dir.display()))?;
    for r in &rels {
        println!(
            "published {} {} ({}) as artifacts/{}",
            r.artifact.name,
            r.artifact.version,
            r.target,
            r.sha256()
        );
    }
    if let Some((a, _)) = &config {
        println!(
            "published the config {} as artifacts/{}, signed (signed_config)",
            a.version,
            a.sha256.as_deref().unwrap_or("")
        );
    }
    if let Some(r) = &os {
        println!(
            "published OS {} ({}) as artifacts/{}",
            r.artifact.version,
            r.target,
            r.artifact.sha256.as_deref().unwrap_or("")
        );
    }
    if o.prune {
        prune(dir, &answer)?;
    }
    Ok(())
}

/// The deltas `publish` writes into `artifacts/` for each release, by binary name: from the
/// target it replaces and that target's own `from`s (at most `--deltas`, default 3); a
/// release published again keeps the deltas it had.
fn publish_deltas(
    o: &Opts,
    dir: &Path,
    artifacts: &Dir,
    answer: &Map<String, Value>,
    rels: &[Release],
) -> R<Vec<(String, Vec<Value>)>> {
    let mut deltas: Vec<(String, Vec<Value>)> = Vec::new();
    for r in rels {
        let old_target = answer.get("targets").and_then(|t| t.get(&r.artifact.name));
        if old_target
            .and_then(|t| t.get("sha256"))
            .and_then(Value::as_str)
            == Some(r.sha256())
        {
            // Published again: its deltas stay as they were.
            let kept = old_target
                .and_then(|t| t.get("deltas"))
                .and_then(Value::as_array);
            deltas.push((r.artifact.name.clone(), kept.cloned().unwrap_or_default()));
            continue;
        }
        let mut made = Vec::new();
        for from in delta_bases(answer, &r.artifact.name, r.sha256(), o.deltas.unwrap_or(3)) {
            let Ok(old) = artifacts.read_regular(OsStr::new(&from), MAX_BINARY) else {
                eprintln!(
                    "svc-release: no delta from {} {from}: artifacts/{from} is gone",
                    r.artifact.name
                );
                continue;
            };
            if hex(&Sha256::digest(&old)) != from {
                eprintln!(
                    "svc-release: no delta from artifacts/{from}: its content is not that sha256"
                );
                continue;
            }
            for d in Delta::make(&old, &from, &r.bytes)? {
                artifacts
                    .write_atomic(OsStr::new(&d.sha256), &d.bytes, 0o644)
                    .map_err(|e| {
                        format!("cannot write {}/artifacts/{}: {e}", dir.display(), d.sha256)
                    })?;
                println!(
                "published a delta ({}) of {} from {from}: artifacts/{}, {} bytes ({:.1} % of {})",
                d.format.offer_name().unwrap_or("svc-delta-v1"),
                r.artifact.name,
                d.sha256,
                d.bytes.len(),
                100.0 * d.bytes.len() as f64 / r.bytes.len().max(1) as f64,
                r.bytes.len()
            );
                made.push(d.json("artifacts/"));
            }
        }
        deltas.push((r.artifact.name.clone(), made));
    }
    Ok(deltas)
}

/// The machine config `publish` signs: `--config FILE`, else the answer's own `config`
/// member (taken out of it: a device with a vendor key refuses an unsigned config), validated
/// as the agent validates one and signed for `target` (the binaries', else `--target`) under
/// the name `config`. `None`: no config to publish (an earlier `signed_config` stays).
fn publishable_config(
    o: &Opts,
    answer: &mut Map<String, Value>,
    target: Option<&str>,
    kp: &Ed25519KeyPair,
) -> R<Option<(Artifact, Vec<u8>)>> {
    let inline = answer.remove("config");
    let (bytes, shown) = match (&o.config, inline) {
        (Some(path), _) => (
            verify::read_bounded(path, MAX_CONFIG)
                .map_err(|e| format!("config {}: cannot read: {e}", path.display()))?,
            path.display().to_string(),
        ),
        (None, Some(v)) => {
            let mut text = serde_json::to_vec_pretty(&v).map_err(|e| e.to_string())?;
            text.push(b'\n');
            (text, "poll.json's config".to_string())
        }
        (None, None) => return Ok(None),
    };
    validate_config(&bytes, &shown)?;
    let target = match (target, &o.target) {
        (Some(t), _) => t.to_string(),
        (None, Some(t)) if ["x86_64", "aarch64"].contains(&t.as_str()) => t.clone(),
        (None, _) => return Err("a config alone needs --target x86_64|aarch64".into()),
    };
    let version = o.config_version.clone().unwrap_or_else(|| {
        // Content-named by default: each different config a different version.
        hex(&Sha256::digest(&bytes))[..12].to_string()
    });
    Ok(Some((sign_config(kp, version, &target, &bytes)?, bytes)))
}

/// A machine config checked as the agent checks one: JSON, and valid.
fn validate_config(bytes: &[u8], shown: &str) -> R<()> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("config {shown}: {e}"))?;
    if let Err(report) = svc::config::parse_value(&value) {
        return Err(format!("config {shown} is not valid:\n{report}"));
    }
    Ok(())
}

/// The config's artifact (name `config`, its version, sha256 and size), signed for `target`
/// as binaries are; the one signing of configs, for `.swu` images and directories alike.
fn sign_config(kp: &Ed25519KeyPair, version: String, target: &str, bytes: &[u8]) -> R<Artifact> {
    if version.is_empty()
        || !version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
    {
        return Err(format!(
            "config version {version:?}: use only letters, digits and . _ + -"
        ));
    }
    let mut a = unsigned_artifact("config".into(), version, bytes);
    a.signature = Some(svc::encoding::base64_encode(
        kp.sign(&a.signed_message(target)).as_ref(),
    ));
    verify::verify_signature(&[kp.public_key().as_ref().to_vec()], &a, target)
        .map_err(|e| format!("self-check of the config's signature failed: {e}"))?;
    Ok(a)
}

/// Removes `DIR/artifacts/<sha256>` files no target names any more.
fn prune(dir: &Path, answer: &Map<String, Value>) -> R<()> {
    let named: Vec<String> = answer
        .get("targets")
        .and_then(Value::as_object)
        .map(|t| {
            let deltas = t
                .values()
                .filter_map(|v| v.get("deltas").and_then(Value::as_array))
                .flatten();
            // A delta's file, and the release it starts from (the next publish makes its
            // deltas from it).
            let delta_files = deltas.flat_map(|d| {
                let from = d
                    .get("from")
                    .and_then(Value::as_str)
                    .map(|f| format!("artifacts/{f}"));
                d.get("url")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .into_iter()
                    .chain(from)
            });
            t.values()
                .filter_map(|v| v.get("url").and_then(Value::as_str))
                .map(str::to_string)
                .chain(delta_files)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain(
            answer
                .get("signed_config")
                .and_then(|c| c.get("url"))
                .and_then(Value::as_str)
                .map(str::to_string),
        )
        .collect();
    // The folder by descriptor, no link followed; removals relative to it (fsutil::Dir).
    let artifacts = Dir::open(dir)
        .and_then(|d| d.sub(OsStr::new("artifacts"), false))
        .map_err(|e| format!("cannot open {}/artifacts: {e}", dir.display()))?;
    let entries = std::fs::read_dir(artifacts.path())
        .map_err(|e| format!("cannot list {}: {e}", artifacts.path().display()))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit());
        if ours && !named.iter().any(|u| *u == format!("artifacts/{name}")) {
            artifacts
                .remove(&e.file_name())
                .map_err(|err| format!("cannot remove {}: {err}", e.path().display()))?;
            println!("pruned artifacts/{name}");
        }
    }
    Ok(())
}

/// Checks every target of DIR's answer as a device of the target would: the file (size,
/// sha256, ELF architecture) and the signature.
fn verify_dir(dir: &Path, keys: &[Vec<u8>], target: Option<&str>) -> R<()> {
    let answer = load_answer(dir)?;
    let root = Dir::open(dir).map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    let canonical = dir
        .canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
    let targets = answer
        .get("targets")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if targets.is_empty() && !answer.contains_key("signed_config") {
        return Err(format!(
            "{}: poll.json offers no targets and no signed_config",
            dir.display()
        ));
    }
    if answer.contains_key("config") {
        return Err(format!(
            "{}: poll.json's config is not signed; a device with a vendor key refuses it (`svc-release publish --key KEY {}` signs it)",
            dir.display(),
            dir.display()
        ));
    }
    let mut arch_seen: Option<String> = target.map(str::to_string);
    // The OS image last: it takes the binaries' architecture when none is given.
    let mut targets: Vec<(String, Value)> = targets.into_iter().collect();
    targets.sort_by_key(|(n, _)| n == OS);
    for (name, t) in &targets {
        let mut a: Artifact = serde_json::from_value(json!({
            "name": name,
            "version": t.get("version").cloned().unwrap_or(Value::Null),
            "url": t.get("url").cloned().unwrap_or(Value::Null),
            "sha256": t.get("sha256").cloned().unwrap_or(Value::Null),
            "size": t.get("size").cloned().unwrap_or(Value::Null),
            "signature": t.get("signature").cloned().unwrap_or(Value::Null),
        }))
        .map_err(|e| format!("/targets/{name}: {e}"))?;
        // As a device reads it: inside DIR only, no link followed (fsutil::Dir), so that a
        // directory others wrote cannot make us hash and name our own files.
        let outside = || {
            format!(
                "/targets/{name}: {} is not in this directory; cannot check its content",
                a.url
            )
        };
        let rel = match a.url.strip_prefix("file://") {
            Some(abs) => Path::new(abs)
                .strip_prefix(&canonical)
                .map_err(|_| outside())?
                .to_path_buf(),
            None if a.url.contains("://") => return Err(outside()),
            None => PathBuf::from(a.url.trim_start_matches('/')),
        };
        let file = dir.join(&rel);
        if name == OS {
            verify_os_target(&root, &rel, &file, &mut a, keys, arch_seen.as_deref(), t)?;
            continue;
        }
        let bytes = root
            .read_beneath(&rel, MAX_BINARY)
            .map_err(|e| format!("/targets/{name}: {}: {e}", file.display()))?;
        let sha = hex(&Sha256::digest(&bytes));
        if a.sha256.as_deref().map(str::to_ascii_lowercase) != Some(sha.clone()) {
            return Err(format!(
                "/targets/{name}: {} has sha256 {sha}, the answer says {}",
                file.display(),
                a.sha256.as_deref().unwrap_or("nothing")
            ));
        }
        if a.size != Some(bytes.len() as u64) {
            return Err(format!(
                "/targets/{name}: {} has {} bytes, the answer says {:?}",
                file.display(),
                bytes.len(),
                a.size
            ));
        }
        let header = &bytes[..bytes.len().min(20)];
        let arch = match target {
            Some(t) => t.to_string(),
            None => header
                .get(18..20)
                .and_then(|m| verify::arch_of_machine(u16::from_le_bytes([m[0], m[1]])))
                .unwrap_or("unknown")
                .to_string(),
        };
        verify::check_elf_header_for(header, verify::machine_of_arch(&arch))
            .map_err(|e| format!("/targets/{name}: {}: {e}", file.display()))?;
        a.url = file.display().to_string();
        verify::verify_signature(keys, &a, &arch).map_err(|e| format!("/targets/{name}: {e}"))?;
        println!("ok: {name} {} ({arch}): file and signature", a.version);
        arch_seen.get_or_insert(arch);
    }
    if let Some(c) = answer.get("signed_config") {
        let arch = arch_seen
            .ok_or("a directory with a config alone: verify needs --target x86_64|aarch64")?;
        verify_signed_config(dir, c, keys, &arch)?;
    }
    Ok(())
}

/// The directory's `signed_config` as a device of `arch` checks it: its file in the
/// directory, sha256, size, and the signature under the name `config`.
fn verify_signed_config(dir: &Path, c: &Value, keys: &[Vec<u8>], arch: &str) -> R<()> {
    let field = |k: &str| c.get(k).cloned().unwrap_or(Value::Null);
    let a: Artifact = serde_json::from_value(json!({
        "name": "config", "version": field("version"), "url": field("url"),
        "sha256": field("sha256"), "size": field("size"), "signature": field("signature"),
    }))
    .map_err(|e| format!("/signed_config: {e}"))?;
    let rel = Path::new(&a.url);
    if a.url.contains("://")
        || !rel
            .components()
            .all(|p| matches!(p, std::path::Component::Normal(_)))
    {
        return Err(format!(
            "/signed_config: {} is not a path inside the directory (devices refuse it)",
            a.url
        ));
    }
    let file = dir.join(rel);
    let bytes = verify::read_bounded(&file, MAX_CONFIG)
        .map_err(|e| format!("/signed_config: {}: {e}", file.display()))?;
    let sha = hex(&Sha256::digest(&bytes));
    if a.sha256.as_deref().map(str::to_ascii_lowercase) != Some(sha.clone())
        || a.size != Some(bytes.len() as u64)
    {
        return Err(format!(
            "/signed_config: {} has sha256 {sha} and {} bytes, the answer says {} and {:?}",
            file.display(),
            bytes.len(),
            a.sha256.as_deref().unwrap_or("nothing"),
            a.size
        ));
    }
    verify::verify_signature(keys, &a, arch).map_err(|e| format!("/signed_config: {e}"))?;
    validate_config(&bytes, &file.display().to_string())?;
    println!("ok: config {} ({arch}): file and signature", a.version);
    Ok(())
}

use svc::encoding::hex;

/// Most bytes of a machine config put into an image (the agent's own cap on a config).
const MAX_CONFIG: u64 = 8 * 1024 * 1024;

/// An SWUpdate image of the binaries (signed, checked as `publish` checks them) and/or the
/// machine config (validated as the agent validates one, signed with the name `config`), all
/// of one architecture. Written atomically; returns its path.
fn swu(o: &Opts, kp: &Ed25519KeyPair) -> R<PathBuf> {
    use svc::update::swu;
    let rels = read_releases(&o.positional, o, kp)?;
    let target = match (rels.first(), &o.target) {
        (Some(r), _) => r.target.clone(),
        (None, Some(t)) if ["x86_64", "aarch64"].contains(&t.as_str()) => t.clone(),
        (None, _) => return Err("a config alone needs --target x86_64|aarch64".into()),
    };
    if let Some(r) = rels.iter().find(|r| r.target != target) {
        return Err(format!(
            "{} is for {}, {} for {target}: one image holds one architecture",
            r.artifact.name, r.target, rels[0].artifact.name
        ));
    }
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut images: Vec<swu::Image> = Vec::new();
    let mut artifacts: Vec<Artifact> = rels
        .into_iter()
        .map(|r| {
            files.push((r.artifact.name.clone(), r.bytes));
            r.artifact
        })
        .collect();
    if let Some(path) = &o.config {
        let shown = path.display();
        let version = o
            .config_version
            .clone()
            .ok_or("--config needs --config-version V")?;
        let bytes = verify::read_bounded(path, MAX_CONFIG)
            .map_err(|e| format!("config {shown}: cannot read: {e}"))?;
        validate_config(&bytes, &shown.to_string())?;
        let a = sign_config(kp, version, &target, &bytes)?;
        files.push(("config".into(), bytes));
        artifacts.push(a);
    }
    for a in &artifacts {
        images.push(swu::Image {
            filename: a.name.clone(),
            name: a.name.clone(),
            version: a.version.clone(),
            sha256: a.sha256.clone().unwrap_or_default(),
            signature: a.signature.clone(),
        });
    }
    // The image's version is svc-server's (what a device reports as `sw_version`), else the
    // first file's.
    let lead = artifacts
        .iter()
        .find(|a| a.name == "svc-server")
        .unwrap_or(&artifacts[0]);
    let version = lead.version.clone();
    let desc = swu::sw_description(&version, &target, &images);
    let mut entries: Vec<(&str, &[u8])> = vec![("sw-description", desc.as_bytes())];
    entries.extend(files.iter().map(|(n, b)| (n.as_str(), b.as_slice())));
    let mut bytes = Vec::new();
    swu::write_newc(&mut bytes, &entries).map_err(|e| format!("writing the image: {e}"))?;
    let out = o
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}-{version}-{target}.swu", lead.name)));
    svc::fsutil::atomic_write(&out, &bytes, 0o644)
        .map_err(|e| format!("writing {}: {e}", out.display()))?;
    Ok(out)
}

/// What the engine checks of `bytes` released as `name` `version`: their sha256 and size,
/// before any signature; no URL yet.
fn unsigned_artifact(name: String, version: String, bytes: &[u8]) -> Artifact {
    Artifact {
        name,
        version,
        url: String::new(),
        sha256: Some(hex(&Sha256::digest(bytes))),
        size: Some(bytes.len() as u64),
        signature: None,
        identity: None,
    }
}

// ---- OS images ----

/// The target name of an OS image in a poll answer, and the name its signature is made under.
const OS: &str = "os";
/// Largest OS bundle the tool publishes.
const MAX_OS_BUNDLE: u64 = 16 << 30;
/// The first bytes of a RAUC bundle (plain and verity formats): a squashfs image.
const SQUASHFS_MAGIC: &[u8; 4] = b"hsqs";

struct OsRelease {
    artifact: Artifact,
    path: PathBuf,
    target: String,
}

/// sha256 and size of a stream, at most `limit` bytes; each chunk also goes to `sink`.
fn hash_stream(
    src: &mut impl std::io::Read,
    limit: u64,
    shown: &str,
    mut sink: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> R<(String, u64)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = src
            .read(&mut buf)
            .map_err(|e| format!("{shown}: cannot read: {e}"))?;
        if n == 0 {
            return Ok((hex(&h.finalize()), size));
        }
        size += n as u64;
        if size > limit {
            return Err(format!("{shown} is larger than {limit} bytes"));
        }
        h.update(&buf[..n]);
        sink(&buf[..n]).map_err(|e| format!("{shown}: cannot copy: {e}"))?;
    }
}

/// `--os-bundle`: the bundle checked for a RAUC bundle's first bytes, hashed as a stream and
/// signed under the name `os` for the target (the binaries', else `--target`). RAUC checks
/// its own signature on the device; this one is the agent's, before RAUC sees a byte.
fn read_os_bundle(o: &Opts, target: Option<&str>, kp: &Ed25519KeyPair) -> R<Option<OsRelease>> {
    let Some(path) = &o.os_bundle else {
        return Ok(None);
    };
    let shown = format!("OS bundle {}", path.display());
    let version = o
        .os_version
        .clone()
        .ok_or_else(|| format!("{shown}: --os-version V is needed"))?;
    if version.is_empty()
        || version.len() > 64
        || !version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
    {
        return Err(format!(
            "--os-version {version:?}: use only letters, digits and . _ + - (at most 64)"
        ));
    }
    let target = match (target, &o.target) {
        (Some(t), _) => t.to_string(),
        (None, Some(t)) if ["x86_64", "aarch64"].contains(&t.as_str()) => t.clone(),
        (None, _) => {
            return Err(format!(
                "{shown}: needs --target x86_64|aarch64 (or a BINARY)"
            ))
        }
    };
    if !std::fs::metadata(path)
        .map_err(|e| format!("{shown}: {e}"))?
        .is_file()
    {
        return Err(format!("{shown} is not a regular file"));
    }
    let mut f = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut magic = [0u8; 4];
    std::io::Read::read_exact(&mut f, &mut magic)
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if &magic != SQUASHFS_MAGIC {
        return Err(format!(
            "{shown} is not a RAUC bundle (it does not begin with a squashfs image; `rauc bundle` makes one)"
        ));
    }
    let mut f = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let (sha, size) = hash_stream(&mut f, MAX_OS_BUNDLE, &shown, |_| Ok(()))?;
    let mut artifact = Artifact {
        name: OS.into(),
        version,
        url: String::new(),
        sha256: Some(sha),
        size: Some(size),
        signature: None,
        identity: None,
    };
    artifact.signature = Some(svc::encoding::base64_encode(
        kp.sign(&artifact.signed_message(&target)).as_ref(),
    ));
    verify::verify_signature(&[kp.public_key().as_ref().to_vec()], &artifact, &target)
        .map_err(|e| format!("self-check of the OS bundle's signature failed: {e}"))?;
    Ok(Some(OsRelease {
        artifact,
        path: path.clone(),
        target,
    }))
}

/// Copies the bundle to `artifacts/<sha256>` through an exclusive temporary file, hashing the
/// copy on the way: a bundle that changed since it was signed is not published.
fn copy_os_bundle(artifacts: &Dir, r: &OsRelease, dir: &Path) -> R<()> {
    let sha = r.artifact.sha256.clone().unwrap_or_default();
    let name = OsString::from(&sha);
    let shown = format!("{}/artifacts/{sha}", dir.display());
    if let Ok(mut f) = artifacts.open_regular(&name) {
        if hash_stream(&mut f, MAX_OS_BUNDLE, &shown, |_| Ok(()))
            .is_ok_and(|(h, n)| h == sha && Some(n) == r.artifact.size)
        {
            return Ok(());
        }
    }
    let mut src =
        std::fs::File::open(&r.path).map_err(|e| format!("OS bundle {}: {e}", r.path.display()))?;
    let (mut out, tmp) = artifacts
        .create_temp(&name, 0o644)
        .map_err(|e| format!("cannot create a temporary file for {shown}: {e}"))?;
    let copied = hash_stream(&mut src, MAX_OS_BUNDLE, &shown, |b| {
        std::io::Write::write_all(&mut out, b)
    })
    .and_then(|(h, n)| {
        if h != sha || Some(n) != r.artifact.size {
            return Err(format!(
                "OS bundle {} changed while it was published",
                r.path.display()
            ));
        }
        out.sync_all().map_err(|e| format!("{shown}: {e}"))
    })
    .and_then(|()| {
        artifacts
            .rename(&tmp, &name)
            .map_err(|e| format!("{shown}: {e}"))
    });
    if copied.is_err() {
        let _ = artifacts.remove(&tmp);
    }
    copied
}

/// The directory's `targets.os` as a device checks it: format, the file inside the directory
/// (streamed: a bundle may be larger than memory), sha256, size, and the signature under the
/// name `os`.
fn verify_os_target(
    root: &Dir,
    rel: &Path,
    file: &Path,
    a: &mut Artifact,
    keys: &[Vec<u8>],
    arch: Option<&str>,
    t: &Value,
) -> R<()> {
    if t.get("format").and_then(Value::as_str) != Some("rauc-bundle") {
        return Err("/targets/os: format must be \"rauc-bundle\"".into());
    }
    let arch = arch.ok_or("an OS image without binaries: verify needs --target x86_64|aarch64")?;
    let mut f = root
        .open_beneath(rel)
        .map_err(|e| format!("/targets/os: {}: {e}", file.display()))?;
    let shown = file.display().to_string();
    let (sha, size) = hash_stream(&mut f, MAX_OS_BUNDLE, &shown, |_| Ok(()))?;
    if a.sha256.as_deref().map(str::to_ascii_lowercase) != Some(sha.clone()) || a.size != Some(size)
    {
        return Err(format!(
            "/targets/os: {shown} has sha256 {sha} and {size} bytes; the answer says {} and {:?}",
            a.sha256.as_deref().unwrap_or("nothing"),
            a.size
        ));
    }
    verify::verify_signature(keys, a, arch).map_err(|e| format!("/targets/os: {e}"))?;
    println!("ok: os {} ({arch}): file and signature", a.version);
    Ok(())
}
