//! A management app on loopback HTTPS, scripted per test: answers polls (with ETag and 304),
//! takes log batches, and misbehaves on request (errors, garbage, slowness, resets).
#![allow(dead_code)]
use super::testca::{test_ca, TestCa};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server does with the next poll.
#[derive(Clone, Debug)]
pub enum Behavior {
    /// The current answer (200 with ETag, or 304 when If-None-Match matches).
    Normal,
    Status(u16, Vec<(String, String)>, String),
    Garbage,
    /// Wait this long before answering normally.
    Slow(Duration),
    /// Read the request, then close the connection without a word.
    Reset,
    /// Read the request, then neither answer nor close (for ten minutes): what a
    /// connection a NAT or proxy dropped silently looks like from the client.
    Silent,
}

#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub status_sent: u16,
    /// HTTP bytes of the request and of the answer.
    pub bytes_in: usize,
    pub bytes_out: usize,
    /// Bytes on the wire (TCP payload, TLS included), filled in when the exchange ends.
    pub wire_in: usize,
    pub wire_out: usize,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
pub struct State {
    pub answer: String,
    pub script: VecDeque<Behavior>,
    pub seen: Vec<Seen>,
    pub logs: Vec<String>,
    /// Artifacts served on GET, with Range support.
    pub files: std::collections::HashMap<String, Vec<u8>>,
    /// Cut the connection after this many bytes of the next full (non-Range) download.
    pub cut_next_download_at: Option<usize>,
    /// Answer log batches with this status (and no body) instead of taking them.
    pub logs_refuse: Option<u16>,
    /// Honour `Prefer: wait=N` on an unchanged poll (the long poll): hold it until the
    /// answer changes or N seconds pass, and say so (`Preference-Applied`). Off: the app
    /// answers at once, as one that does not know the long poll.
    pub hold: bool,
    /// Polls being held now.
    pub holding: usize,
}

pub struct MgmtServer {
    /// What the agent talks to: this server, or nginx in front of it.
    pub url: String,
    pub state: Arc<Mutex<State>>,
    pub ca: &'static TestCa,
    /// nginx in front (`Front::Nginx`), stopped on drop.
    pub nginx: Option<super::nginx::Nginx>,
}

/// Who the agent talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Front {
    /// This server terminates TLS itself.
    Direct,
    /// Debian's nginx terminates TLS (the test CA's certificate) and proxies over plain
    /// HTTP on loopback to this server: defaults otherwise (HTTP/1.1 keep-alive to clients).
    Nginx,
}

fn etag_of(body: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(body.as_bytes());
    format!(
        "\"{}\"",
        d[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

/// A sandbox whose credentials name a fresh app behind `front`, with a fake svc-server
/// installed: the agent under test talks to the app from its first poll.
pub fn app_sandbox(name: &str, front: Front) -> (super::sandbox::Sandbox, MgmtServer) {
    let sb = super::sandbox::Sandbox::new(&format!("{name}-{front:?}"));
    let srv = MgmtServer::start_behind(&sb.root.join("tls"), front);
    sb.write_credentials(&srv.url);
    sb.install_fake_server();
    (sb, srv)
}

impl MgmtServer {
    pub fn start(dir: &std::path::Path) -> MgmtServer {
        MgmtServer::start_behind(dir, Front::Direct)
    }

    pub fn start_behind(dir: &std::path::Path, front: Front) -> MgmtServer {
        let ca = test_ca();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let tls = (front == Front::Direct).then(|| ca.server_config());
        let st = Arc::clone(&state);
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (st, tls) = (Arc::clone(&st), tls.clone());
                std::thread::spawn(move || serve(conn, tls, st));
            }
        });
        let (url, nginx) = match front {
            Front::Direct => (format!("https://localhost:{port}"), None),
            Front::Nginx => {
                let n = super::nginx::Nginx::start(
                    &dir.join("nginx"),
                    &ca.cert_file,
                    &ca.key_file,
                    port,
                );
                (n.url.clone(), Some(n))
            }
        };
        MgmtServer {
            url,
            state,
            ca,
            nginx,
        }
    }

    pub fn set_answer(&self, v: serde_json::Value) {
        self.state.lock().unwrap().answer = v.to_string();
    }

    pub fn script(&self, b: Behavior) {
        self.state.lock().unwrap().script.push_back(b);
    }

    /// Holds unchanged polls that ask for it (the long poll).
    pub fn hold_polls(&self) {
        self.state.lock().unwrap().hold = true;
    }

    /// Polls being held now.
    pub fn holding(&self) -> usize {
        self.state.lock().unwrap().holding
    }

    /// Drops what is left of the script: polls are answered normally again.
    pub fn script_clear(&self) {
        self.state.lock().unwrap().script.clear();
    }

    /// The log batches that reached the server, taken or refused.
    pub fn log_posts(&self) -> Vec<Seen> {
        self.state
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|s| s.path.ends_with("/logs"))
            .cloned()
            .collect()
    }

    pub fn polls(&self) -> Vec<Seen> {
        self.state
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|s| s.path.ends_with("/poll"))
            .cloned()
            .collect()
    }
}

