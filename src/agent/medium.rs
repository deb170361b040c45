//! What a management directory (`file://DIR`: a USB stick, a share, a factory folder) may
//! change. The directory proves nothing about who wrote it, so on a device with a vendor key
//! (`/etc/svc-signing.pub`) its machine config is authority only when signed by that key
//! (`svc-release publish` writes it as `signed_config`), and even a signed config runs no
//! program from the directory itself. Without a vendor key nothing is signed and the
//! directory's config is taken as before. docs/releases.md, *What a stick can change*.
use crate::config::Diagnostic;
use crate::encoding::hex;
use crate::paths::Paths;
use crate::protocol::MediumConfig;
use crate::update::{verify, Artifact};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The image name a config is signed under (as in an `.swu`).
const CONFIG_NAME: &str = "config";

fn refused(path: &str, message: String) -> Diagnostic {
    Diagnostic {
        path: path.into(),
        message,
    }
}

/// The config the directory `dir` offers, if this device may take it. `Ok(None)`: it offers
/// none. `Err`: refused, with where and why (the last good config stays).
pub(crate) fn accept(
    paths: &Paths,
    dir: &Path,
    offered: MediumConfig,
) -> Result<Option<Value>, Diagnostic> {
    let keyed = verify::vendor_key_present(paths);
    let key_file = paths.signing_key();
    let raw = match (offered.signed, offered.inline) {
        (Some((target, bytes)), inline) => {
            if inline.is_some() {
                crate::warn!(
                    "config",
                    "poll.json has both a config and a signed_config; the signed one is used"
                );
            }
            let bytes = bytes.map_err(|e| refused("/signed_config/url", e.to_string()))?;
            let a = Artifact {
                name: CONFIG_NAME.into(),
                version: target.version.clone(),
                url: target.url.clone(),
                sha256: target.sha256.clone(),
                size: target.size,
                signature: target.signature.clone(),
                identity: None,
            };
            check_content(&a, &bytes)?;
            verify::check_signature(paths, &a).map_err(|e| {
                refused(
                    "/signed_config/signature",
                    format!("the config {} from {}: {e}", a.version, dir.display()),
                )
            })?;
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                refused(
                    "/signed_config/url",
                    format!("{} is not JSON: {e}", target.url),
                )
            })?;
            v
        }
        (None, Some(_)) if keyed => {
            return Err(refused(
                "/config",
                format!(
                    "the config in {}/poll.json is not signed and this device has a vendor key ({}): publish it with `svc-release publish --key KEY --config FILE {}` (docs/releases.md)",
                    dir.display(),
                    key_file.display(),
                    dir.display()
                ),
            ))
        }
        (None, Some(inline)) => inline,
        (None, None) => return Ok(None),
    };
    if keyed {
        no_code_from(dir, &raw)?;
    }
    Ok(Some(raw))
}

/// The bytes against the signed size and sha256.
fn check_content(a: &Artifact, bytes: &[u8]) -> Result<(), Diagnostic> {
    let got = hex(&Sha256::digest(bytes));
    if a.size != Some(bytes.len() as u64)
        || !a
            .sha256
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case(&got))
    {
        return Err(refused(
            "/signed_config",
            format!(
                "{} has {} bytes and sha256 {got}; signed_config says {:?} bytes, sha256 {}",
                a.url,
                bytes.len(),
                a.size,
                a.sha256.as_deref().unwrap_or("none")
            ),
        ));
    }
    Ok(())
}

