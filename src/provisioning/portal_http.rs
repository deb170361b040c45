//! The captive portal's HTTP server: a small accessible page (no JavaScript needed) and a
//! JSON API with the same operations, on the hotspot address only. Requests are parsed by
//! `portal::parse_request` (strict limits, fuzzed); what a submission does is the caller's
//! (`PortalActions`), so the server is the same for NetworkManager and for tests.
//!
//! Routes:
//! - `GET /`: the page (visible networks with signal, a network form, a credentials form,
//!   the status of each step); sets the per-boot CSRF cookie.
//! - `POST /connect` (form: csrf, ssid, psk; for PEAP/TTLS also eap, identity, domain), `POST /credentials` (form: csrf, credentials).
//! - `GET /api/status` (includes the token for the API), `GET /api/networks`,
//!   `POST /api/connect` (`{"ssid","psk"}` or `{"ssid","eap":{"method","identity","password","domain"}}`), `POST /api/credentials` (the credentials JSON);
//!   POSTs need the header `X-Svc-Token: <token>` (a custom header: no cross-site form can
//!   send it).
//! - anything else: `302` to the portal, which is what phones' captive-portal checks need.
use super::portal::{self, NetworkInput, NetworkRefused, ParseError, PortalRequest};
use crate::paths::Paths;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A network the machine can see.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Visible {
    pub ssid: String,
    /// 0..=100.
    pub signal: u8,
}

/// What the portal's operations do; the provisioning driver implements it over NetworkManager.
pub trait PortalActions: Send {
    fn networks(&mut self) -> Vec<Visible>;
    /// Saves the network and has the hotspot give way to it.
    fn connect(&mut self, net: NetworkInput) -> Result<(), NetworkRefused>;
    /// Steps and their state, in order (for example `("network", "joining home")`).
    fn status(&mut self) -> Vec<(String, String)>;
    /// Whether this hotspot session may replace existing machine credentials: only when
    /// provisioning was forced on the device itself (`svc-agent provision --force` or the
    /// root-only flag file), never because the machine merely lost its network.
    fn may_replace_credentials(&mut self) -> bool {
        false
    }
}

/// Connections served at once. When all are taken, a new connection takes the slot of the
/// oldest one still reading its request (slow-loris clients cannot lock phones out).
const MAX_CONNECTIONS: usize = 8;
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// The whole request must arrive within this, however it is dribbled (a per-read timeout
/// alone is reset by every byte).
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// The largest credentials file accepted from the portal.
const MAX_CREDENTIALS: usize = 4096;

/// A running portal; dropping it (or `stop`) closes the listener.
pub struct Portal {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    paths: Paths,
    token: String,
    actions: Mutex<Box<dyn PortalActions>>,
    slots: Mutex<Vec<Serving>>,
    next_id: AtomicU64,
}

/// A connection being served; `reading` (a handle on the socket) while its request is
/// still arriving, so that it can be cut off for a newer one.
struct Serving {
    id: u64,
    since: Instant,
    reading: Option<TcpStream>,
}

impl Portal {
    /// Listens on `addr` (the hotspot address, port 80, on a device), answering only the
    /// interface that holds that address and only peers inside its subnet: Linux accepts
    /// packets for a local address on every interface, so a LAN neighbour routing to the
    /// hotspot address through the machine would otherwise reach the portal without the
    /// hotspot password. The address must be on an interface already (the caller retries
    /// while NetworkManager brings the hotspot up).
    pub fn start(
        addr: SocketAddr,
        paths: Paths,
        actions: Box<dyn PortalActions>,
    ) -> std::io::Result<Portal> {
        let std::net::IpAddr::V4(ip) = addr.ip() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the portal listens on an IPv4 address",
            ));
        };
        let (ifname, mask) = crate::sys::ipv4_interface(ip)?.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::AddrNotAvailable,
                format!("no interface has the address {ip}"),
            )
        })?;
        let listener = TcpListener::bind(addr)?;
        crate::sys::bind_to_device(std::os::unix::io::AsRawFd::as_raw_fd(&listener), &ifname)?;
        let subnet = (ip, mask);
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            paths,
            token: new_token()?,
            actions: Mutex::new(actions),
            slots: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        });
        let stop2 = Arc::clone(&stop);
        let shared2 = Arc::clone(&shared);
        let thread = crate::sys::thread("portal")
            .spawn(move || accept_loop(listener, shared, stop2, subnet))?;
        crate::info!(
            "provisioning",
            "portal listening on http://{addr}/ (interface {ifname})"
        );
        Ok(Portal {
            addr,
            shared: shared2,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections being served now.
    pub fn open_connections(&self) -> usize {
        slots(&self.shared).len()
    }

    /// Stops accepting (within `ACCEPT_POLL`) and closes the listener. Connections being
    /// served finish on their own threads, bounded by their timeouts.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Portal {
    fn drop(&mut self) {
        self.stop();
    }
}

/// 128 random bits from the kernel, hex.
fn new_token() -> std::io::Result<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(crate::encoding::hex(&b))
}