/// A TCP stream that counts the bytes it carries (TLS records included).
struct Counting {
    inner: TcpStream,
    read: usize,
    written: usize,
}

impl Read for Counting {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(b)?;
        self.read += n;
        Ok(n)
    }
}

impl Write for Counting {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(b)?;
        self.written += n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One client connection, TLS or plain (behind nginx).
trait Conn: Read + Write {
    fn tcp(&mut self) -> &mut Counting;
    /// Ends the connection politely (TLS close_notify), when the client asked for it.
    fn close(&mut self);
}

impl Conn for Counting {
    fn tcp(&mut self) -> &mut Counting {
        self
    }
    fn close(&mut self) {
        let _ = self.inner.shutdown(std::net::Shutdown::Write);
    }
}

impl Conn for rustls::StreamOwned<rustls::ServerConnection, Counting> {
    fn tcp(&mut self) -> &mut Counting {
        &mut self.sock
    }
    fn close(&mut self) {
        self.conn.send_close_notify();
        let _ = self.flush();
    }
}

fn serve(tcp: TcpStream, tls: Option<Arc<rustls::ServerConfig>>, st: Arc<Mutex<State>>) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(20)));
    let tcp = Counting {
        inner: tcp,
        read: 0,
        written: 0,
    };
    match tls {
        Some(cfg) => {
            let Ok(conn) = rustls::ServerConnection::new(cfg) else {
                return;
            };
            serve_conn(&mut rustls::StreamOwned::new(conn, tcp), &st);
        }
        None => serve_conn(&mut { tcp }, &st),
    }
}

/// HTTP/1.1 keep-alive, as an ordinary server does: answers requests on one connection until
/// the client closes it or asks for `Connection: close` (nginx's default to its upstream).
/// The server never closes a connection to help the client; only `Reset` and a cut
/// download do, on purpose.
fn serve_conn(conn: &mut dyn Conn, st: &Arc<Mutex<State>>) {
    let mut buf = Vec::new();
    let mut last_seen = None;
    while let Some((index, keep)) = serve_request(conn, st, &mut buf) {
        last_seen = index;
        if !keep {
            conn.close();
            break;
        }
    }
    // The wire totals of the connection (the client's close_notify included) go to its
    // last exchange: one request per connection is what the agent makes.
    if let Some(i) = last_seen {
        let (r, w) = (conn.tcp().read, conn.tcp().written);
        if let Some(seen) = st.lock().unwrap().seen.get_mut(i) {
            seen.wire_in = r;
            seen.wire_out = w;
        }
    }
}

