//! Captive-portal request parsing: minimal HTTP/1.1 with strict limits. Pure (bytes in,
//! typed request or error out) so it can be fuzzed; the server loop wraps it.
use std::fmt;

pub(crate) const MAX_REQUEST_LINE: usize = 2048;
pub(crate) const MAX_HEADERS_BYTES: usize = 8192;
pub const MAX_HEADERS: usize = 64;
pub const MAX_BODY: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Need more bytes (the head or body is not complete yet).
    Incomplete,
    TooLarge,
    BadUtf8,
    Malformed(&'static str),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Incomplete => write!(f, "incomplete request"),
            ParseError::TooLarge => write!(f, "request too large"),
            ParseError::BadUtf8 => write!(f, "request is not UTF-8"),
            ParseError::Malformed(m) => write!(f, "malformed request: {m}"),
        }
    }
}
impl std::error::Error for ParseError {}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortalRequest {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl PortalRequest {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub(crate) fn cookie(&self, name: &str) -> Option<&str> {
        self.header("cookie")?.split(';').find_map(|c| {
            let (k, v) = c.trim().split_once('=')?;
            (k == name).then_some(v)
        })
    }
}

/// Parse one complete request from `buf`.
pub fn parse_request(buf: &[u8]) -> Result<PortalRequest, ParseError> {
    let head_end = match find(buf, b"\r\n\r\n") {
        Some(i) => i,
        None if buf.len() > MAX_REQUEST_LINE + MAX_HEADERS_BYTES => {
            return Err(ParseError::TooLarge)
        }
        None => return Err(ParseError::Incomplete),
    };
    if head_end > MAX_REQUEST_LINE + MAX_HEADERS_BYTES {
        return Err(ParseError::TooLarge);
    }
    let head = std::str::from_utf8(&buf[..head_end]).map_err(|_| ParseError::BadUtf8)?;
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or("");
    if line.len() > MAX_REQUEST_LINE {
        return Err(ParseError::TooLarge);
    }
    let mut parts = line.split(' ');
    let (method, path, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(p), Some(v), None) => (m, p, v),
        _ => return Err(ParseError::Malformed("request line")),
    };
    if !matches!(method, "GET" | "POST" | "HEAD") {
        return Err(ParseError::Malformed("method"));
    }
    if !path.starts_with('/') || version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(ParseError::Malformed("request line"));
    }
    let mut headers = Vec::new();
    for l in lines {
        if headers.len() >= MAX_HEADERS {
            return Err(ParseError::TooLarge);
        }
        let (k, v) = l.split_once(':').ok_or(ParseError::Malformed("header"))?;
        if k.is_empty() || k.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(ParseError::Malformed("header name"));
        }
        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
    }
    let req_headers = PortalRequest {
        method: method.into(),
        path: path.into(),
        headers,
        body: String::new(),
    };
    if req_headers.header("transfer-encoding").is_some() {
        return Err(ParseError::Malformed("transfer-encoding not supported"));
    }
    let len = match req_headers.header("content-length") {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| ParseError::Malformed("content-length"))?,
    };
    if len > MAX_BODY {
        return Err(ParseError::TooLarge);
    }
    let body = &buf[head_end + 4..];
    if body.len() < len {
        return Err(ParseError::Incomplete);
    }
    let body = std::str::from_utf8(&body[..len]).map_err(|_| ParseError::BadUtf8)?;
    Ok(PortalRequest {
        body: body.into(),
        ..req_headers
    })
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Decode an `application/x-www-form-urlencoded` body; values are taken literally after
/// percent-decoding (nothing is ever passed to a shell).
pub fn parse_form(body: &str) -> Result<Vec<(String, String)>, ParseError> {
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Ok((pct_decode(k)?, pct_decode(v)?))
        })
        .collect()
}

fn pct_decode(s: &str) -> Result<String, ParseError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let byte = b.get(i + 1..i + 3).and_then(crate::encoding::hex_byte);
                out.push(byte.ok_or(ParseError::Malformed("escape"))?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| ParseError::BadUtf8)
}