/// How often the accept loop looks at its stop flag. A non-blocking accept, because the
/// hotspot address may be gone when the portal stops (nothing could connect to wake it).
const ACCEPT_POLL: Duration = Duration::from_millis(50);

/// Whether `peer` is inside the subnet `(addr, mask)`.
fn in_subnet(peer: std::net::IpAddr, (addr, mask): (Ipv4Addr, Ipv4Addr)) -> bool {
    let peer = match peer {
        std::net::IpAddr::V4(p) => p,
        std::net::IpAddr::V6(p) => match p.to_ipv4_mapped() {
            Some(p) => p,
            None => return false,
        },
    };
    u32::from(peer) & u32::from(mask) == u32::from(addr) & u32::from(mask)
}

fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    subnet: (Ipv4Addr, Ipv4Addr),
) {
    if let Err(e) = listener.set_nonblocking(true) {
        crate::error!("provisioning", "portal: {e}");
        return;
    }
    while !stop.load(Ordering::SeqCst) {
        let conn = match listener.accept() {
            // Second line of defence behind SO_BINDTODEVICE (and for a connection queued
            // before it was set): only the hotspot's own subnet; others are closed unanswered.
            Ok((_, peer)) if !in_subnet(peer.ip(), subnet) => continue,
            Ok((conn, _)) => conn,
            Err(_) => {
                std::thread::sleep(ACCEPT_POLL);
                continue;
            }
        };
        let _ = conn.set_nonblocking(false);
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        if !admit(&shared, id, &conn) {
            let _ = respond(&conn, 503, "text/plain", "busy, try again", &[]);
            continue;
        }
        let s = Arc::clone(&shared);
        let spawned = crate::sys::thread("portal-conn").spawn(move || {
            handle(conn, &s, id);
            release(&s, id);
        });
        if spawned.is_err() {
            release(&shared, id);
        }
    }
}

fn slots(s: &Shared) -> std::sync::MutexGuard<'_, Vec<Serving>> {
    s.slots
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Takes a slot for connection `id`; when all are taken, the oldest connection still reading
/// its request is cut off (shut down: its thread sees the end and leaves) to make room.
/// False when every slot is answering a complete request (that is short).
fn admit(s: &Shared, id: u64, conn: &TcpStream) -> bool {
    let mut v = slots(s);
    if v.len() >= MAX_CONNECTIONS {
        let oldest = v
            .iter()
            .enumerate()
            .filter(|(_, c)| c.reading.is_some())
            .min_by_key(|(_, c)| c.since)
            .map(|(i, _)| i);
        if let Some(i) = oldest {
            if let Some(c) = v.remove(i).reading {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
        }
    }
    if v.len() >= MAX_CONNECTIONS {
        return false;
    }
    v.push(Serving {
        id,
        since: Instant::now(),
        reading: conn.try_clone().ok(),
    });
    true
}

fn release(s: &Shared, id: u64) {
    slots(s).retain(|c| c.id != id);
}

/// The request is in: this connection can no longer be cut off for a newer one.
fn request_read(s: &Shared, id: u64) {
    if let Some(c) = slots(s).iter_mut().find(|c| c.id == id) {
        c.reading = None;
    }
}

/// Reads one request (bounded by the parser's limits and an overall deadline) and answers it.
fn handle(mut conn: TcpStream, s: &Shared, id: u64) {
    let _ = conn.set_write_timeout(Some(IO_TIMEOUT));
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    let req = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = respond(&conn, 408, "text/plain", "request took too long", &[]);
            return;
        }
        let _ = conn.set_read_timeout(Some(left.min(IO_TIMEOUT)));
        match conn.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        match portal::parse_request(&buf) {
            Err(ParseError::Incomplete) => continue,
            Err(ParseError::TooLarge) => {
                let _ = respond(&conn, 413, "text/plain", "request too large", &[]);
                // Read (and drop) a bounded rest so that closing does not reset the
                // connection before the client has read the answer.
                let _ = conn.shutdown(std::net::Shutdown::Write);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
                let mut left = 64 * 1024usize;
                while left > 0 {
                    match conn.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => left = left.saturating_sub(n),
                    }
                }
                return;
            }
            Err(e) => {
                let _ = respond(&conn, 400, "text/plain", &e.to_string(), &[]);
                return;
            }
            Ok(r) => break r,
        }
    };
    request_read(s, id);
    let _ = route(&conn, s, &req);
}

