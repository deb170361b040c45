//! The rules of a network's 802.1X settings (docs/config.md, "Enterprise Wi-Fi"): the config's
//! validator and the captive portal check the same fields with them; `provisioning::eap`
//! writes what passed.
use super::model::EapMethod;

/// Certificates beyond this are no certificate chain anyone deploys (a CA bundle of a few
/// intermediates is a few KiB).
pub(crate) const MAX_PEM: usize = 64 * 1024;
/// Identities: an NAI (`user@realm`) fits a DNS name's length.
const MAX_IDENTITY: usize = 253;
const MAX_PASSWORD: usize = 256;

/// Inner methods NetworkManager offers for each outer one.
pub(crate) fn phase2_allowed(m: EapMethod) -> &'static [&'static str] {
    match m {
        EapMethod::Peap => &["mschapv2", "gtc", "md5"],
        EapMethod::Ttls => &["mschapv2", "mschap", "pap", "chap"],
        EapMethod::Tls => &[],
    }
}

pub(crate) fn parse_method(s: &str) -> Result<EapMethod, String> {
    match s {
        "tls" => Ok(EapMethod::Tls),
        "peap" => Ok(EapMethod::Peap),
        "ttls" => Ok(EapMethod::Ttls),
        other => Err(format!(
            "eap method {other:?} is not supported: expected \"tls\", \"peap\" or \"ttls\""
        )),
    }
}

/// A user name or anonymous identity: 1 to 253 bytes, no control characters.
pub(crate) fn check_identity(s: &str) -> Result<(), &'static str> {
    if s.is_empty() || s.len() > MAX_IDENTITY || s.chars().any(char::is_control) {
        Err("must be 1 to 253 bytes without control characters")
    } else {
        Ok(())
    }
}

/// A password: 1 to 256 bytes, no control characters (stored escaped in the keyfile).
pub(crate) fn check_password(s: &str) -> Result<(), &'static str> {
    if s.is_empty() || s.len() > MAX_PASSWORD || s.chars().any(char::is_control) {
        Err("must be 1 to 256 bytes without control characters")
    } else {
        Ok(())
    }
}

/// The server's domain: a DNS name (letters, digits, `-`, `.`), up to 253 bytes.
pub(crate) fn check_domain(s: &str) -> Result<(), &'static str> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err("must be a DNS name such as \"radius.example.org\"")
    }
}

/// PEM text of one or more blocks of `kind` (`CERTIFICATE`, or a private key of any
/// flavour: `PRIVATE KEY`, `RSA PRIVATE KEY`, `EC PRIVATE KEY`, `ENCRYPTED PRIVATE KEY`).
pub(crate) fn check_pem(s: &str, key: bool) -> Result<(), String> {
    if s.len() > MAX_PEM {
        return Err(format!(
            "is {} bytes; at most {MAX_PEM} are accepted",
            s.len()
        ));
    }
    if !s.is_ascii() {
        return Err("must be PEM text (ASCII)".into());
    }
    let begin = s.find("-----BEGIN ");
    let kind_ok = begin.is_some_and(|i| {
        let rest = &s[i + 11..];
        let kind = rest.split("-----").next().unwrap_or("");
        if key {
            kind.ends_with("PRIVATE KEY")
        } else {
            kind == "CERTIFICATE"
        }
    });
    if !kind_ok || !s.contains("-----END ") {
        return Err(if key {
            "must be a PEM private key (-----BEGIN ... PRIVATE KEY-----)".into()
        } else {
            "must be a PEM certificate (-----BEGIN CERTIFICATE-----)".into()
        });
    }
    Ok(())
}
