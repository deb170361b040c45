//! Enterprise Wi-Fi (802.1X, #45): the checks of a network's `eap` settings (shared by the
//! config and the portal), the `[802-1x]` section of its NetworkManager keyfile, and the
//! certificate and key files NetworkManager reads (0600 under the state directory; the
//! password stays in the 0600 keyfile, as a pass key does: never in argv).
use crate::config::model::{Eap, EapMethod};
use crate::fsutil::Dir;
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};

/// Where the certificates and keys of enterprise networks live: one folder per profile.
pub(crate) fn dir(paths: &crate::paths::Paths) -> PathBuf {
    paths.state_dir().join("eap")
}

pub(crate) use crate::config::eap_rules::{
    check_domain, check_identity, check_password, parse_method,
};

/// The files a profile's keyfile names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Files {
    pub ca: Option<PathBuf>,
    pub client: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// Writes the profile's certificates and key (each 0600, atomically, never through a link)
/// into its own folder `<dir>/<keyfile stem>/`, and removes the ones it no longer has.
pub(crate) fn write_files(dir: &Path, id: &str, eap: &Eap) -> io::Result<Files> {
    let base = Dir::create(dir)?;
    let stem = folder(id);
    let sub = base.sub(OsStr::new(&stem), true)?;
    let mut files = Files::default();
    for (name, pem, slot) in [
        ("ca.pem", &eap.ca_cert, &mut files.ca),
        ("client.pem", &eap.client_cert, &mut files.client),
        ("key.pem", &eap.private_key, &mut files.key),
    ] {
        match pem {
            Some(text) => {
                sub.write_atomic(OsStr::new(name), text.as_bytes(), 0o600)?;
                *slot = Some(dir.join(&stem).join(name));
            }
            None => match sub.remove(OsStr::new(name)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            },
        }
    }
    Ok(files)
}