fn route(conn: &TcpStream, s: &Shared, req: &PortalRequest) -> std::io::Result<()> {
    let path = req.path.split('?').next().unwrap_or("");
    match (req.method.as_str(), path) {
        ("GET", "/") => page(conn, s, None),
        ("POST", "/connect") => match portal::validate_connect_form(req, &s.token) {
            Ok(net) => match connect(s, net) {
                Ok(()) => see_other(conn),
                Err(e) => page(conn, s, Some((400, e.to_string()))),
            },
            Err(e @ portal::NetworkRefused::Csrf) => page(conn, s, Some((403, e.to_string()))),
            Err(e) => page(conn, s, Some((400, e.to_string()))),
        },
        ("POST", "/credentials") => {
            let form = portal::parse_form(&req.body).map_err(|e| (400, e.to_string()));
            let result = form.and_then(|f| {
                let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                if !token_ok(get("csrf").as_deref(), &s.token)
                    || !token_ok(req.cookie("svc_csrf"), &s.token)
                {
                    return Err((403, "invalid or missing CSRF token".to_string()));
                }
                write_credentials(s, get("credentials").unwrap_or_default().as_bytes())
            });
            match result {
                Ok(()) => see_other(conn),
                Err((code, e)) => page(conn, s, Some((code, e))),
            }
        }
        ("GET", "/api/status") => {
            let status = lock(s).status();
            let body = serde_json::json!({
                "token": s.token,
                "steps": status.iter().map(|(k, v)| serde_json::json!({"step": k, "state": v})).collect::<Vec<_>>(),
            });
            respond(conn, 200, "application/json", &body.to_string(), &[])
        }
        ("GET", "/api/networks") => {
            let nets = lock(s).networks();
            let body = serde_json::to_string(&nets).unwrap_or_else(|_| "[]".into());
            respond(conn, 200, "application/json", &body, &[])
        }
        ("POST", "/api/connect" | "/api/credentials") => {
            if !token_ok(req.header("x-svc-token"), &s.token) {
                return api_error(
                    conn,
                    403,
                    "missing or wrong X-Svc-Token (from GET /api/status)",
                );
            }
            let result = if path == "/api/connect" {
                api_network(&req.body)
                    .and_then(|n| connect(s, n))
                    .map_err(|e| (400, e.to_string()))
            } else {
                write_credentials(s, req.body.as_bytes())
            };
            match result {
                Ok(()) => respond(conn, 200, "application/json", r#"{"ok":true}"#, &[]),
                Err((code, e)) => api_error(conn, code, &e),
            }
        }
        _ => {
            // Captive-portal detection (generate_204, hotspot-detect.html, ...) and any other
            // name the DNS redirect sent here: to the portal.
            let host = req
                .header("host")
                .filter(|h| is_plain_host(h))
                .unwrap_or("10.42.0.1");
            respond(
                conn,
                302,
                "text/plain",
                "",
                &[("Location", &format!("http://{host}/"))],
            )
        }
    }
}

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Box<dyn PortalActions>> {
    s.actions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn token_ok(t: Option<&str>, token: &str) -> bool {
    t.is_some_and(|t| {
        t.len() == token.len()
            && t.bytes()
                .zip(token.bytes())
                .fold(0, |a, (x, y)| a | (x ^ y))
                == 0
    })
}

/// Only letters, digits, dots, dashes and a port: never reflect anything else into Location.
fn is_plain_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b))
}

