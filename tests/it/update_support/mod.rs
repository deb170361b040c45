//! Shared pieces of the update tests: real ELF "svc-agent"/"svc-server" binaries made at test
//! time, sandboxes, artifacts, and ed25519 signing.
//!
//! The fake binary is one tiny Rust program compiled once with `rustc`; each "version" is
//! that ELF with a trailer appended (`\nSVCFAKE1 <name> <version> <behavior>\n`), which the
//! program reads from `/proc/self/exe`. The kernel ignores bytes after the ELF image, so each
//! variant is a real executable for this machine with its own sha256.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use svc::paths::Paths;
use svc::update::{Artifact, DownloadOptions, Engine, Kind, Staging, UpdateError, UpdateOptions};

const FAKE_SRC: &str = r#"
use std::io::{Read, Seek, SeekFrom, Write};
// A release stamp as svc builds carry one (`svc::release_stamp!`), its text written in
// by `fake_binary` over the placeholder.
const fn pad(s: &[u8]) -> [u8; 160] {
    let mut a = [0u8; 160];
    let mut i = 0;
    while i < s.len() { a[i] = s[i]; i += 1; }
    a
}
#[used]
#[link_section = ".svc_release"]
static STAMP: [u8; 160] = pad(b"SVCFAKE-STAMP-PLACEHOLDER");
fn main() {
    std::hint::black_box(&STAMP);
    // What a tampered build output does when a signing host runs it (issue 40, finding 9).
    if let Some(p) = std::env::var_os("SVC_FAKE_EXECUTED") {
        let _ = std::fs::write(p, "ran");
    }
    let mut f = std::fs::File::open("/proc/self/exe").unwrap();
    let len = f.seek(SeekFrom::End(0)).unwrap();
    let tail = len.min(512);
    f.seek(SeekFrom::Start(len - tail)).unwrap();
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let line = text.rsplit("\nSVCFAKE1 ").next().unwrap_or("").trim().to_string();
    let mut parts = line.split(' ');
    let name = parts.next().unwrap_or("?").to_string();
    let version = parts.next().unwrap_or("?").to_string();
    let behavior = parts.next().unwrap_or("ok").to_string();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("version") {
        if behavior == "version-hangs" {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
        println!("{{\"binary_name\":\"{}\",\"version\":\"{}\",\"target\":\"{}\"}}", name, version, std::env::consts::ARCH);
        return;
    }
    if let Some(p) = std::env::var_os("SVC_FAKE_STARTS") {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap();
        writeln!(f, "{} {}", name, version).unwrap();
    }
    match behavior.as_str() {
        "exit1" => std::process::exit(1),
        "hang" => loop { std::thread::sleep(std::time::Duration::from_secs(3600)); },
        _ => {}
    }
}
"#;

/// Scratch space of this test binary (under target/).
pub fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// The compiled fake binary (compiled once per source text, shared by test binaries).
pub fn fake_elf() -> &'static [u8] {
    static ELF: OnceLock<Vec<u8>> = OnceLock::new();
    ELF.get_or_init(|| {
        let tag = &hex(&Sha256::digest(FAKE_SRC.as_bytes()))[..12];
        let dir = scratch().join("fake-bin");
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join(format!("fake-{tag}"));
        if !out.is_file() {
            let src = dir.join(format!("fake-{tag}-{}.rs", std::process::id()));
            std::fs::write(&src, FAKE_SRC).unwrap();
            let tmp = dir.join(format!("fake-{tag}.{}", std::process::id()));
            let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
            let st = std::process::Command::new(rustc)
                .args([
                    "--edition",
                    "2021",
                    "-C",
                    "opt-level=1",
                    "-C",
                    "debuginfo=0",
                    "-o",
                ])
                .arg(&tmp)
                .arg(&src)
                .status()
                .expect("run rustc to build the fake binary");
            assert!(st.success(), "rustc failed");
            std::fs::rename(&tmp, &out).unwrap();
            let _ = std::fs::remove_file(&src);
        }
        std::fs::read(&out).unwrap()
    })
}

/// A fake binary of `name` `version` with `behavior` (`ok`, `exit1`, `hang`,
/// `version-hangs`), padded with `pad` zero bytes before the trailer. Its release stamp
/// (read by `svc-release`, which never runs it) says the same name and version.
pub fn fake_binary(name: &str, version: &str, behavior: &str, pad: usize) -> Vec<u8> {
    let mut b = fake_elf().to_vec();
    let placeholder = b"SVCFAKE-STAMP-PLACEHOLDER";
    let at = b
        .windows(placeholder.len())
        .position(|w| w == placeholder)
        .expect("the fake binary's stamp placeholder");
    let stamp = format!(
        "svc-release-stamp/1 binary_name={name} version={version} target={}-unknown-linux-gnu\n",
        std::env::consts::ARCH
    );
    assert!(stamp.len() <= 160, "{stamp}");
    b[at..at + 160].fill(0);
    b[at..at + stamp.len()].copy_from_slice(stamp.as_bytes());
    b.resize(b.len() + pad, 0);
    b.extend_from_slice(format!("\nSVCFAKE1 {name} {version} {behavior}\n").as_bytes());
    b
}

pub use svc::encoding::hex;

pub fn sha256_hex(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

/// A fresh, empty sandbox root for one test.
pub fn sandbox(test: &str) -> Paths {
    let root = scratch().join("sandbox").join(test);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    Paths::new(root)
}

/// What an install did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The link now points at this (new) version.
    Activated {
        version: String,
        previous: Option<String>,
    },
    /// Already active; nothing downloaded.
    AlreadyCurrent { version: String },
    /// A pinned URL answered 304 Not Modified.
    NotModified { version: String },
}