/// Removes a profile's certificate folder (the profile was deleted).
pub(crate) fn remove_files(dir: &Path, id: &str) -> io::Result<()> {
    match std::fs::remove_dir_all(dir.join(folder(id))) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The folder of a profile: its keyfile name's stem (injective, `[A-Za-z0-9_-]` only).
fn folder(id: &str) -> String {
    let name = super::nm::keyfile_name(id);
    name.trim_end_matches(".nmconnection").to_string()
}

/// The keyfile's `[wifi-security]` and `[802-1x]` sections. `esc` is the keyfile's string
/// escaping.
pub(crate) fn keyfile_sections(eap: &Eap, files: &Files, esc: fn(&str) -> String) -> String {
    let mut k = format!(
        "\n[wifi-security]\nkey-mgmt=wpa-eap\nproto=rsn\n\n[802-1x]\neap={};\nidentity={}\n",
        eap.method.nm_name(),
        esc(&eap.identity)
    );
    if let Some(a) = &eap.anonymous_identity {
        k.push_str(&format!("anonymous-identity={}\n", esc(a)));
    }
    if eap.method != EapMethod::Tls {
        let p2 = eap.phase2.as_deref().unwrap_or("mschapv2");
        k.push_str(&format!("phase2-auth={}\n", esc(p2)));
        if let Some(pw) = &eap.password {
            k.push_str(&format!("password={}\n", esc(pw)));
        }
    }
    let path = |p: &PathBuf| esc(&p.to_string_lossy());
    match &files.ca {
        Some(ca) => k.push_str(&format!("ca-cert={}\n", path(ca))),
        // A domain without a CA certificate is checked against the system's CAs.
        None => k.push_str("system-ca-certs=true\n"),
    }
    if let Some(d) = &eap.domain {
        k.push_str(&format!("domain-suffix-match={}\n", esc(d)));
    }
    if let Some(c) = &files.client {
        k.push_str(&format!("client-cert={}\n", path(c)));
    }
    if let Some(key) = &files.key {
        k.push_str(&format!("private-key={}\n", path(key)));
        match &eap.private_key_password {
            Some(pw) => k.push_str(&format!("private-key-password={}\n", esc(pw))),
            // An unencrypted key: no secret agent is asked for a password.
            None => k.push_str("private-key-password-flags=4\n"),
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::eap_rules::{check_pem, MAX_PEM};
    use crate::provisioning::nm::{keyfile, NetworkBackend, Nmcli, WifiProfile};
    use std::os::unix::fs::PermissionsExt;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBCERT\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIKEYSECRETBYTES\n-----END PRIVATE KEY-----\n";

    fn eap(method: EapMethod) -> Eap {
        Eap {
            method,
            identity: "alice@example.org".into(),
            anonymous_identity: None,
            password: None,
            phase2: None,
            ca_cert: None,
            domain: None,
            client_cert: None,
            private_key: None,
            private_key_password: None,
        }
    }

    fn profile(e: Eap) -> WifiProfile {
        WifiProfile {
            id: "net-corp wifi".into(),
            ssid: "corp wifi".into(),
            psk: String::new(),
            priority: 5,
            hotspot: false,
            hidden: false,
            ifname: None,
            eap: Some(e),
        }
    }

    fn section<'a>(k: &'a str, name: &str) -> Vec<&'a str> {
        k.split(&format!("[{name}]\n"))
            .nth(1)
            .unwrap_or("")
            .split("\n[")
            .next()
            .unwrap()
            .lines()
            .collect()
    }

    #[test]
    fn peap_keyfile_has_identity_password_inner_method_and_a_server_check() {
        let e = Eap {
            password: Some("s3cret pass\\word".into()),
            domain: Some("radius.example.org".into()),
            anonymous_identity: Some("anonymous@example.org".into()),
            ..eap(EapMethod::Peap)
        };
        let k = keyfile(&profile(e), &Files::default());
        assert_eq!(
            section(&k, "wifi-security"),
            ["key-mgmt=wpa-eap", "proto=rsn"]
        );
        assert_eq!(
            section(&k, "802-1x"),
            [
                "eap=peap;",
                "identity=alice@example.org",
                "anonymous-identity=anonymous@example.org",
                "phase2-auth=mschapv2",
                "password=s3cret\\spass\\\\word",
                "system-ca-certs=true",
                "domain-suffix-match=radius.example.org",
            ]
        );
        assert!(!k.contains("psk="), "{k}");
    }

    #[test]
    fn ttls_takes_its_inner_method_and_the_ca_file() {
        let e = Eap {
            password: Some("password1".into()),
            phase2: Some("pap".into()),
            ca_cert: Some(CERT.into()),
            ..eap(EapMethod::Ttls)
        };
        let files = Files {
            ca: Some("/opt/svc/eap/svc-net-corp/ca.pem".into()),
            ..Default::default()
        };
        let k = keyfile(&profile(e), &files);
        let s = section(&k, "802-1x");
        assert!(
            s.contains(&"eap=ttls;") && s.contains(&"phase2-auth=pap"),
            "{k}"
        );
        assert!(
            s.contains(&"ca-cert=/opt/svc/eap/svc-net-corp/ca.pem"),
            "{k}"
        );
        assert!(!s.contains(&"system-ca-certs=true"), "{k}");
    }

    /// The certificates and key go to files of their own, 0600, never through a link; the
    /// keyfile names them; nmcli's argv never carries a secret; deleting the profile
    /// removes them; a profile that no longer has a file loses it.
    #[test]
    fn tls_files_are_0600_named_in_the_keyfile_and_never_in_argv() {
        let dir = std::env::temp_dir().join(format!("svc-eap-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("conns")).unwrap();
        let prog = dir.join("nmcli");
        std::fs::write(
            &prog,
            format!(
                "#!/bin/sh\necho \"$*\" >> '{}'\n",
                dir.join("argv").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut nm = Nmcli::new(dir.join("conns"), dir.join("eap"));
        nm.program = prog;
        let e = Eap {
            ca_cert: Some(CERT.into()),
            client_cert: Some(CERT.into()),
            private_key: Some(KEY.into()),
            private_key_password: Some("keypass-777".into()),
            ..eap(EapMethod::Tls)
        };
        let p = profile(e.clone());
        nm.save_wifi(&p).unwrap();
        let folder = dir.join("eap/svc-net-corp_20wifi");
        for f in ["ca.pem", "client.pem", "key.pem"] {
            let m = std::fs::metadata(folder.join(f)).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o600, "{f}");
        }
        assert_eq!(
            std::fs::read_to_string(folder.join("key.pem")).unwrap(),
            KEY
        );
        let kf = dir.join("conns/svc-net-corp_20wifi.nmconnection");
        let k = std::fs::read_to_string(&kf).unwrap();
        let s = section(&k, "802-1x");
        assert!(s.contains(&"eap=tls;"), "{k}");
        assert!(
            s.contains(&format!("private-key={}", folder.join("key.pem").display()).as_str()),
            "{k}"
        );
        assert!(s.contains(&"private-key-password=keypass-777"), "{k}");
        assert!(
            !k.contains("MIIKEY"),
            "the key is in its own file, not the keyfile"
        );
        let mode = std::fs::metadata(&kf).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let argv = std::fs::read_to_string(dir.join("argv")).unwrap();
        for secret in ["keypass-777", "MIIKEY", "BEGIN"] {
            assert!(!argv.contains(secret), "{secret} in argv: {argv}");
        }
        assert!(!format!("{p:?} {e:?}").contains("keypass"), "Debug");
        assert!(!format!("{e:?}").contains("MIIKEY"), "Debug");

        // Now without a client key (a changed config): the old key file goes.
        let mut e2 = e.clone();
        e2.private_key_password = None;
        e2.client_cert = None;
        e2.private_key = None;
        nm.save_wifi(&profile(e2)).unwrap();
        assert!(!folder.join("key.pem").exists() && folder.join("ca.pem").exists());

        // A link planted where a file goes is replaced, never followed.
        let victim = dir.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::remove_file(folder.join("ca.pem")).unwrap();
        std::os::unix::fs::symlink(&victim, folder.join("ca.pem")).unwrap();
        nm.save_wifi(&profile(e)).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");

        nm.delete(&p.id).unwrap();
        assert!(!folder.exists(), "certificates removed with the profile");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn checks_name_what_is_wrong() {
        assert!(check_pem(CERT, false).is_ok());
        assert!(check_pem(KEY, true).is_ok());
        assert!(check_pem(
            "-----BEGIN EC PRIVATE KEY-----\nx\n-----END EC PRIVATE KEY-----",
            true
        )
        .is_ok());
        assert!(check_pem(KEY, false).unwrap_err().contains("certificate"));
        assert!(check_pem(CERT, true).unwrap_err().contains("private key"));
        assert!(check_pem("hello", false).is_err());
        let big = format!("{CERT}{}", "A".repeat(MAX_PEM));
        assert!(check_pem(&big, false).unwrap_err().contains("at most"));
        assert!(check_domain("radius.example.org").is_ok());
        for bad in ["", "a..b", "a b", "x;y", ".org"] {
            assert!(check_domain(bad).is_err(), "{bad:?}");
        }
        assert!(check_identity("a\nb").is_err() && check_identity("").is_err());
        assert!(check_password(&"p".repeat(257)).is_err());
        assert!(parse_method("leap").unwrap_err().contains("\"leap\""));
    }
}