/// A network submitted through the form or `POST /api/connect`, validated. `Debug` never
/// shows the pass key (it is not registered with the log scrubber: see `portal_http::connect`).
#[derive(Clone, PartialEq, Eq)]
pub struct NetworkInput {
    pub ssid: String,
    pub psk: String,
    /// An enterprise network (PEAP or TTLS: identity and password, the server checked by
    /// its domain against the system's CAs); `psk` is then empty.
    /// (Boxed: most networks have none, and `NetworkInput` travels in enums.)
    pub eap: Option<Box<crate::config::model::Eap>>,
}

impl fmt::Debug for NetworkInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NetworkInput(ssid {:?})", self.ssid)
    }
}

/// Why a network handed over (portal form or API, Improv, DPP) is refused. The text is what
/// the person at the phone reads; it never quotes the pass key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkRefused {
    /// The SSID or pass key breaks the config's rules (`check_ssid`, `check_psk`); `at`
    /// names the field as a JSON pointer when the input was JSON, else it is empty.
    Field { at: &'static str, why: &'static str },
    /// The input is not in its format (a form, a JSON body, Improv's bytes, text that is not
    /// UTF-8); the text says what.
    Malformed(String),
    /// The form's CSRF token (hidden field and cookie) is wrong or missing.
    Csrf,
    /// A DPP configurator offered a network of a kind the profiles cannot join (its AKM).
    Akm(String),
    /// A network handed over earlier is still being tried.
    Busy,
}

impl fmt::Display for NetworkRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkRefused::Field { at: "", why } => f.write_str(why),
            NetworkRefused::Field { at, why } => write!(f, "{at}: {why}"),
            NetworkRefused::Malformed(m) => f.write_str(m),
            NetworkRefused::Csrf => f.write_str("invalid or missing CSRF token"),
            NetworkRefused::Akm(akm) => write!(
                f,
                "the network offered uses {akm:?}: only WPA2-PSK networks (psk, psk+sae) are supported"
            ),
            NetworkRefused::Busy => {
                f.write_str("a network is already being tried: wait for the result")
            }
        }
    }
}

impl std::error::Error for NetworkRefused {}

/// An SSID and a pass key checked by the config's rules; `at`: the JSON pointer prefix of
/// the fields (`""`, or `"/"` for a JSON body: `/ssid`, `/psk`).
pub(crate) fn check_network(ssid: &str, psk: &str, json: bool) -> Result<(), NetworkRefused> {
    let (at_ssid, at_psk) = if json { ("/ssid", "/psk") } else { ("", "") };
    crate::config::validate::check_ssid(ssid)
        .map_err(|why| NetworkRefused::Field { at: at_ssid, why })?;
    crate::config::validate::check_psk(psk).map_err(|why| NetworkRefused::Field { at: at_psk, why })
}

/// Validate a form submission: CSRF token (hidden field and cookie both equal the per-boot
/// token), SSID and pass key.
pub fn validate_connect_form(
    req: &PortalRequest,
    token: &str,
) -> Result<NetworkInput, NetworkRefused> {
    let form = parse_form(&req.body).map_err(|e| NetworkRefused::Malformed(e.to_string()))?;
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let ok_token = |t: Option<&str>| t.is_some_and(|t| ct_eq(t.as_bytes(), token.as_bytes()));
    if !ok_token(get("csrf")) || !ok_token(req.cookie("svc_csrf")) {
        return Err(NetworkRefused::Csrf);
    }
    let ssid = get("ssid").unwrap_or("");
    let psk = get("psk").unwrap_or("");
    match get("eap").unwrap_or("") {
        "" => {
            check_network(ssid, psk, false)?;
            Ok(NetworkInput {
                ssid: ssid.into(),
                psk: psk.into(),
                eap: None,
            })
        }
        method => {
            crate::config::validate::check_ssid(ssid)
                .map_err(|why| NetworkRefused::Field { at: "", why })?;
            let eap = enterprise(
                method,
                get("identity").unwrap_or(""),
                psk,
                get("domain").unwrap_or(""),
            )
            .map_err(NetworkRefused::Malformed)?;
            Ok(NetworkInput {
                ssid: ssid.into(),
                psk: String::new(),
                eap: Some(Box::new(eap)),
            })
        }
    }
}