/// An install as the daemon composes it (`agent::updater`): the engine's `stage`, then, for
/// a version staged, its `activate`; the one path the tests exercise.
pub trait Install {
    fn install(&self, a: &Artifact) -> Result<Outcome, UpdateError>;
}

impl Install for Engine {
    fn install(&self, a: &Artifact) -> Result<Outcome, UpdateError> {
        match self.stage(a)? {
            Staging::Ready { version } => {
                let kind = Kind::of(&a.name).expect("stage accepts only the kinds it installs");
                let done = self.activate(kind, &version)?;
                Ok(Outcome::Activated {
                    version: done.version,
                    previous: done.previous,
                })
            }
            Staging::AlreadyCurrent { version } => Ok(Outcome::AlreadyCurrent { version }),
            Staging::NotModified { version } => Ok(Outcome::NotModified { version }),
        }
    }
}

/// Options with short timeouts and backoff for tests (no timing is asserted).
pub fn test_opts() -> UpdateOptions {
    UpdateOptions {
        download: DownloadOptions {
            // Generous: a whole 4-48 MiB download is one request, and on a loaded 2-core
            // machine a 2 s deadline cut it and added a retry the tests count. Tests of the
            // deadline itself set their own (a_trickle_times_out_after_bounded_attempts).
            request_timeout: std::time::Duration::from_secs(30),
            max_attempts: 3,
            min_progress: 4096,
            backoff_initial: std::time::Duration::from_millis(50),
            backoff_max: std::time::Duration::from_millis(200),
            progress_interval: std::time::Duration::from_secs(1),
            max_unannounced_size: 64 * 1024 * 1024,
            free_space_margin: 1024 * 1024,
            ..DownloadOptions::default()
        },
        ..UpdateOptions::default()
    }
}

pub fn artifact(name: &str, version: &str, url: &str, body: &[u8]) -> Artifact {
    Artifact {
        name: name.into(),
        version: version.into(),
        url: url.into(),
        sha256: Some(sha256_hex(body)),
        size: Some(body.len() as u64),
        signature: None,
        identity: None,
    }
}

/// Installs `name` `version` from a `file://` source through the real update path, so the
/// sandbox has an old, complete binary behind the link.
pub fn install_old(paths: &Paths, name: &str, version: &str) -> Vec<u8> {
    let body = fake_binary(name, version, "ok", 0);
    let src = paths.root().join(format!("src-{name}-{version}"));
    std::fs::write(&src, &body).unwrap();
    let a = artifact(name, version, &format!("file://{}", src.display()), &body);
    Engine::new(paths.clone(), test_opts()).install(&a).unwrap();
    body
}

/// The bytes `bin/<name>` points at and their version (from the target's name).
pub fn active(paths: &Paths, name: &str) -> (String, Vec<u8>) {
    let target = std::fs::read_link(paths.bin_link(name)).expect("link exists");
    let file = target.file_name().unwrap().to_string_lossy().into_owned();
    let version = file.strip_prefix(&format!("{name}-")).unwrap().to_string();
    (
        version,
        std::fs::read(paths.bin_link(name)).expect("link target readable"),
    )
}

/// Asserts that nothing of a failed update of `name` `new` is left and the old binary is
/// still active and intact.
pub fn assert_untouched(paths: &Paths, name: &str, old: &str, old_body: &[u8], new: &str) {
    let (v, bytes) = active(paths, name);
    assert_eq!(v, old, "link moved");
    assert_eq!(
        sha256_hex(&bytes),
        sha256_hex(old_body),
        "old binary changed"
    );
    let cache = paths.cache_dir();
    assert!(
        !cache.join(format!("{name}-{new}")).exists(),
        "bad version cached"
    );
    let rec = svc::update::VersionRecords::load(paths).unwrap();
    assert_eq!(rec.get(name).unwrap().current.as_deref(), Some(old));
}

/// True when no `.part` (or its sidecar) is left for `name` `version`.
pub fn no_part(paths: &Paths, name: &str, version: &str) -> bool {
    let p = paths.cache_dir().join(format!("{name}-{version}.part"));
    !p.exists() && !Path::new(&format!("{}.json", p.display())).exists()
}

/// Makes an ed25519 vendor key, installs its public half at `Paths::signing_key()` (hex), and
/// returns a signer producing base64 signatures.
pub fn install_vendor_key(paths: &Paths) -> impl Fn(&Artifact) -> String {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let key_path = paths.signing_key();
    std::fs::create_dir_all(key_path.parent().unwrap()).unwrap();
    std::fs::write(&key_path, format!("{}\n", hex(kp.public_key_raw()))).unwrap();
    let der = kp.serialize_der();
    move |a: &Artifact| {
        let pk = rustls::pki_types::PrivatePkcs8KeyDer::from(der.clone());
        let key = rustls::crypto::aws_lc_rs::sign::any_eddsa_type(&pk).unwrap();
        let signer = key
            .choose_scheme(&[rustls::SignatureScheme::ED25519])
            .unwrap();
        let sig = signer
            .sign(&a.signed_message(svc::update::this_target()))
            .unwrap();
        svc::encoding::base64_encode(&sig)
    }
}

/// A real small file system: a tmpfs of `size` (mount's syntax, e.g. `8m`) mounted at `dir`,
/// unmounted when dropped. Mounting needs root, which the test command has.
pub struct SmallFs(PathBuf);

impl SmallFs {
    pub fn mount(dir: &Path, size: &str) -> SmallFs {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(
            ok,
            "mounting a {size} tmpfs at {} (needs root)",
            dir.display()
        );
        SmallFs(dir.to_path_buf())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}