/// A signed config may not run a program that lives in the directory: the vendor signed
/// the config, not the program's bytes, which anyone holding the stick can change. A local
/// module's `executable_path`, and every path in its `env` values (`PATH`-like lists split
/// at `:`; `LD_PRELOAD`, `PYTHONPATH` load code too), must lie outside it, links resolved.
fn no_code_from(dir: &Path, config: &Value) -> Result<(), Diagnostic> {
    let dir_real = real(dir);
    let inside = |p: &str| {
        let p = Path::new(p);
        p.is_absolute() && (p.starts_with(dir) || real(p).starts_with(&dir_real))
    };
    let modules = config.get("modules").and_then(Value::as_array);
    for (i, m) in modules.into_iter().flatten().enumerate() {
        let mut named: Vec<(String, &str)> = Vec::new();
        if let Some(exe) = m.get("executable_path").and_then(Value::as_str) {
            named.push((format!("/modules/{i}/executable_path"), exe));
        }
        let env = m.get("env").and_then(Value::as_object);
        for (k, v) in env.into_iter().flatten() {
            for piece in v.as_str().unwrap_or_default().split(':') {
                named.push((format!("/modules/{i}/env/{k}"), piece));
            }
        }
        if let Some((at, p)) = named.into_iter().find(|(_, p)| inside(p)) {
            return Err(refused(
                &at,
                format!(
                    "{p} is in the management directory {}; on a device with a vendor key no program runs from it (only signed svc-agent and svc-server releases do)",
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

/// `p` with every link of its longest existing ancestor resolved (a path need not exist
/// yet to be refused: the stick may hold it by the time svc-server looks).
fn real(p: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = p;
    loop {
        if let Ok(base) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(base, |acc, c| acc.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return p.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Target;
    use ring::signature::{Ed25519KeyPair, KeyPair};
    use serde_json::json;

    fn machine(test: &str) -> (Paths, PathBuf) {
        let root = std::env::temp_dir().join(format!("svc-medium-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("stick");
        std::fs::create_dir_all(&dir).unwrap();
        (Paths::new(&root), dir)
    }

    /// Installs a vendor key; returns a signer of configs for this architecture.
    fn vendor_key(paths: &Paths) -> impl Fn(&[u8], &str) -> Target {
        let rng = ring::rand::SystemRandom::new();
        let doc = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let kp = Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap();
        let key = paths.signing_key();
        std::fs::create_dir_all(key.parent().unwrap()).unwrap();
        std::fs::write(&key, format!("{}\n", hex(kp.public_key().as_ref()))).unwrap();
        move |bytes: &[u8], version: &str| {
            let a = Artifact {
                name: CONFIG_NAME.into(),
                version: version.into(),
                url: String::new(),
                sha256: Some(hex(&Sha256::digest(bytes))),
                size: Some(bytes.len() as u64),
                signature: None,
                identity: None,
            };
            let sig = kp.sign(&a.signed_message(crate::update::this_target()));
            Target {
                version: version.into(),
                url: "artifacts/c".into(),
                sha256: a.sha256,
                size: a.size,
                signature: Some(crate::encoding::base64_encode(sig.as_ref())),
                deltas: Vec::new(),
            }
        }
    }

    fn signed(t: Target, bytes: &[u8]) -> MediumConfig {
        MediumConfig {
            inline: None,
            signed: Some((t, Ok(bytes.to_vec()))),
        }
    }

    #[test]
    fn without_a_vendor_key_the_directory_is_taken_as_before() {
        let (paths, dir) = machine("nokey");
        let cfg = json!({"agent": {}});
        let inline = MediumConfig {
            inline: Some(cfg.clone()),
            signed: None,
        };
        assert_eq!(accept(&paths, &dir, inline).unwrap(), Some(cfg));
        let none = MediumConfig {
            inline: None,
            signed: None,
        };
        assert_eq!(accept(&paths, &dir, none).unwrap(), None);
    }

    #[test]
    fn with_a_vendor_key_only_a_signed_config_without_code_from_the_directory_is_taken() {
        let (paths, dir) = machine("key");
        let sign = vendor_key(&paths);
        let bytes = br#"{"agent": {"svc-server": {"pin_version": "0.1.0"}}}"#;
        // Unsigned: refused at /config, naming the key and the tool.
        let inline = MediumConfig {
            inline: Some(json!({"agent": {}})),
            signed: None,
        };
        let e = accept(&paths, &dir, inline).unwrap_err();
        assert_eq!(e.path, "/config");
        assert!(e.message.contains("svc-release publish"), "{e}");
        // Signed: taken (its pin with it).
        let got = accept(&paths, &dir, signed(sign(bytes, "7"), bytes)).unwrap();
        assert_eq!(got.unwrap()["agent"]["svc-server"]["pin_version"], "0.1.0");
        // Other bytes under the signed sha256, and another version under the signature.
        let e = accept(&paths, &dir, signed(sign(bytes, "7"), b"{}")).unwrap_err();
        assert_eq!(e.path, "/signed_config");
        let t = Target {
            version: "8".into(),
            ..sign(bytes, "7")
        };
        let e = accept(&paths, &dir, signed(t, bytes)).unwrap_err();
        assert!(e.message.contains("bad signature for config 8"), "{e}");
        // No signature at all, an unreadable file.
        let t = Target {
            signature: None,
            ..sign(bytes, "7")
        };
        assert!(accept(&paths, &dir, signed(t, bytes)).is_err());
        let unreadable = MediumConfig {
            inline: None,
            signed: Some((
                sign(bytes, "7"),
                Err(crate::protocol::file::MemberError::NotInside("../x".into())),
            )),
        };
        assert_eq!(
            accept(&paths, &dir, unreadable).unwrap_err().path,
            "/signed_config/url"
        );
        // Signed, but its module's program is on the stick (also through a link to it).
        let carrying = serde_json::to_vec(&json!({"modules": [
            {"type": "local", "name": "m", "module_id": "a:m",
             "executable_path": dir.join("bin/m").display().to_string()}]}))
        .unwrap();
        let e = accept(&paths, &dir, signed(sign(&carrying, "9"), &carrying)).unwrap_err();
        assert_eq!(e.path, "/modules/0/executable_path");
        let link = paths.root().join("via-link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/m"), "#!/bin/sh\n").unwrap();
        let carrying = serde_json::to_vec(&json!({"modules": [
            {"type": "local", "name": "m", "module_id": "a:m",
             "executable_path": link.join("bin/m").display().to_string()}]}))
        .unwrap();
        assert!(accept(&paths, &dir, signed(sign(&carrying, "9"), &carrying)).is_err());
        // A library preloaded from the stick, a PATH entry on it (not there yet).
        let preload = serde_json::to_vec(&json!({"modules": [
            {"type": "local", "name": "m", "module_id": "a:m", "executable_path": "/bin/true",
             "env": {"LD_PRELOAD": link.join("evil.so").display().to_string()}}]}))
        .unwrap();
        let e = accept(&paths, &dir, signed(sign(&preload, "9"), &preload)).unwrap_err();
        assert_eq!(e.path, "/modules/0/env/LD_PRELOAD");
        let path_entry = serde_json::to_vec(&json!({"modules": [
            {"type": "local", "name": "m", "module_id": "a:m", "executable_path": "/bin/true",
             "env": {"PATH": format!("/usr/bin:{}", dir.join("new/bin").display())}}]}))
        .unwrap();
        let e = accept(&paths, &dir, signed(sign(&path_entry, "9"), &path_entry)).unwrap_err();
        assert_eq!(e.path, "/modules/0/env/PATH");
        // A module elsewhere, with an ordinary environment: taken.
        let fine = serde_json::to_vec(&json!({"modules": [
            {"type": "local", "name": "m", "module_id": "a:m", "executable_path": "/bin/true",
             "env": {"PATH": "/usr/bin:/bin", "MODE": "x"}}]}))
        .unwrap();
        assert!(accept(&paths, &dir, signed(sign(&fine, "9"), &fine)).is_ok());
        // A malformed key file refuses too (it never waives the rule).
        std::fs::write(paths.signing_key(), "not a key\n").unwrap();
        assert!(accept(&paths, &dir, signed(sign(bytes, "7"), bytes)).is_err());
        let inline = MediumConfig {
            inline: Some(json!({"agent": {}})),
            signed: None,
        };
        assert!(accept(&paths, &dir, inline).is_err());
        std::fs::remove_dir_all(paths.root()).unwrap();
    }
}