fn api_network(body: &str) -> Result<NetworkInput, NetworkRefused> {
    #[derive(serde::Deserialize)]
    struct In {
        ssid: String,
        #[serde(default)]
        psk: String,
        eap: Option<EapIn>,
    }
    #[derive(serde::Deserialize)]
    struct EapIn {
        method: String,
        identity: String,
        password: String,
        domain: String,
    }
    let n: In =
        serde_json::from_str(body).map_err(|e| NetworkRefused::Malformed(format!("body: {e}")))?;
    if let Some(e) = n.eap {
        crate::config::validate::check_ssid(&n.ssid)
            .map_err(|why| NetworkRefused::Field { at: "/ssid", why })?;
        let eap = super::portal::enterprise(&e.method, &e.identity, &e.password, &e.domain)
            .map_err(|m| NetworkRefused::Malformed(format!("/eap: {m}")))?;
        return Ok(NetworkInput {
            ssid: n.ssid,
            psk: String::new(),
            eap: Some(Box::new(eap)),
        });
    }
    portal::check_network(&n.ssid, &n.psk, true)?;
    Ok(NetworkInput {
        ssid: n.ssid,
        psk: n.psk,
        eap: None,
    })
}

fn connect(s: &Shared, net: NetworkInput) -> Result<(), NetworkRefused> {
    // The pass key is not registered with the log scrubber: it is never logged (only the
    // 0600 keyfile holds it), and a registered value from a phone would blank that word in
    // every later log line.
    crate::info!("provisioning", "portal: network {:?} submitted", net.ssid);
    lock(s).connect(net)
}

/// The machine credentials pasted in the portal: checked like the agent reads them, then
/// written atomically with mode 0600. The secret is registered before anything is logged.
///
/// Anyone who knows the hotspot password reaches this, so: existing credentials are only
/// replaced when provisioning was forced on the device (the old file is kept as
/// `svc.json.prev`), and the app must be https (the agent runs what that app sends, as root).
fn write_credentials(s: &Shared, bytes: &[u8]) -> Result<(), (u16, String)> {
    let file = s.paths.credentials();
    // As the daemon reads it: a regular file only (no link followed, no FIFO waited on).
    let existing = match crate::fsutil::read_regular(&file, crate::credentials::MAX_FILE_BYTES) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err((500, format!("reading the current credentials: {e}"))),
    };
    if existing.is_some() && !lock(s).may_replace_credentials() {
        return Err((
            403,
            "this machine already has credentials; replacing them needs provisioning forced on \
             the machine itself, as root (touch /opt/svc/force-provisioning, or svc-agent \
             provision --force)"
                .into(),
        ));
    }
    if bytes.len() > MAX_CREDENTIALS {
        return Err((
            400,
            format!("credentials larger than {MAX_CREDENTIALS} bytes"),
        ));
    }
    // Not registered with the log scrubber until accepted (a phone's rejected input must not
    // blank words in the logs); the errors never quote the values, and are not logged.
    let creds = crate::credentials::Credentials::parse_untrusted(bytes)
        .map_err(|e| (400, e.to_string()))?;
    if !creds.app_address.starts_with("https://") {
        return Err((
            400,
            "cloud.app_address must be an https:// URL when pasted in the portal".into(),
        ));
    }
    let text = serde_json::to_vec_pretty(&creds.to_json()).map_err(|e| (500, e.to_string()))?;
    if let Some(old) = existing {
        let prev = file.with_file_name("svc.json.prev");
        crate::fsutil::atomic_write(&prev, &old, 0o600)
            .map_err(|e| (500, format!("keeping the old credentials: {e}")))?;
    }
    crate::fsutil::atomic_write(&file, &text, 0o600)
        .map_err(|e| (500, format!("writing the credentials: {e}")))?;
    creds.register_secret();
    crate::info!(
        "provisioning",
        "portal: machine credentials saved (part {})",
        creds.part_id
    );
    Ok(())
}

fn see_other(conn: &TcpStream) -> std::io::Result<()> {
    respond(conn, 303, "text/plain", "", &[("Location", "/")])
}