/// What the portal offers for an enterprise network: PEAP or TTLS (inner MSCHAPv2) with an
/// identity and a password, the server checked by its domain against the system's CAs (a
/// phone has no CA file to paste). EAP-TLS and CA certificates come through the config.
pub fn enterprise(
    method: &str,
    identity: &str,
    password: &str,
    domain: &str,
) -> Result<crate::config::model::Eap, String> {
    use crate::config::model::EapMethod;
    use crate::provisioning::eap as e;
    let method = match e::parse_method(method)? {
        EapMethod::Tls => {
            return Err("EAP-TLS needs a client certificate: set it in the config".into())
        }
        m => m,
    };
    e::check_identity(identity).map_err(|m| format!("user name {m}"))?;
    e::check_password(password).map_err(|m| format!("password {m}"))?;
    e::check_domain(domain).map_err(|m| format!("server domain {m}"))?;
    Ok(crate::config::model::Eap {
        method,
        identity: identity.into(),
        anonymous_identity: None,
        password: Some(password.into()),
        phase2: None,
        ca_cert: None,
        domain: Some(domain.into()),
        client_cert: None,
        private_key: None,
        private_key_password: None,
    })
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A percent escape is two hex digits: "%+1" was read as byte 0x01.
    #[test]
    fn a_signed_percent_escape_is_malformed() {
        for bad in ["%+1", "a%-0", "%+f"] {
            assert!(pct_decode(bad).is_err(), "{bad}");
        }
        assert_eq!(pct_decode("a%2Bb+c").unwrap(), "a+b c");
    }

    fn post(body: &str, cookie: &str) -> Vec<u8> {
        format!(
            "POST /connect HTTP/1.1\r\nHost: 10.42.0.1\r\nCookie: {cookie}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    #[test]
    fn oversized_and_invalid_utf8_refused() {
        let big = vec![b'a'; MAX_REQUEST_LINE + MAX_HEADERS_BYTES + 1];
        assert_eq!(parse_request(&big), Err(ParseError::TooLarge));
        let body = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(parse_request(body.as_bytes()), Err(ParseError::TooLarge));
        let bad = b"GET /\xff HTTP/1.1\r\n\r\n";
        assert_eq!(parse_request(bad), Err(ParseError::BadUtf8));
        assert_eq!(parse_form("ssid=%ff"), Err(ParseError::BadUtf8));
    }

    #[test]
    fn shell_metacharacters_stored_literally() {
        let ssid = "a'\"$(reboot);`x`";
        let psk = "p'\"; rm -rf / $x";
        let body = format!(
            "csrf=tok&ssid={}&psk={}",
            ssid.bytes()
                .map(|b| format!("%{b:02X}"))
                .collect::<String>(),
            psk.bytes().map(|b| format!("%{b:02X}")).collect::<String>()
        );
        let req = parse_request(&post(&body, "svc_csrf=tok")).unwrap();
        let n = validate_connect_form(&req, "tok").unwrap();
        assert_eq!(n.ssid, ssid);
        assert_eq!(n.psk, psk);
    }

    #[test]
    fn csrf_missing_or_wrong_rejected() {
        let body = "csrf=tok&ssid=home&psk=password1";
        let ok = parse_request(&post(body, "svc_csrf=tok")).unwrap();
        assert!(validate_connect_form(&ok, "tok").is_ok());
        let no_cookie = parse_request(&post(body, "other=1")).unwrap();
        assert!(validate_connect_form(&no_cookie, "tok").is_err());
        let wrong =
            parse_request(&post("csrf=bad&ssid=home&psk=password1", "svc_csrf=tok")).unwrap();
        assert!(validate_connect_form(&wrong, "tok").is_err());
        let no_field = parse_request(&post("ssid=home&psk=password1", "svc_csrf=tok")).unwrap();
        assert!(validate_connect_form(&no_field, "tok").is_err());
    }

    #[test]
    fn bad_ssid_and_psk_refused() {
        let long = "s".repeat(33);
        for body in [
            format!("csrf=t&ssid={long}&psk=password1"),
            "csrf=t&ssid=home&psk=short".to_string(),
            "csrf=t&ssid=&psk=password1".to_string(),
        ] {
            let r = parse_request(&post(&body, "svc_csrf=t")).unwrap();
            assert!(validate_connect_form(&r, "t").is_err(), "{body}");
        }
    }
}
