//! The captive portal over real loopback TCP: the page and its CSRF cookie, the form and the
//! JSON API, strict input handling (oversized, invalid UTF-8, shell metacharacters stored
//! literally), the credentials file written 0600 with exactly what was pasted, redirects
//! for captive-portal checks, and no secret from a form in any log line.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use svc::paths::Paths;
use svc::provisioning::portal::NetworkInput;
use svc::provisioning::portal_http::{Portal, PortalActions, Visible};

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<Vec<NetworkInput>>>, bool);

impl PortalActions for Fake {
    fn networks(&mut self) -> Vec<Visible> {
        vec![
            Visible {
                ssid: "home <5G>".into(),
                signal: 80,
            },
            Visible {
                ssid: "cafe".into(),
                signal: 35,
            },
        ]
    }
    fn connect(
        &mut self,
        net: NetworkInput,
    ) -> Result<(), svc::provisioning::portal::NetworkRefused> {
        self.0.lock().unwrap().push(net);
        Ok(())
    }
    fn status(&mut self) -> Vec<(String, String)> {
        vec![
            ("hotspot".into(), "up".into()),
            ("network".into(), "waiting".into()),
        ]
    }
    fn may_replace_credentials(&mut self) -> bool {
        self.1
    }
}

/// One raw HTTP exchange: status code, headers (lower-cased names), body.
fn http(addr: std::net::SocketAddr, raw: &[u8]) -> (u16, Vec<(String, String)>, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    // A server that refuses an oversized request may answer before reading all of it.
    let _ = c.write_all(raw);
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let code = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    (code, headers, body.to_string())
}

fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn post(path: &str, body: &str, extra: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 10.42.0.1\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn pct(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

#[test]
fn the_portal_serves_its_page_and_api_and_refuses_bad_input() {
    let dir = std::env::temp_dir().join(format!("svc-portal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    let logged = Arc::new(Mutex::new(String::new()));
    let l2 = Arc::clone(&logged);
    svc::logging::set_sink(Box::new(move |r| {
        l2.lock()
            .unwrap()
            .push_str(&format!("{} {}\n", r.subsystem, r.message));
    }));
    let fake = Fake::default();
    let mut portal = Portal::start(
        "127.0.0.1:0".parse().unwrap(),
        Paths::new(&dir),
        Box::new(fake.clone()),
    )
    .unwrap();
    let addr = portal.addr();

    // The page: networks (escaped), both forms, the CSRF cookie.
    let (code, h, page) = http(addr, b"GET / HTTP/1.1\r\nHost: 10.42.0.1\r\n\r\n");
    assert_eq!(code, 200);
    assert!(page.contains("home &lt;5G&gt; (80%)"), "{page}");
    assert!(page.contains("action=\"/connect\"") && page.contains("action=\"/credentials\""));
    let cookie = header(&h, "set-cookie").unwrap();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let token = cookie
        .trim_start_matches("svc_csrf=")
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(token.len(), 32);
    assert!(page.contains(&format!("name=\"csrf\" value=\"{token}\"")));
    let jar = format!("Cookie: svc_csrf={token}\r\n");

    // No CSRF token: refused, nothing submitted.
    let (code, _, _) = http(addr, &post("/connect", "ssid=home&psk=password1", ""));
    assert_eq!(code, 403);
    assert!(fake.0.lock().unwrap().is_empty());

    // Quotes and shell metacharacters are stored literally.
    let ssid = "a'\"$(reboot);`x`";
    let psk = "p'\"; rm -rf / $HOME";
    let body = format!("csrf={token}&ssid={}&psk={}", pct(ssid), pct(psk));
    let (code, h, _) = http(addr, &post("/connect", &body, &jar));
    assert_eq!(code, 303);
    assert_eq!(header(&h, "location"), Some("/"));
    assert_eq!(
        fake.0.lock().unwrap()[0],
        NetworkInput {
            ssid: ssid.into(),
            psk: psk.into(),
            eap: None,
        }
    );

    // Bad values: a 33-byte SSID, a 7-byte pass key; refused with the reason.
    for body in [
        format!("csrf={token}&ssid={}&psk=password1", "s".repeat(33)),
        format!("csrf={token}&ssid=home&psk=short12"),
    ] {
        let (code, _, page) = http(addr, &post("/connect", &body, &jar));
        assert_eq!(code, 400, "{body}");
        assert!(page.contains("role=\"alert\""));
    }
    // Oversized and invalid UTF-8.
    let big = format!("csrf={token}&ssid=home&psk={}", "x".repeat(20_000));
    assert_eq!(http(addr, &post("/connect", &big, &jar)).0, 413);
    let mut bad = post("/connect", "csrf=x&ssid=\u{0}&psk=password1", &jar);
    let n = bad.len();
    bad[n - 15] = 0xff;
    assert_eq!(http(addr, &bad).0, 400);
    assert_eq!(
        fake.0.lock().unwrap().len(),
        1,
        "nothing else was submitted"
    );

    // Invalid credentials are refused with the reason and write nothing.
    let body = format!("csrf={token}&credentials={}", pct(r#"{"cloud": {}}"#));
    assert_eq!(http(addr, &post("/credentials", &body, &jar)).0, 400);
    assert!(!dir.join("etc/svc.json").exists());

    // Credentials pasted in the portal: written 0600, exactly the pasted content.
    let secret = "portal-s3cret-7d1f";
    let creds = format!(
        r#"{{"cloud": {{"app_address": "https://app.example.com", "id": "p-1", "secret": "{secret}"}}}}"#
    );
    let body = format!("csrf={token}&credentials={}", pct(&creds));
    assert_eq!(http(addr, &post("/credentials", &body, &jar)).0, 303);
    let file = dir.join("etc/svc.json");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        written,
        serde_json::from_str::<serde_json::Value>(&creds).unwrap()
    );
    // Now configured: a second paste is refused (provisioning was not forced).
    let body = format!("csrf={token}&credentials={}", pct(r#"{"cloud": {}}"#));
    assert_eq!(http(addr, &post("/credentials", &body, &jar)).0, 403);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&file).unwrap()).unwrap(),
        written
    );

    // The JSON API: the token from /api/status, required as a header.
    let (code, _, status) = http(addr, b"GET /api/status HTTP/1.1\r\n\r\n");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["token"], token.as_str());
    assert_eq!(status["steps"][0]["step"], "hotspot");
    let (_, _, nets) = http(addr, b"GET /api/networks HTTP/1.1\r\n\r\n");
    assert!(nets.contains("\"signal\":80"), "{nets}");
    let json = r#"{"ssid": "office", "psk": "api-pass-9c2e"}"#;
    assert_eq!(http(addr, &post("/api/connect", json, "")).0, 403);
    let with = format!("X-Svc-Token: {token}\r\n");
    assert_eq!(http(addr, &post("/api/connect", json, &with)).0, 200);
    assert_eq!(fake.0.lock().unwrap()[1].psk, "api-pass-9c2e");
    let (code, _, err) = http(
        addr,
        &post("/api/connect", r#"{"ssid": "", "psk": "x"}"#, &with),
    );
    assert_eq!(code, 400);
    assert!(err.contains("/ssid"), "{err}");

    // Captive-portal checks are sent to the portal.
    let (code, h, _) = http(
        addr,
        b"GET /generate_204 HTTP/1.1\r\nHost: connectivitycheck.gstatic.com\r\n\r\n",
    );
    assert_eq!(code, 302);
    assert_eq!(
        header(&h, "location"),
        Some("http://connectivitycheck.gstatic.com/")
    );
    let (_, h, _) = http(addr, b"GET /x HTTP/1.1\r\nHost: evil\"<script>\r\n\r\n");
    assert_eq!(header(&h, "location"), Some("http://10.42.0.1/"));

    // No secret that went through a form reaches a log line.
    portal.stop();
    let logs = logged.lock().unwrap().clone();
    assert!(logs.contains("portal: network"), "{logs}");
    for s in [psk, secret, "api-pass-9c2e"] {
        assert!(!logs.contains(s), "{s} logged: {logs}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A temp dir with `etc/` and a portal on loopback; `replace` is whether provisioning was
/// forced on the device.
fn portal_in(name: &str, replace: bool) -> (std::path::PathBuf, Portal) {
    let dir = std::env::temp_dir().join(format!("svc-portal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    let portal = Portal::start(
        "127.0.0.1:0".parse().unwrap(),
        Paths::new(&dir),
        Box::new(Fake(Default::default(), replace)),
    )
    .unwrap();
    (dir, portal)
}

/// The API token, as any phone on the hotspot gets it.
fn api_token(addr: std::net::SocketAddr) -> String {
    let (_, _, status) = http(addr, b"GET /api/status HTTP/1.1\r\n\r\n");
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    v["token"].as_str().unwrap().to_string()
}

const OWN: &str = r#"{"cloud": {"app_address": "https://app.example.com", "id": "p-own", "secret": "own-s3cret-a81c"}}"#;

/// The takeover of issue 15: a configured machine's hotspot is up (it lost its network), a
/// phone takes the token from /api/status and pastes credentials that point at its own app.
#[test]
fn a_phone_cannot_replace_the_credentials_of_a_configured_machine() {
    let (dir, mut portal) = portal_in("takeover", false);
    let file = dir.join("etc/svc.json");
    std::fs::write(&file, OWN).unwrap();
    let addr = portal.addr();
    let token = api_token(addr);
    let with = format!("X-Svc-Token: {token}\r\n");
    for app in ["http://attacker.example", "https://attacker.example"] {
        let evil = format!(
            r#"{{"cloud": {{"app_address": "{app}", "id": "p-evil", "secret": "evil-secret-1"}}}}"#
        );
        let (code, _, body) = http(addr, &post("/api/credentials", &evil, &with));
        assert_eq!(code, 403, "{app}: {body}");
        assert!(body.contains("--force"), "the refusal says how: {body}");
        // The form route too.
        let (_, h, page) = http(addr, b"GET / HTTP/1.1\r\n\r\n");
        let cookie = header(&h, "set-cookie")
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_string();
        let form = format!("csrf={token}&credentials={}", pct(&evil));
        let (code, _, _) = http(
            addr,
            &post("/credentials", &form, &format!("Cookie: {cookie}\r\n")),
        );
        assert_eq!(code, 403, "{page}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), OWN, "{app}");
    }
    portal.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn credentials_from_the_portal_must_name_an_https_app() {
    let (dir, mut portal) = portal_in("https-only", false);
    let addr = portal.addr();
    let with = format!("X-Svc-Token: {}\r\n", api_token(addr));
    for app in ["http://app.example.com", "file:///tmp/app"] {
        let creds = format!(
            r#"{{"cloud": {{"app_address": "{app}", "id": "p-1", "secret": "a-secret-1234"}}}}"#
        );
        let (code, _, body) = http(addr, &post("/api/credentials", &creds, &with));
        assert_eq!(code, 400, "{app}: {body}");
        assert!(body.contains("https://"), "{body}");
        assert!(!dir.join("etc/svc.json").exists(), "{app} written");
    }
    portal.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_forced_session_may_replace_the_credentials_and_keeps_the_old_file() {
    let (dir, mut portal) = portal_in("forced", true);
    let file = dir.join("etc/svc.json");
    std::fs::write(&file, OWN).unwrap();
    let addr = portal.addr();
    let with = format!("X-Svc-Token: {}\r\n", api_token(addr));
    let new = r#"{"cloud": {"app_address": "https://app.example.com", "id": "p-new", "secret": "new-s3cret-77e2"}}"#;
    let (code, _, body) = http(addr, &post("/api/credentials", new, &with));
    assert_eq!(code, 200, "{body}");
    let got: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(got["cloud"]["id"], "p-new");
    let prev = dir.join("etc/svc.json.prev");
    assert_eq!(std::fs::read_to_string(&prev).unwrap(), OWN);
    assert_eq!(
        std::fs::metadata(&prev).unwrap().permissions().mode() & 0o777,
        0o600
    );
    portal.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Slow-loris: eight connections that dribble a request held every slot (a per-read timeout
/// and no overall deadline), and every phone got `503`. Now a new connection takes the slot
/// of the oldest one still reading its request, and a real client is served.
#[test]
fn a_real_client_is_served_while_slow_connections_hold_every_slot() {
    let (dir, mut portal) = portal_in("loris", false);
    let addr = portal.addr();
    let mut loris = Vec::new();
    for _ in 0..8 {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        loris.push(c);
    }
    // Wait (a condition, not a time) until the portal holds all eight.
    for _ in 0..500 {
        if portal.open_connections() >= 8 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(portal.open_connections(), 8);
    for round in 0..3 {
        let (code, _, body) = http(addr, b"GET /api/status HTTP/1.1\r\n\r\n");
        assert_eq!(code, 200, "round {round}: {body}");
    }
    portal.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// One slow connection is closed at the overall request deadline (10 s), however steadily it
/// dribbles: before, each byte reset the per-read timeout and the slot was held for ever.
#[test]
fn a_dribbling_request_is_cut_off_at_the_deadline() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (dir, mut portal) = portal_in("dribble", false);
    let mut c = TcpStream::connect(portal.addr()).unwrap();
    let closed = Arc::new(AtomicBool::new(false));
    let mut reader = c.try_clone().unwrap();
    let closed2 = Arc::clone(&closed);
    let t = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = reader.read_to_end(&mut out);
        closed2.store(true, Ordering::SeqCst);
        String::from_utf8_lossy(&out).into_owned()
    });
    let mut sent = 0;
    // 60 bytes at 2 a second is 30 s: three times the deadline.
    while sent < 60 && !closed.load(Ordering::SeqCst) {
        if c.write_all(b"X").is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let _ = c.shutdown(std::net::Shutdown::Both);
    let answer = t.join().unwrap();
    assert!(sent < 60, "still open after {sent} bytes: {answer}");
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    portal.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Portal input went to the log scrubber, so a phone could blank any word of at least 4
/// bytes in every later log line (its own address, "credentials", a part id ...). Only the
/// secret of credentials that were accepted is registered, and only real secret fields.
#[test]
fn a_phone_cannot_blank_words_in_the_logs() {
    let (dir, mut portal) = portal_in("scrub", false);
    let addr = portal.addr();
    let with = format!("X-Svc-Token: {}\r\n", api_token(addr));
    let line = "portal: request from 10.42.0.23 (tamper-word-one, tamper-word-two)";
    // A network whose pass key is a word of the logs.
    let net = r#"{"ssid": "home", "psk": "tamper-word-one"}"#;
    assert_eq!(http(addr, &post("/api/connect", net, &with)).0, 200);
    // Credentials that are refused, with a string where the key stands.
    let bad = r#"{"cloud": {"app_address": "https://a.example", "id": "p-1", "api_key": "tamper-word-two"}}"#;
    assert_eq!(http(addr, &post("/api/credentials", bad, &with)).0, 400);
    let bad =
        r#"{"cloud": {"app_address": "http://a.example", "id": "p-1", "secret": "10.42.0.23"}}"#;
    assert_eq!(http(addr, &post("/api/credentials", bad, &with)).0, 400);
    assert_eq!(svc::logging::scrub(line), line);
    // Accepted credentials: the key is a secret now, the key's id is not.
    let good = r#"{"cloud": {"app_address": "https://a.example", "id": "p-1", "api_key": {"id": "visible-key-id-4", "key": "real-key-0f9e2d"}}}"#;
    assert_eq!(http(addr, &post("/api/credentials", good, &with)).0, 200);
    assert_eq!(
        svc::logging::scrub("visible-key-id-4 real-key-0f9e2d"),
        "visible-key-id-4 ***"
    );
    portal.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Enterprise networks in the portal (#45): PEAP or TTLS with a user name, a password and
/// the server's domain, by the form and by the API. EAP-TLS, a missing server check and a
/// bad user name are refused with the reason, and nothing is submitted for them.
#[test]
fn an_enterprise_network_can_be_entered_and_bad_ones_are_refused() {
    let dir = std::env::temp_dir().join(format!("svc-portal-eap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    let fake = Fake::default();
    let mut portal = Portal::start(
        "127.0.0.1:0".parse().unwrap(),
        Paths::new(&dir),
        Box::new(fake.clone()),
    )
    .unwrap();
    let addr = portal.addr();
    let (_, h, page) = http(addr, b"GET / HTTP/1.1\r\nHost: 10.42.0.1\r\n\r\n");
    assert!(page.contains("name=\"identity\"") && page.contains("value=\"peap\""));
    let token = header(&h, "set-cookie")
        .unwrap()
        .trim_start_matches("svc_csrf=")
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let jar = format!("Cookie: svc_csrf={token}\r\n");
    let form = |eap: &str, id: &str, pw: &str, domain: &str| {
        format!(
            "csrf={token}&ssid=corp&psk={}&eap={eap}&identity={}&domain={}",
            pct(pw),
            pct(id),
            pct(domain)
        )
    };
    let body = form("peap", "alice@example.org", "pw1", "radius.example.org");
    assert_eq!(http(addr, &post("/connect", &body, &jar)).0, 303);
    {
        let got = fake.0.lock().unwrap();
        let eap = got[0].eap.as_ref().expect("an enterprise network");
        assert_eq!(got[0].psk, "", "the password is not a pass key");
        assert_eq!(eap.identity, "alice@example.org");
        assert_eq!(eap.password.as_deref(), Some("pw1"));
        assert_eq!(eap.domain.as_deref(), Some("radius.example.org"));
        assert!(
            !format!("{:?}", got[0]).contains("pw1"),
            "Debug shows no password"
        );
    }
    for (body, why) in [
        (form("tls", "box", "pw1", "radius.example.org"), "config"),
        (form("peap", "alice", "pw1", ""), "server domain"),
        (form("ttls", "", "pw1", "radius.example.org"), "user name"),
        (
            form("leap", "alice", "pw1", "radius.example.org"),
            "not supported",
        ),
    ] {
        let (code, _, page) = http(addr, &post("/connect", &body, &jar));
        assert_eq!(code, 400, "{body}");
        assert!(page.contains(why), "{why}: {page}");
    }
    let with = format!("X-Svc-Token: {}\r\n", api_token(addr));
    let json = r#"{"ssid": "uni", "eap": {"method": "ttls", "identity": "s1", "password": "pw2", "domain": "uni.example"}}"#;
    assert_eq!(http(addr, &post("/api/connect", json, &with)).0, 200);
    let json = r#"{"ssid": "uni", "eap": {"method": "ttls", "identity": "s1", "password": "pw2", "domain": "x y"}}"#;
    let (code, _, err) = http(addr, &post("/api/connect", json, &with));
    assert_eq!(code, 400);
    assert!(err.contains("/eap") && !err.contains("pw2"), "{err}");
    let got = fake.0.lock().unwrap();
    assert_eq!(got.len(), 2, "only the two good ones were submitted");
    assert_eq!(
        got[1].eap.as_ref().unwrap().method,
        svc::config::model::EapMethod::Ttls
    );
    drop(got);
    portal.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