fn api_error(conn: &TcpStream, code: u16, msg: &str) -> std::io::Result<()> {
    let body = serde_json::json!({"ok": false, "error": msg}).to_string();
    respond(conn, code, "application/json", &body, &[])
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The page: readable on a phone, usable without JavaScript, labels on every field.
fn page(conn: &TcpStream, s: &Shared, error: Option<(u16, String)>) -> std::io::Result<()> {
    let (nets, steps) = {
        let mut a = lock(s);
        (a.networks(), a.status())
    };
    let mut h = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>Set up this machine</title><style>body{font:1.1em sans-serif;max-width:32em;margin:auto;padding:1em}\
label,input,textarea,button{display:block;width:100%;margin:.3em 0;font-size:1em}\
.err{color:#a00;font-weight:bold}</style></head><body><h1>Set up this machine</h1>",
    );
    if let Some((_, e)) = &error {
        h.push_str(&format!("<p class=\"err\" role=\"alert\">{}</p>", esc(e)));
    }
    h.push_str("<h2>Status</h2><ul>");
    for (k, v) in &steps {
        h.push_str(&format!("<li>{}: {}</li>", esc(k), esc(v)));
    }
    h.push_str("</ul><h2>Wi-Fi network</h2><form method=\"post\" action=\"/connect\">");
    h.push_str(&format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        s.token
    ));
    h.push_str("<label for=\"ssid\">Network name</label><input id=\"ssid\" name=\"ssid\" list=\"nets\" maxlength=\"32\" required><datalist id=\"nets\">");
    for n in &nets {
        h.push_str(&format!(
            "<option value=\"{}\">{}%</option>",
            esc(&n.ssid),
            n.signal
        ));
    }
    h.push_str("</datalist><ul>");
    for n in &nets {
        h.push_str(&format!("<li>{} ({}%)</li>", esc(&n.ssid), n.signal));
    }
    h.push_str("</ul><label for=\"psk\">Password</label><input id=\"psk\" name=\"psk\" type=\"password\" maxlength=\"256\" required>\
<details><summary>Enterprise network (WPA2/WPA3-Enterprise)</summary>\
<label for=\"eap\">Method</label><select id=\"eap\" name=\"eap\"><option value=\"\">none (a pass key)</option><option value=\"peap\">PEAP</option><option value=\"ttls\">TTLS</option></select>\
<label for=\"identity\">User name</label><input id=\"identity\" name=\"identity\" maxlength=\"253\">\
<label for=\"domain\">Server domain (its certificate is checked)</label><input id=\"domain\" name=\"domain\" maxlength=\"253\" placeholder=\"radius.example.org\"></details>\
<button type=\"submit\">Connect</button></form>");
    h.push_str(
        "<h2>Machine credentials (optional)</h2><form method=\"post\" action=\"/credentials\">",
    );
    h.push_str(&format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        s.token
    ));
    h.push_str("<label for=\"credentials\">Paste the credentials JSON</label><textarea id=\"credentials\" name=\"credentials\" rows=\"6\"></textarea>\
<button type=\"submit\">Save credentials</button></form></body></html>");
    let code = error.as_ref().map(|(c, _)| *c).unwrap_or(200);
    let cookie = format!("svc_csrf={}; Path=/; HttpOnly; SameSite=Strict", s.token);
    respond(
        conn,
        code,
        "text/html; charset=utf-8",
        &h,
        &[("Set-Cookie", &cookie)],
    )
}

fn respond(
    mut conn: &TcpStream,
    code: u16,
    ctype: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        302 => "Found",
        303 => "See Other",
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        500 => "Internal Server Error",
        _ => "Service Unavailable",
    };
    let mut head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
Cache-Control: no-store\r\nX-Frame-Options: DENY\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes())?;
    conn.write_all(body.as_bytes())?;
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_outside_the_hotspot_subnet_are_not_served() {
        let hot = (Ipv4Addr::new(10, 42, 0, 1), Ipv4Addr::new(255, 255, 255, 0));
        for (peer, ok) in [
            ("10.42.0.77", true),
            ("10.42.1.2", false),
            ("192.168.77.2", false),
            ("::ffff:10.42.0.9", true),
            ("fe80::1", false),
        ] {
            assert_eq!(in_subnet(peer.parse().unwrap(), hot), ok, "{peer}");
        }
    }
}