/// Serves one request: `None` when the connection is gone (or cut on purpose), else the
/// index of the exchange in `seen` and whether to keep the connection.
fn serve_request(
    conn: &mut dyn Conn,
    st: &Arc<Mutex<State>>,
    buf: &mut Vec<u8>,
) -> Option<(Option<usize>, bool)> {
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("").to_string();
    let path = request_line.split(' ').nth(1).unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    let mut seen = Seen {
        path: path.clone(),
        headers,
        body,
        status_sent: 0,
        bytes_in: head_end + len,
        bytes_out: 0,
        wire_in: 0,
        wire_out: 0,
    };
    let keep = !request_line.ends_with("HTTP/1.0")
        && !seen
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let push = |seen: Seen| {
        let mut s = st.lock().unwrap();
        s.seen.push(seen);
        s.seen.len() - 1
    };
    // (A statement of its own: an `if let` scrutinee would hold the lock for the block.)
    let file = st.lock().unwrap().files.get(&path).cloned();
    if let Some(data) = file {
        let range_start = seen
            .header("range")
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok());
        let cut = if range_start.is_none() {
            st.lock().unwrap().cut_next_download_at.take()
        } else {
            None
        };
        let start = range_start.unwrap_or(0).min(data.len());
        let status = if range_start.is_some() {
            "206 Partial Content"
        } else {
            "200 OK"
        };
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n",
            data.len() - start
        );
        seen.status_sent = if range_start.is_some() { 206 } else { 200 };
        let index = push(seen);
        let _ = conn.write_all(head.as_bytes());
        let body = &data[start..];
        if let Some(n) = cut {
            let _ = conn.write_all(&body[..n.min(body.len())]);
            let _ = conn.flush();
            let _ = conn.tcp().inner.shutdown(std::net::Shutdown::Both);
            return None;
        }
        let _ = conn.write_all(body);
        let _ = conn.flush();
        return Some((Some(index), keep));
    }
    let behavior = if path.ends_with("/poll") {
        st.lock()
            .unwrap()
            .script
            .pop_front()
            .unwrap_or(Behavior::Normal)
    } else {
        Behavior::Normal
    };
    let (status, extra, payload): (u16, Vec<(String, String)>, String) = match behavior {
        _ if path.starts_with("/artifacts/") => (404, vec![], String::new()),
        Behavior::Reset => {
            push(seen);
            let _ = conn.tcp().inner.shutdown(std::net::Shutdown::Both);
            return None;
        }
        Behavior::Silent => {
            push(seen);
            std::thread::sleep(Duration::from_secs(600));
            return None;
        }
        Behavior::Garbage => (200, vec![], "{\"config\": [this is not json".into()),
        Behavior::Status(code, h, b) => (code, h, b),
        Behavior::Slow(d) => {
            std::thread::sleep(d);
            normal(&path, &seen, st)
        }
        Behavior::Normal => {
            hold(&path, &seen, st);
            normal(&path, &seen, st)
        }
    };
    // 204 and 304 carry no body and, as from nginx, no length either.
    let mut resp = if status == 204 || status == 304 {
        format!("HTTP/1.1 {status} X\r\n")
    } else {
        format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n",
            payload.len()
        )
    };
    for (k, v) in &extra {
        resp.push_str(&format!("{k}: {v}\r\n"));
    }
    resp.push_str("\r\n");
    resp.push_str(&payload);
    seen.status_sent = status;
    seen.bytes_out = resp.len();
    let index = push(seen);
    let _ = conn.write_all(resp.as_bytes());
    let _ = conn.flush();
    Some((Some(index), keep))
}

/// The long poll: an unchanged poll asking `Prefer: wait=N` waits (when holding is on)
/// until the answer changes or N seconds pass.
fn hold(path: &str, seen: &Seen, st: &Arc<Mutex<State>>) {
    let wait = seen
        .header("prefer")
        .and_then(|v| v.trim().strip_prefix("wait="))
        .and_then(|n| n.trim().parse::<u64>().ok());
    let Some(secs) = wait.filter(|s| *s > 0) else {
        return;
    };
    let unchanged = |s: &State| seen.header("if-none-match") == Some(etag_of(&s.answer).as_str());
    {
        let mut s = st.lock().unwrap();
        if !path.ends_with("/poll") || !s.hold || !unchanged(&s) {
            return;
        }
        s.holding += 1;
    }
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < end && unchanged(&st.lock().unwrap()) {
        std::thread::sleep(Duration::from_millis(20));
    }
    st.lock().unwrap().holding -= 1;
}

fn normal(path: &str, seen: &Seen, st: &Arc<Mutex<State>>) -> (u16, Vec<(String, String)>, String) {
    let mut s = st.lock().unwrap();
    if path.ends_with("/logs") {
        if let Some(code) = s.logs_refuse {
            return (code, vec![], String::new());
        }
        s.logs
            .push(String::from_utf8_lossy(&seen.body).into_owned());
        return (200, vec![], "{}".into());
    }
    let tag = etag_of(&s.answer);
    let mut headers = vec![("ETag".into(), tag.clone())];
    if s.hold && seen.header("prefer").is_some_and(|v| v.contains("wait=")) {
        headers.push(("Preference-Applied".into(), "wait".into()));
    }
    if seen.header("if-none-match") == Some(tag.as_str()) {
        (304, headers, String::new())
    } else {
        (200, headers, s.answer.clone())
    }
}
