//! svc-release, the vendor's tool (docs/releases.md): its keys and signatures check out with
//! an independent ed25519 implementation (Python's `cryptography`) over the message exactly
//! as docs/updates.md writes it; the agent accepts what it publishes and refuses a tampered
//! or replayed medium; bad input is refused with a clear error and changes nothing.
use crate::common;
use crate::update_support::{fake_binary, sandbox, sha256_hex, test_opts};
use crate::update_support::{Install, Outcome};
use common::sandbox::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use svc::update::{Artifact, Engine, UpdateError};

fn tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_svc-release"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = tool(args);
    assert!(
        out.status.success(),
        "svc-release {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The error text of a run that must fail with exit status 1.
fn fails(args: &[&str]) -> String {
    let out = tool(args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "svc-release {args:?} should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("svc-release-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn write_exec(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every file under `dir` with its content and mode: "nothing changed" is this, equal.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
                out.insert(e.path(), (Vec::new(), m.permissions().mode()));
            } else {
                out.insert(
                    e.path(),
                    (std::fs::read(e.path()).unwrap(), m.permissions().mode()),
                );
            }
        }
    }
    out
}

/// A Python 3 that has the `cryptography` package (scripts/test-cargo.sh installs it).
fn python_with_cryptography() -> String {
    ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|py| {
            Command::new(py)
                .args(["-c", "import cryptography"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("no python3 with the cryptography package (apt-get install python3-cryptography)")
        .to_string()
}

/// Checks, in Python's `cryptography` (OpenSSL's ed25519, not aws-lc), that `sig` verifies
/// over `message` under the public key file `pub_file`, and that flipping any one bit of the
/// message (every bit, one at a time) or of the signature makes it fail.
const PY_CHECK: &str = r#"
import base64, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.exceptions import InvalidSignature
key = Ed25519PublicKey.from_public_bytes(base64.b64decode(open(sys.argv[1]).read().strip()))
sig = base64.b64decode(sys.argv[2])
msg = open(sys.argv[3], "rb").read()
key.verify(sig, msg)
def refused(s, m):
    try:
        key.verify(s, m)
        return False
    except InvalidSignature:
        return True
bad = [(i, b) for i in range(len(msg)) for b in range(8)
       if not refused(sig, msg[:i] + bytes([msg[i] ^ (1 << b)]) + msg[i + 1:])]
bad += [("sig", i, b) for i in range(len(sig)) for b in range(8)
        if not refused(sig[:i] + bytes([sig[i] ^ (1 << b)]) + sig[i + 1:], msg)]
if bad:
    sys.exit("accepted after a one-bit change: %r" % bad[:5])
print("verified; %d one-bit changes refused" % (8 * (len(msg) + len(sig))))
"#;

#[test]
fn keygen_writes_a_private_key_0600_and_a_public_key_devices_read() {
    let d = scratch("keygen");
    let key = d.join("vendor.key");
    let printed = ok(&["keygen", p(&key)]);
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "private key mode {mode:o}");
    let pem = std::fs::read_to_string(&key).unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{pem}");
    let public = std::fs::read(d.join("vendor.key.pub")).unwrap();
    assert_eq!(String::from_utf8_lossy(&public), printed);
    // The format /etc/svc-signing.pub takes: the device's own parser reads one 32-byte key.
    let keys = svc::update::verify::parse_public_keys(&public).unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].len(), 32);
    assert_eq!(ok(&["pubkey", p(&key)]), printed);
    // A key is made once: a second keygen overwrites neither file.
    let before = snapshot(&d);
    assert!(fails(&["keygen", p(&key)]).contains("exists; not overwritten"));
    assert_eq!(snapshot(&d), before);
    // The private key is never printed.
    assert!(!printed.contains("PRIVATE"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// The documented message, spelled out here from docs/updates.md (not from the code).
fn documented_message(name: &str, version: &str, target: &str, bytes: &[u8]) -> Vec<u8> {
    format!(
        "svc-artifact-v1\n{name}\n{version}\n{target}\n{}\n{}\n",
        sha256_hex(bytes),
        bytes.len()
    )
    .into_bytes()
}

/// An independent ed25519 (Python's cryptography on OpenSSL) accepts the tool's signature
/// over the documented bytes.
#[test]
#[ignore = "needs python3's cryptography (scripts/test-cargo.sh installs it and runs this)"]
fn signatures_verify_in_an_independent_ed25519() {
    let d = scratch("sign-python");
    let key = d.join("k");
    ok(&["keygen", p(&key)]);
    let bytes = fake_binary("svc-server", "2.0.0", "ok", 0);
    let bin = d.join("svc-server");
    write_exec(&bin, &bytes);
    let sig = ok(&["sign", "--key", p(&key), p(&bin)]).trim().to_string();
    let msg = documented_message("svc-server", "2.0.0", std::env::consts::ARCH, &bytes);
    std::fs::write(d.join("message"), &msg).unwrap();
    let out = Command::new(python_with_cryptography())
        .args(["-c", PY_CHECK])
        .arg(d.join("k.pub"))
        .arg(&sig)
        .arg(d.join("message"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn signatures_verify_and_the_engine_accepts_them_but_no_one_bit_change() {
    let d = scratch("sign");
    let key = d.join("k");
    ok(&["keygen", p(&key)]);
    let bytes = fake_binary("svc-server", "2.0.0", "ok", 0);
    let bin = d.join("svc-server");
    write_exec(&bin, &bytes);
    let sig = ok(&["sign", "--key", p(&key), p(&bin)]).trim().to_string();
    let target = std::env::consts::ARCH;

    // 1. The tool's own verify accepts it, and refuses the signature for another binary
    // (an independent ed25519 checks the same bytes: the test below).
    assert!(ok(&[
        "verify",
        "--pub",
        p(&d.join("k.pub")),
        "--signature",
        &sig,
        p(&bin)
    ])
    .starts_with("ok: svc-server 2.0.0"));
    let other = d.join("other");
    write_exec(&other, &fake_binary("svc-server", "2.0.0", "exit1", 0));
    assert!(fails(&[
        "verify",
        "--pub",
        p(&d.join("k.pub")),
        "--signature",
        &sig,
        p(&other)
    ])
    .contains("bad signature"));

    // 2. The device's engine, with the tool's public key as /etc/svc-signing.pub.
    let paths = sandbox("release-engine");
    std::fs::create_dir_all(paths.signing_key().parent().unwrap()).unwrap();
    std::fs::copy(d.join("k.pub"), paths.signing_key()).unwrap();
    let good = Artifact {
        name: "svc-server".into(),
        version: "2.0.0".into(),
        url: format!("file://{}", bin.display()),
        sha256: Some(sha256_hex(&bytes)),
        size: Some(bytes.len() as u64),
        signature: Some(sig.clone()),
        identity: None,
    };
    // One bit of the binary changed, the answer as signed: the sha256 refuses it.
    let flipped = d.join("flipped");
    let mut fb = bytes.clone();
    let mid = fb.len() / 2;
    fb[mid] ^= 0x01;
    write_exec(&flipped, &fb);
    let engine = Engine::new(paths.clone(), test_opts());
    let r = engine.install(&Artifact {
        url: format!("file://{}", flipped.display()),
        ..good.clone()
    });
    assert!(matches!(r, Err(UpdateError::ShaMismatch { .. })), "{r:?}");
    // The same, with the answer's sha256 and size made to match: the signature refuses it.
    let r = engine.install(&Artifact {
        url: format!("file://{}", flipped.display()),
        sha256: Some(sha256_hex(&fb)),
        ..good.clone()
    });
    assert!(matches!(r, Err(UpdateError::Signature(_))), "{r:?}");
    // One bit of a signed field of the answer (version, size) or of the signature.
    for a in [
        Artifact {
            version: "2.0.1".into(),
            ..good.clone()
        },
        Artifact {
            size: Some(bytes.len() as u64 ^ 1),
            ..good.clone()
        },
        Artifact {
            signature: Some(flip_b64(&sig)),
            ..good.clone()
        },
    ] {
        let r = svc::update::verify::verify_signature(
            &svc::update::verify::parse_public_keys(&std::fs::read(paths.signing_key()).unwrap())
                .unwrap(),
            &a,
            target,
        );
        assert!(matches!(r, Err(UpdateError::Signature(_))), "{a:?}: {r:?}");
    }
    assert!(!paths.bin_link("svc-server").exists(), "nothing installed");
    // The signed release as published: accepted and activated.
    let r = engine.install(&good).unwrap();
    assert!(
        matches!(r, Outcome::Activated { ref version, .. } if version == "2.0.0"),
        "{r:?}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// One bit of a base64 signature changed (decode, flip, encode).
fn flip_b64(sig: &str) -> String {
    let mut raw = svc::encoding::base64_decode(sig).unwrap();
    raw[10] ^= 0x04;
    svc::encoding::base64_encode(&raw)
}

#[test]
fn a_rotation_key_file_accepts_both_keys_and_nothing_else() {
    let d = scratch("rotate");
    ok(&["keygen", p(&d.join("old"))]);
    ok(&["keygen", p(&d.join("new"))]);
    ok(&["keygen", p(&d.join("stranger"))]);
    let both = format!(
        "# old key, until every device has this file\n{}{}",
        std::fs::read_to_string(d.join("old.pub")).unwrap(),
        std::fs::read_to_string(d.join("new.pub")).unwrap()
    );
    std::fs::write(d.join("both.pub"), both).unwrap();
    let bin = d.join("svc-agent");
    write_exec(&bin, &fake_binary("svc-agent", "3.1.0", "ok", 0));
    for (key, accepted) in [("old", true), ("new", true), ("stranger", false)] {
        let sig = ok(&["sign", "--key", p(&d.join(key)), p(&bin)]);
        let out = tool(&[
            "verify",
            "--pub",
            p(&d.join("both.pub")),
            "--signature",
            sig.trim(),
            p(&bin),
        ]);
        assert_eq!(out.status.success(), accepted, "{key}: {out:?}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn bad_input_is_refused_clearly_and_changes_nothing() {
    let d = scratch("bad-input");
    let key = d.join("k");
    ok(&["keygen", p(&key)]);
    let mgmt = d.join("mgmt");
    ok(&["init", p(&mgmt)]);
    let good = d.join("svc-server");
    let good_bytes = fake_binary("svc-server", "1.0.0", "ok", 0);
    write_exec(&good, &good_bytes);
    ok(&["publish", "--key", p(&key), p(&mgmt), p(&good)]);
    // An EC key (P-256, PKCS#8) and an RSA-style PEM label: keys of the wrong type.
    let ec = d.join("ec.key");
    std::fs::write(&ec, rcgen::KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let mut arm = std::fs::read(env!("CARGO_BIN_EXE_svc-server")).unwrap();
    arm[18..20].copy_from_slice(&183u16.to_le_bytes()); // an aarch64 ELF
    let arm_bin = d.join("svc-server-aarch64");
    write_exec(&arm_bin, &arm);
    // The same without its release stamp (the section renamed): it must be named.
    let mut bare = arm.clone();
    let at = bare
        .windows(13)
        .rposition(|w| w == b".svc_release\0")
        .expect("svc-server has a release stamp");
    bare[at + 1] = b'X';
    let arm_bare = d.join("svc-server-aarch64-bare");
    write_exec(&arm_bare, &bare);
    let x86_named = d.join("svc-server-x86");
    let mut x86 = arm.clone();
    x86[18..20].copy_from_slice(&62u16.to_le_bytes());
    write_exec(&x86_named, &x86);
    let not_elf = d.join("script");
    write_exec(&not_elf, b"#!/bin/sh\necho hi\n");
    let not_mgmt = d.join("not-mgmt");
    std::fs::create_dir_all(&not_mgmt).unwrap();
    let garbage = d.join("garbage");
    std::fs::create_dir_all(&garbage).unwrap();
    std::fs::write(garbage.join("poll.json"), "{not json").unwrap();
    let bad_targets = d.join("bad-targets");
    std::fs::create_dir_all(&bad_targets).unwrap();
    std::fs::write(bad_targets.join("poll.json"), r#"{"targets": []}"#).unwrap();

    let missing = p(&d.join("missing.key")).to_string();
    let (nope, absent) = (d.join("nope"), d.join("absent"));
    let pubkey = p(&d.join("k.pub")).to_string();
    let (k, m) = (p(&key).to_string(), p(&mgmt).to_string());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["publish", "--key", &missing, &m, p(&good)],
            "no such file (make one with `svc-release keygen",
        ),
        (
            vec!["publish", "--key", p(&ec), &m, p(&good)],
            "not an ed25519 private key",
        ),
        (
            vec!["publish", "--key", &pubkey, &m, p(&good)],
            "is a public key; signing needs the private key",
        ),
        (vec!["sign", "--key", &k, p(&nope)], "binary"),
        (vec!["publish", "--key", &k, &m, p(&nope)], "No such file"),
        (
            vec!["publish", "--key", &k, &m, p(&not_mgmt)],
            "is not a regular file",
        ),
        (
            vec!["publish", "--key", &k, &m, p(&not_elf)],
            "is not an ELF executable",
        ),
        (
            vec![
                "publish",
                "--key",
                &k,
                "--target",
                "x86_64",
                &m,
                p(&arm_bin),
            ],
            "is built for aarch64 (ELF e_machine 183), not for the target x86_64",
        ),
        (
            vec![
                "publish",
                "--key",
                &k,
                "--target",
                "aarch64",
                &m,
                p(&x86_named),
            ],
            "is built for x86_64 (ELF e_machine 62), not for the target aarch64",
        ),
        (
            vec!["publish", "--key", &k, &m, p(&arm_bin)],
            "its release stamp says target x86_64",
        ),
        (
            vec!["publish", "--key", &k, &m, p(&arm_bare)],
            "carries no release stamp (the .svc_release section of svc builds); pass --name and --version",
        ),
        (
            vec!["publish", "--key", &k, "--version", "9.9.9", &m, p(&good)],
            "says it is \"1.0.0\"; --version \"9.9.9\" disagrees",
        ),
        (
            vec!["publish", "--key", &k, p(&not_mgmt), p(&good)],
            "is not a management directory",
        ),
        (
            vec!["publish", "--key", &k, p(&garbage), p(&good)],
            "is not a management directory",
        ),
        (
            vec!["publish", "--key", &k, p(&bad_targets), p(&good)],
            "/targets is not an object",
        ),
        (
            vec!["publish", "--key", &k, p(&absent), p(&good)],
            "is not a management directory",
        ),
    ];
    for (args, want) in cases {
        let before = snapshot(&d);
        let err = fails(&args);
        assert!(err.contains(want), "{args:?}: want {want:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!err.contains("BEGIN PRIVATE"), "a key in an error: {err}");
        assert_eq!(snapshot(&d), before, "{args:?} changed files");
    }
    // The aarch64 binary with its name and version given is fine for an aarch64 directory.
    let arm_mgmt = d.join("arm");
    ok(&["init", p(&arm_mgmt)]);
    ok(&[
        "publish",
        "--key",
        &k,
        "--name",
        "svc-server",
        "--version",
        "1.0.0",
        p(&arm_mgmt),
        p(&arm_bare),
    ]);
    assert!(ok(&["verify", "--pub", &pubkey, p(&arm_mgmt)]).contains("(aarch64)"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn publish_writes_targets_by_content_and_prunes_on_request() {
    let d = scratch("publish");
    let key = d.join("k");
    ok(&["keygen", p(&key)]);
    let mgmt = d.join("m");
    std::fs::create_dir_all(&mgmt).unwrap();
    // An existing answer: its other members are kept, its config signed.
    std::fs::write(
        mgmt.join("poll.json"),
        r#"{"poll_interval_secs": 7, "config": {"agent": {}}}"#,
    )
    .unwrap();
    let v1 = d.join("s1");
    let v2 = d.join("s2");
    let a1 = d.join("a1");
    write_exec(&v1, &fake_binary("svc-server", "1.0.0", "ok", 0));
    write_exec(&v2, &fake_binary("svc-server", "1.1.0", "ok", 0));
    write_exec(&a1, &fake_binary("svc-agent", "1.0.0", "ok", 0));
    ok(&["publish", "--key", p(&key), p(&mgmt), p(&v1), p(&a1)]);
    let answer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mgmt.join("poll.json")).unwrap()).unwrap();
    assert_eq!(answer["poll_interval_secs"], 7);
    // The config is kept, signed: moved into `signed_config` (issue 40).
    assert!(answer.get("config").is_none(), "{answer}");
    assert!(answer["signed_config"]["signature"].is_string(), "{answer}");
    let s = &answer["targets"]["svc-server"];
    let sha1 = sha256_hex(&std::fs::read(&v1).unwrap());
    assert_eq!(s["version"], "1.0.0");
    assert_eq!(s["sha256"], sha1.as_str());
    assert_eq!(s["url"], format!("artifacts/{sha1}").as_str());
    assert_eq!(s["size"], std::fs::metadata(&v1).unwrap().len());
    assert_eq!(
        std::fs::read(mgmt.join(format!("artifacts/{sha1}"))).unwrap(),
        std::fs::read(&v1).unwrap()
    );
    // `targets` prints the same entries for an HTTPS app.
    let printed: serde_json::Value = serde_json::from_str(&ok(&[
        "targets",
        "--key",
        p(&key),
        "--url-prefix",
        "https://rel.example/a/",
        p(&v1),
    ]))
    .unwrap();
    assert_eq!(printed["svc-server"]["signature"], s["signature"]);
    assert_eq!(
        printed["svc-server"]["url"],
        format!("https://rel.example/a/{sha1}").as_str()
    );
    // A newer svc-server: the old file stays until --prune; the agent's file is kept. (No
    // deltas: a delta from the old file would keep it; delta_agent.rs tests that.)
    ok(&[
        "publish",
        "--key",
        p(&key),
        "--deltas",
        "0",
        p(&mgmt),
        p(&v2),
    ]);
    assert!(mgmt.join(format!("artifacts/{sha1}")).exists());
    let pruned = ok(&[
        "publish",
        "--key",
        p(&key),
        "--deltas",
        "0",
        "--prune",
        p(&mgmt),
        p(&v2),
    ]);
    assert!(
        pruned.contains(&format!("pruned artifacts/{sha1}")),
        "{pruned}"
    );
    assert!(!mgmt.join(format!("artifacts/{sha1}")).exists());
    let sha_a = sha256_hex(&std::fs::read(&a1).unwrap());
    assert!(mgmt.join(format!("artifacts/{sha_a}")).exists());
    assert!(
        ok(&["verify", "--pub", p(&d.join("k.pub")), p(&mgmt)]).contains("ok: svc-server 1.1.0")
    );
    // verify of a directory notices a changed file.
    let sha2 = sha256_hex(&std::fs::read(&v2).unwrap());
    std::fs::write(mgmt.join(format!("artifacts/{sha2}")), b"changed").unwrap();
    assert!(fails(&["verify", "--pub", p(&d.join("k.pub")), p(&mgmt)]).contains("has sha256"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// The real agent on a `file://` medium (a symlink swapped like a USB stick): it installs a
/// published release; a medium with a changed binary, one with a changed answer and one
/// replaying an older, validly signed release are each refused with a clear log line, and
/// the running version stays.
#[test]
fn the_agent_updates_from_a_medium_and_refuses_tampered_and_replayed_ones() {
    let sb = Sandbox::new("release-medium");
    let d = scratch("medium");
    let key = d.join("k");
    ok(&["keygen", p(&key)]);
    std::fs::copy(d.join("k.pub"), sb.root.join("etc/svc-signing.pub")).unwrap();
    let media = sb.root.join("media");
    sb.write_credentials(&format!("file://{}", media.display()));
    sb.install_fake_server();
    let version = env!("CARGO_PKG_VERSION");
    let medium = |n: &str, bins: &[&Path], extra: &[&str]| -> PathBuf {
        let m = d.join(n);
        std::fs::create_dir_all(&m).unwrap();
        std::fs::write(
            m.join("poll.json"),
            r#"{"poll_interval_secs": 1, "config": {"agent": {}}}"#,
        )
        .unwrap();
        let mut args = vec!["publish", "--key", p(&key)];
        args.extend_from_slice(extra);
        args.push(p(&m));
        args.extend(bins.iter().map(|b| p(b)));
        ok(&args);
        m
    };
    let plug = |m: &Path| {
        let tmp = sb.root.join(".media.tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(m, &tmp).unwrap();
        std::fs::rename(&tmp, &media).unwrap();
    };
    let link = || {
        std::fs::read_link(sb.root.join("opt/svc/bin/svc-server"))
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    let want = format!("../cache/svc-server-{version}");
    let server = PathBuf::from(env!("CARGO_BIN_EXE_svc-server"));
    plug(&medium("m1", &[&server], &[]));
    let mut agent = sb.spawn_agent(&[]);
    wait_for("the published svc-server active", 120, || link() == want);
    wait_for("it runs", 60, || {
        sb.log().contains(&format!("svc-server {version} up"))
    });

    let newer = d.join("newer");
    write_exec(&newer, &fake_binary("svc-server", "99.0.0", "ok", 0));
    // A changed binary on the medium, the answer as signed.
    let m2 = medium("m2", &[&newer], &[]);
    let answer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(m2.join("poll.json")).unwrap()).unwrap();
    let art = m2.join(answer["targets"]["svc-server"]["url"].as_str().unwrap());
    let mut b = std::fs::read(&art).unwrap();
    b[100] ^= 0x01;
    std::fs::write(&art, &b).unwrap();
    plug(&m2);
    wait_for("the changed binary refused", 120, || {
        sb.log()
            .contains("svc-server update failed: sha256 mismatch")
    });
    // A changed answer: another binary, its sha256 and size written in, the old signature.
    let m3 = medium("m3", &[&newer], &[]);
    let other = fake_binary("svc-server", "99.0.0", "exit1", 0);
    let mut answer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(m3.join("poll.json")).unwrap()).unwrap();
    let sha = sha256_hex(&other);
    std::fs::write(m3.join(format!("artifacts/{sha}")), &other).unwrap();
    answer["targets"]["svc-server"]["sha256"] = json!(sha);
    answer["targets"]["svc-server"]["size"] = json!(other.len());
    answer["targets"]["svc-server"]["url"] = json!(format!("artifacts/{sha}"));
    std::fs::write(m3.join("poll.json"), answer.to_string()).unwrap();
    plug(&m3);
    wait_for("the changed answer refused", 120, || {
        sb.log().contains(
            "svc-server update failed: signature check failed: bad signature for svc-server 99.0.0",
        )
    });
    // A replayed older release, validly signed.
    let older = d.join("older");
    write_exec(&older, &fake_binary("svc-server", "0.0.1", "ok", 0));
    plug(&medium("m4", &[&older], &[]));
    wait_for("the older release refused", 120, || {
        sb.log().contains(&format!(
            "svc-server: refusing 0.0.1, older than the running {version}"
        ))
    });
    // Nothing changed: the same version active and running, no other version cached.
    assert_eq!(link(), want);
    let cache: Vec<String> = std::fs::read_dir(sb.root.join("opt/svc/cache"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(cache, vec![format!("svc-server-{version}")], "{}", sb.log());
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sb.root.join("opt/svc/versions.json")).unwrap())
            .unwrap();
    assert_eq!(rec["svc-server"]["current"], version);
    terminate(&mut agent);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn swu_images_hold_signed_binaries_and_a_validated_config() {
    let d = scratch("swu");
    let key = d.join("vendor.key");
    ok(&["keygen", p(&key)]);
    let server = d.join("svc-server");
    write_exec(&server, &fake_binary("svc-server", "2.0.0", "ok", 0));
    let agent = d.join("svc-agent");
    write_exec(&agent, &fake_binary("svc-agent", "3.0.0", "ok", 0));
    let config = d.join("machine.json");
    std::fs::write(&config, br#"{"agent": {"svc-agent": {}}}"#).unwrap();
    let out = d.join("all.swu");
    let printed = ok(&[
        "swu",
        "--key",
        p(&key),
        "--out",
        p(&out),
        "--config",
        p(&config),
        "--config-version",
        "7",
        p(&agent),
        p(&server),
    ]);
    assert_eq!(printed.trim(), p(&out));
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len() % 512, 0);
    let desc = svc::update::swu::inspect(&bytes, svc::update::this_target()).unwrap();
    assert_eq!(desc.version, "2.0.0", "svc-server's version leads");
    let names: Vec<_> = desc.images.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["svc-agent", "svc-server", "config"]);
    // Each signature is the device's one scheme: it verifies under the vendor key.
    let keys =
        svc::update::verify::parse_public_keys(&std::fs::read(d.join("vendor.key.pub")).unwrap())
            .unwrap();
    for img in &desc.images {
        let size = if img.name == "config" {
            std::fs::metadata(&config).unwrap().len()
        } else {
            std::fs::metadata(d.join(&img.name)).unwrap().len()
        };
        let a = svc::update::Artifact {
            name: img.name.clone(),
            version: img.version.clone(),
            url: String::new(),
            sha256: Some(img.sha256.clone()),
            size: Some(size),
            signature: img.signature.clone(),
            identity: None,
        };
        svc::update::verify::verify_signature(&keys, &a, svc::update::this_target()).unwrap();
    }
    // Bad input changes nothing: an invalid config, a config alone without a target.
    std::fs::write(&config, br#"{"agent": {"svc-agent": {"hawkbit": 5}}}"#).unwrap();
    let e = fails(&[
        "swu",
        "--key",
        p(&key),
        "--out",
        p(&d.join("bad.swu")),
        "--config",
        p(&config),
        "--config-version",
        "8",
        p(&server),
    ]);
    assert!(e.contains("is not valid"), "{e}");
    assert!(!d.join("bad.swu").exists());
    std::fs::write(&config, br#"{"agent": {"svc-agent": {}}}"#).unwrap();
    let e = fails(&[
        "swu",
        "--key",
        p(&key),
        "--config",
        p(&config),
        "--config-version",
        "8",
    ]);
    assert!(e.contains("--target"), "{e}");
}

/// Issue 40, finding 9: the release tool holds the private key, so it must never run what
/// it signs. A "build output" that writes a marker when run (it could as well copy
/// `vendor.key`) goes through every command that reads a binary; none may run it.
#[test]
fn the_release_tool_never_runs_what_it_signs() {
    let d = scratch("no-exec");
    let key = d.join("k");
    ok(&["keygen", p(&key)]);
    let marker = d.join("executed");
    let bin = d.join("svc-server");
    write_exec(&bin, &fake_binary("svc-server", "2.0.0", "ok", 0));
    let mgmt = d.join("m");
    ok(&["init", p(&mgmt)]);
    let run = |args: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_svc-release"))
            .args(args)
            .env("SVC_FAKE_EXECUTED", &marker)
            .output()
            .unwrap();
        assert!(
            !marker.exists(),
            "svc-release {args:?} ran the binary it signs"
        );
        assert!(
            out.status.success(),
            "svc-release {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let sig = run(&["sign", "--key", p(&key), p(&bin)]);
    let pubkey = d.join("k.pub");
    run(&[
        "verify",
        "--pub",
        p(&pubkey),
        "--signature",
        sig.trim(),
        p(&bin),
    ]);
    let targets = run(&["targets", "--key", p(&key), p(&bin)]);
    assert!(targets.contains("\"2.0.0\""), "{targets}");
    run(&["publish", "--key", p(&key), p(&mgmt), p(&bin)]);
    run(&["verify", "--pub", p(&pubkey), p(&mgmt)]);
    run(&[
        "swu",
        "--key",
        p(&key),
        "--out",
        p(&d.join("s.swu")),
        p(&bin),
    ]);
    // The real builds: what their stamps say is what `version --json` says (run here, by the
    // test, not by the tool).
    for exe in [
        env!("CARGO_BIN_EXE_svc-agent"),
        env!("CARGO_BIN_EXE_svc-server"),
    ] {
        let own: serde_json::Value = serde_json::from_slice(
            &Command::new(exe)
                .args(["version", "--json"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let name = own["binary_name"].as_str().unwrap();
        let printed: serde_json::Value =
            serde_json::from_str(&run(&["targets", "--key", p(&key), exe])).unwrap();
        assert_eq!(printed[name]["version"], own["version"], "{exe}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// Issue 40, finding 7: `publish` signs the machine config it publishes (poll.json's own
/// `config`, or `--config`) as `signed_config`, a file in `artifacts/` beside the binaries;
/// `verify` checks it, and fails on a changed file or an unsigned config.
#[test]
fn publish_signs_the_config_and_verify_checks_it() {
    let d = scratch("config");
    let key = d.join("k");
    ok(&["keygen", p(&key)]);
    let pubkey = d.join("k.pub");
    let mgmt = d.join("m");
    std::fs::create_dir_all(&mgmt).unwrap();
    let cfg = json!({"agent": {"svc-server": {"pin_version": "1.0.0"}}});
    std::fs::write(
        mgmt.join("poll.json"),
        json!({"poll_interval_secs": 7, "config": cfg}).to_string(),
    )
    .unwrap();
    let bin = d.join("svc-server");
    write_exec(&bin, &fake_binary("svc-server", "1.0.0", "ok", 0));
    let out = ok(&["publish", "--key", p(&key), p(&mgmt), p(&bin)]);
    assert!(out.contains("published the config"), "{out}");
    let answer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mgmt.join("poll.json")).unwrap()).unwrap();
    assert!(answer.get("config").is_none(), "{answer}");
    assert_eq!(answer["poll_interval_secs"], 7);
    let sc = &answer["signed_config"];
    let file = mgmt.join(sc["url"].as_str().unwrap());
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&bytes).unwrap(),
        cfg
    );
    assert_eq!(sc["sha256"], sha256_hex(&bytes).as_str());
    // The device's one signature check, under the name `config`.
    let a = Artifact {
        name: "config".into(),
        version: sc["version"].as_str().unwrap().into(),
        url: String::new(),
        sha256: Some(sha256_hex(&bytes)),
        size: Some(bytes.len() as u64),
        signature: sc["signature"].as_str().map(str::to_string),
        identity: None,
    };
    let keys = svc::update::verify::parse_public_keys(&std::fs::read(&pubkey).unwrap()).unwrap();
    svc::update::verify::verify_signature(&keys, &a, std::env::consts::ARCH).unwrap();
    let v = ok(&["verify", "--pub", p(&pubkey), p(&mgmt)]);
    assert!(v.contains("ok: config"), "{v}");
    // Publishing binaries again keeps the signed config, and --prune keeps its file.
    ok(&["publish", "--key", p(&key), "--prune", p(&mgmt), p(&bin)]);
    assert!(file.exists());
    // A config given as a file, with a version; an invalid one changes nothing.
    let given = d.join("machine.json");
    std::fs::write(
        &given,
        r#"{"agent": {"svc-server": {"disable_subsystem": "yes"}}}"#,
    )
    .unwrap();
    let before = snapshot(&mgmt);
    let e = fails(&[
        "publish",
        "--key",
        p(&key),
        "--config",
        p(&given),
        p(&mgmt),
        p(&bin),
    ]);
    assert!(e.contains("is not valid"), "{e}");
    assert_eq!(snapshot(&mgmt), before);
    std::fs::write(&given, r#"{"agent": {}}"#).unwrap();
    ok(&[
        "publish",
        "--key",
        p(&key),
        "--config",
        p(&given),
        "--config-version",
        "2026.11",
        "--target",
        std::env::consts::ARCH,
        p(&mgmt),
    ]);
    assert!(ok(&["verify", "--pub", p(&pubkey), p(&mgmt)]).contains("ok: config 2026.11"));
    // A changed config file, and an unsigned config beside the signed one: verify fails.
    let answer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mgmt.join("poll.json")).unwrap()).unwrap();
    let file = mgmt.join(answer["signed_config"]["url"].as_str().unwrap());
    let good = std::fs::read(&file).unwrap();
    std::fs::write(&file, br#"{"agent": {"svc-agent": {}}}"#).unwrap();
    assert!(fails(&["verify", "--pub", p(&pubkey), p(&mgmt)]).contains("/signed_config"));
    std::fs::write(&file, &good).unwrap();
    let mut with_inline = answer.clone();
    with_inline["config"] = json!({"agent": {}});
    std::fs::write(mgmt.join("poll.json"), with_inline.to_string()).unwrap();
    assert!(fails(&["verify", "--pub", p(&pubkey), p(&mgmt)]).contains("config is not signed"));
    std::fs::remove_dir_all(&d).unwrap();
}
