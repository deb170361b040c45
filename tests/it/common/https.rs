//! The one HTTPS test server: a management app and a file server on loopback, with the
//! process's test CA ([`super::testca::test_ca`]), scripted misbehaviour per path, and every
//! request recorded for assertions.
//!
//! What it serves, by path:
//! - a file added with [`HttpsServer::add`], or under a folder given to
//!   [`HttpsServer::serve_dir`]: `ETag` + `Last-Modified`, `Range` (with `If-Range`), `416`,
//!   `304` on `If-None-Match` / `If-Modified-Since`;
//! - [`POLL`]: the current answer with an `ETag` (`304` when unchanged), held when the long
//!   poll is on ([`HttpsServer::hold_polls`]); [`LOGS`]: takes the batch;
//! - anything else: `404`.
//!
//! How it answers a request is its path's [`Behavior`]: the next one queued for the path
//! ([`HttpsServer::next`], [`HttpsServer::script`] for polls), else the path's standing one
//! ([`HttpsServer::set_behavior`]), else [`Behavior::Normal`].
//!
//! It behaves as an ordinary server (nginx, Go): HTTP/1.1 keep-alive until the client
//! closes or asks `Connection: close` (HTTP/1.0 too), `304` and `204` with neither a length
//! nor a close, real reason phrases. It never closes a connection to help the client; only
//! the misbehaviours that say so do. With [`Front::Nginx`] Debian's nginx terminates TLS in
//! front of it and talks plain HTTP to it; [`Front::Plain`] is plain HTTP (a registry, a
//! plain redirect hop). The TLS side is rustls with aws-lc-rs; the client
//! under test is the product's own.
#![allow(dead_code)]
use super::testca::{test_ca, TestCa};
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The agent's poll and log paths (docs/protocol.md).
pub const POLL: &str = "/api/v1/agent/poll";
pub const LOGS: &str = "/api/v1/agent/logs";

/// How the server answers one request.
#[derive(Clone, Debug)]
pub enum Behavior {
    /// What the path serves (a file, the poll answer, the log intake, or a 404).
    Normal,
    /// This status, these headers and this body instead.
    Status(u16, Vec<(String, String)>, String),
    /// Wait this long, then answer normally.
    Slow(Duration),
    /// Read the request, then close the connection without a word.
    Reset,
    /// Read the request, then neither answer nor close (until the server is dropped, at
    /// most ten minutes): what a connection a NAT or proxy dropped silently looks like.
    Silent,
    /// The normal answer's headers (the whole length), its body up to byte `at` of the
    /// file, then a FIN without TLS close_notify: a cut link.
    Cut(u64),
    /// The normal answer, its body `chunk` bytes every `every`, until the client goes away.
    Trickle { chunk: usize, every: Duration },
    /// The normal answer with no Content-Length: the body ends when the server closes the
    /// connection, as a streaming endpoint or an old proxy answers.
    NoLength,
    /// Hold the request while this stays the path's standing behaviour (until
    /// [`HttpsServer::set_behavior`] changes it, or the server is dropped), then answer
    /// normally: a slow download whose end the test decides.
    Stall,
}

impl Behavior {
    /// `302 Found` to `to`, as a CDN or a misconfigured proxy answers.
    pub fn redirect(to: &str) -> Behavior {
        Behavior::Status(302, vec![("Location".into(), to.into())], String::new())
    }

    /// `200` with a body that is not JSON.
    pub fn garbage() -> Behavior {
        Behavior::Status(200, vec![], "{\"config\": [this is not json".into())
    }
}

/// One request as the server saw it, and what it sent back.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// `HTTP/1.1`, `HTTP/1.0`.
    pub version: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// 0: no answer (reset, silent).
    pub status_sent: u16,
    /// HTTP bytes of the request and of the answer.
    pub bytes_in: usize,
    pub bytes_out: usize,
    /// Bytes on the wire (TCP payload, TLS included) of the connection, given to its last
    /// exchange when the connection ends.
    pub wire_in: usize,
    pub wire_out: usize,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

struct File {
    body: Arc<Vec<u8>>,
    etag: String,
    last_modified: String,
}

#[derive(Default)]
struct State {
    files: HashMap<String, File>,
    /// Files served from this folder (read at each request), after the added ones.
    dir: Option<std::path::PathBuf>,
    /// Files added so far (for their ETags).
    added: u64,
    standing: HashMap<String, Behavior>,
    queued: HashMap<String, VecDeque<Behavior>>,
    /// The poll answer (JSON).
    answer: String,
    /// Honour `Prefer: wait=N` on an unchanged poll (the long poll): hold it until the
    /// answer changes or N seconds pass, and say so (`Preference-Applied`). Off: the app
    /// answers at once, as one that does not know the long poll.
    hold: bool,
    holding: usize,
    /// Connections accepted.
    connections: usize,
    logs: Vec<String>,
    seen: Vec<Seen>,
}

/// Who the client talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Front {
    /// This server terminates TLS itself.
    Direct,
    /// Debian's nginx terminates TLS (the test CA's certificate) and proxies over plain
    /// HTTP on loopback to this server: defaults otherwise (HTTP/1.1 keep-alive to clients).
    Nginx,
    /// No TLS at all: `http://127.0.0.1:PORT` (a plain registry, a plain redirect hop).
    Plain,
}

pub struct HttpsServer {
    /// `https://localhost:PORT` of this server or of nginx in front of it.
    base: String,
    port: u16,
    pub ca: &'static TestCa,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    /// nginx in front (`Front::Nginx`), stopped on drop.
    nginx: Option<super::nginx::Nginx>,
}

fn etag_of(body: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(body);
    format!("\"{}\"", svc::encoding::hex(&d[..8]))
}

/// A sandbox whose credentials name a fresh app behind `front`, with a fake svc-server
/// installed: the agent under test talks to the app from its first poll.
pub fn app_sandbox(name: &str, front: Front) -> (super::sandbox::Sandbox, HttpsServer) {
    let sb = super::sandbox::Sandbox::new(&format!("{name}-{front:?}"));
    let srv = HttpsServer::start_behind(&sb.root.join("tls"), front);
    sb.write_credentials(srv.base_url());
    sb.install_fake_server();
    (sb, srv)
}

impl HttpsServer {
    /// A server that terminates TLS itself.
    pub fn start() -> HttpsServer {
        HttpsServer::start_behind(Path::new(""), Front::Direct)
    }

    /// A plain HTTP server: `http://127.0.0.1:PORT`.
    pub fn start_plain() -> HttpsServer {
        HttpsServer::start_behind(Path::new(""), Front::Plain)
    }

    /// A server behind `front`; nginx keeps its files under `dir`.
    pub fn start_behind(dir: &Path, front: Front) -> HttpsServer {
        let ca = test_ca();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let tls = (front == Front::Direct).then(|| ca.server_config());
        let (st, sp) = (Arc::clone(&state), Arc::clone(&stop));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(tcp) = conn else { continue };
                st.lock().unwrap().connections += 1;
                let (st, sp, tls) = (Arc::clone(&st), Arc::clone(&sp), tls.clone());
                std::thread::spawn(move || serve(tcp, tls, &st, &sp));
            }
        });
        let (base, nginx) = match front {
            Front::Direct => (format!("https://localhost:{port}"), None),
            Front::Plain => (format!("http://127.0.0.1:{port}"), None),
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
        HttpsServer {
            base,
            port,
            ca,
            state,
            stop,
            nginx,
        }
    }

    /// What the client talks to: `https://localhost:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Serves `body` at `path` (replacing what was there), answering as `behavior` says.
    pub fn add(&self, path: &str, body: Vec<u8>, behavior: Behavior) {
        let mut st = self.lock();
        // A new ETag for every version of a path, without hashing a large body.
        st.added += 1;
        let file = File {
            etag: format!("\"{:x}-{}\"", body.len(), st.added),
            body: Arc::new(body),
            last_modified: "Wed, 21 Oct 2026 07:28:00 GMT".into(),
        };
        st.files.insert(path.to_string(), file);
        st.standing.insert(path.to_string(), behavior);
    }

    /// Serves the files under `dir` too (`/a/b` is `dir/a/b`), read at each request.
    pub fn serve_dir(&self, dir: &Path) {
        self.lock().dir = Some(dir.to_path_buf());
    }

    /// Connections accepted so far (whether or not a request came).
    pub fn connections(&self) -> usize {
        self.lock().connections
    }

    /// Every request seen, in order.
    pub fn all_requests(&self) -> Vec<Seen> {
        self.lock().seen.clone()
    }

    /// `path` is no longer served (404).
    pub fn remove(&self, path: &str) {
        self.lock().files.remove(path);
    }

    /// How every request for `path` is answered from now on.
    pub fn set_behavior(&self, path: &str, behavior: Behavior) {
        self.lock().standing.insert(path.to_string(), behavior);
    }

    /// How the next request for `path` is answered (once; queued after earlier ones).
    pub fn next(&self, path: &str, behavior: Behavior) {
        let mut st = self.lock();
        st.queued
            .entry(path.to_string())
            .or_default()
            .push_back(behavior);
    }

    /// How the next poll is answered.
    pub fn script(&self, behavior: Behavior) {
        self.next(POLL, behavior);
    }

    /// Drops every queued behaviour: requests are answered by the standing ones again.
    pub fn script_clear(&self) {
        self.lock().queued.clear();
    }

    pub fn etag(&self, path: &str) -> String {
        self.lock().files[path].etag.clone()
    }

    pub fn set_answer(&self, v: serde_json::Value) {
        self.lock().answer = v.to_string();
    }

    /// Holds unchanged polls that ask for it (the long poll).
    pub fn hold_polls(&self) {
        self.lock().hold = true;
    }

    /// Polls being held now.
    pub fn holding(&self) -> usize {
        self.lock().holding
    }

    /// The log batches taken, in order.
    pub fn logs(&self) -> Vec<String> {
        self.lock().logs.clone()
    }

    /// Requests seen for `path`, in order.
    pub fn requests(&self, path: &str) -> Vec<Seen> {
        let st = self.lock();
        st.seen.iter().filter(|r| r.path == path).cloned().collect()
    }

    pub fn polls(&self) -> Vec<Seen> {
        self.requests(POLL)
    }

    /// The log batches that reached the server, taken or refused.
    pub fn log_posts(&self) -> Vec<Seen> {
        self.requests(LOGS)
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
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
        let _ = self.inner.shutdown(Shutdown::Write);
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

fn serve(
    tcp: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
    st: &Mutex<State>,
    stop: &AtomicBool,
) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(30)));
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
            serve_conn(&mut rustls::StreamOwned::new(conn, tcp), st, stop);
        }
        None => serve_conn(&mut { tcp }, st, stop),
    }
}

/// What one exchange left the connection as.
enum Next {
    Keep,
    Close,
    /// Gone (the client left, or a misbehaviour cut it).
    Gone,
}

/// HTTP/1.1 keep-alive: answers requests on one connection until the client closes it or
/// asks for `Connection: close` (nginx's default to its upstream).
fn serve_conn(conn: &mut dyn Conn, st: &Mutex<State>, stop: &AtomicBool) {
    let mut buf = Vec::new();
    let mut last = None;
    while let Some(req) = read_request(conn, &mut buf) {
        let (index, next) = exchange(conn, req, st, stop);
        last = Some(index);
        match next {
            Next::Keep => continue,
            Next::Close => conn.close(),
            Next::Gone => {}
        }
        break;
    }
    // The wire totals of the connection (the client's close_notify included) go to its
    // last exchange: with one request per connection, that exchange's own bytes.
    if let Some(i) = last {
        let (r, w) = (conn.tcp().read, conn.tcp().written);
        if let Some(seen) = st.lock().unwrap().seen.get_mut(i) {
            seen.wire_in = r;
            seen.wire_out = w;
        }
    }
}

/// The largest request head taken (nginx's default large header buffers are 32 KiB).
const MAX_HEAD: usize = 64 * 1024;

/// Reads one request (head and Content-Length body) from the connection; `None` when the
/// client is gone or sends something this server does not take.
fn read_request(conn: &mut dyn Conn, buf: &mut Vec<u8>) -> Option<Seen> {
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("").to_string();
    let mut words = request_line.split(' ');
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("").to_string();
    let version = words.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    // Request bodies come with a length here (the agent's client, nginx to its upstream).
    if header(&headers, "transfer-encoding").is_some() {
        return None;
    }
    let len: usize = header(&headers, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    Some(Seen {
        method,
        path,
        version,
        headers,
        body,
        status_sent: 0,
        bytes_in: head_end + len,
        bytes_out: 0,
        wire_in: 0,
        wire_out: 0,
    })
}

/// An answer before it is sent: the body is `data[start..]`.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    data: Arc<Vec<u8>>,
    start: usize,
}

impl Answer {
    fn new(status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Answer {
        Answer {
            status,
            headers,
            data: Arc::new(body),
            start: 0,
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Answers one request as its path's behaviour says; returns its index in `seen`.
fn exchange(
    conn: &mut dyn Conn,
    mut seen: Seen,
    st: &Mutex<State>,
    stop: &AtomicBool,
) -> (usize, Next) {
    let keep = seen.version != "HTTP/1.0"
        && !seen
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let behavior = {
        let mut s = st.lock().unwrap();
        let queued = s.queued.get_mut(&seen.path).and_then(VecDeque::pop_front);
        queued
            .or_else(|| s.standing.get(&seen.path).cloned())
            .unwrap_or(Behavior::Normal)
    };
    let push = |seen: Seen| {
        let mut s = st.lock().unwrap();
        s.seen.push(seen);
        s.seen.len() - 1
    };
    let mut early = None;
    let answer = match &behavior {
        Behavior::Reset => {
            let i = push(seen);
            let _ = conn.tcp().inner.shutdown(Shutdown::Both);
            return (i, Next::Gone);
        }
        Behavior::Silent => {
            let i = push(seen);
            let end = Instant::now() + Duration::from_secs(600);
            while Instant::now() < end && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
            return (i, Next::Gone);
        }
        Behavior::Status(code, h, b) => Answer::new(*code, h.clone(), b.clone().into_bytes()),
        Behavior::Slow(d) => {
            std::thread::sleep(*d);
            normal(&seen, st)
        }
        Behavior::Stall => {
            // Seen at once (status 0 until answered): the test waits for the request.
            early = Some(push(seen.clone()));
            let stalled = || {
                matches!(
                    st.lock().unwrap().standing.get(&seen.path),
                    Some(Behavior::Stall)
                )
            };
            while stalled() && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
            normal(&seen, st)
        }
        Behavior::Normal | Behavior::Cut(_) | Behavior::Trickle { .. } | Behavior::NoLength => {
            normal(&seen, st)
        }
    };
    let body = &answer.data[answer.start.min(answer.data.len())..];
    let no_length = matches!(behavior, Behavior::NoLength);
    let mut head = format!("HTTP/1.1 {} {}\r\n", answer.status, reason(answer.status));
    for (k, v) in &answer.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    // 204 and 304 carry no body and, as from nginx, no length either; without a length the
    // body ends where the connection does.
    if no_length {
        head.push_str("Connection: close\r\n");
    } else if answer.status != 204 && answer.status != 304 {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    seen.status_sent = answer.status;
    seen.bytes_out = head.len() + body.len();
    let i = match early {
        Some(i) => {
            st.lock().unwrap().seen[i] = seen;
            i
        }
        None => push(seen),
    };
    let sent = (|| -> std::io::Result<Next> {
        conn.write_all(head.as_bytes())?;
        match behavior {
            Behavior::Cut(at) => {
                let n = (at as usize).saturating_sub(answer.start).min(body.len());
                conn.write_all(&body[..n])?;
                conn.flush()?;
                // FIN without close_notify: the client sees a truncated stream.
                let _ = conn.tcp().inner.shutdown(Shutdown::Both);
                return Ok(Next::Gone);
            }
            Behavior::Trickle { chunk, every } => {
                for piece in body.chunks(chunk.max(1)) {
                    conn.write_all(piece)?;
                    conn.flush()?;
                    std::thread::sleep(every);
                }
            }
            _ => {
                for piece in body.chunks(256 * 1024) {
                    conn.write_all(piece)?;
                }
            }
        }
        conn.flush()?;
        Ok(if keep && !no_length {
            Next::Keep
        } else {
            Next::Close
        })
    })();
    (i, sent.unwrap_or(Next::Gone))
}

/// What the path serves: a file, the poll answer, the log intake, or a 404.
fn normal(seen: &Seen, st: &Mutex<State>) -> Answer {
    let (file, dir) = {
        let s = st.lock().unwrap();
        let file = s
            .files
            .get(&seen.path)
            .map(|f| (Arc::clone(&f.body), f.etag.clone(), f.last_modified.clone()));
        (file, s.dir.clone())
    };
    if let Some((data, etag, last_modified)) = file {
        return serve_file(seen, data, &etag, &last_modified);
    }
    // A file of the served folder (no `..`: the path stays inside it).
    let relative = seen.path.trim_start_matches('/');
    if let Some(dir) = dir.filter(|_| !relative.split('/').any(|c| c == "..")) {
        let path = dir.join(relative);
        if let (Ok(data), Ok(meta)) = (std::fs::read(&path), std::fs::metadata(&path)) {
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            let etag = format!("\"{:x}-{mtime:x}\"", data.len());
            return serve_file(seen, Arc::new(data), &etag, "Wed, 21 Oct 2026 07:28:00 GMT");
        }
    }
    match seen.path.as_str() {
        POLL => {
            hold(seen, st);
            poll_answer(seen, st)
        }
        LOGS => {
            st.lock()
                .unwrap()
                .logs
                .push(String::from_utf8_lossy(&seen.body).into_owned());
            Answer::new(200, vec![], b"{}".to_vec())
        }
        _ => Answer::new(404, vec![], b"404 Not Found".to_vec()),
    }
}

/// A file with its validators: 304 on a matching `If-None-Match` (or, without one,
/// `If-Modified-Since`), 206 for `Range: bytes=N-` (when `If-Range`, if any, still
/// matches), 416 past the end, else 200.
fn serve_file(seen: &Seen, data: Arc<Vec<u8>>, etag: &str, last_modified: &str) -> Answer {
    let validators = vec![
        ("ETag".to_string(), etag.to_string()),
        ("Last-Modified".to_string(), last_modified.to_string()),
    ];
    let not_modified = match seen.header("if-none-match") {
        Some(v) => v == etag,
        None => seen.header("if-modified-since") == Some(last_modified),
    };
    if not_modified {
        return Answer::new(304, validators, Vec::new());
    }
    let len = data.len();
    let range_start = seen
        .header("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|_| match seen.header("if-range") {
            Some(v) => v == etag || v == last_modified,
            None => true,
        });
    let mut headers = validators;
    headers.push(("Accept-Ranges".into(), "bytes".into()));
    match range_start {
        Some(s) if s < len => {
            headers.push((
                "Content-Range".into(),
                format!("bytes {s}-{}/{len}", len - 1),
            ));
            Answer {
                status: 206,
                headers,
                data,
                start: s,
            }
        }
        Some(_) => Answer::new(
            416,
            vec![("Content-Range".into(), format!("bytes */{len}"))],
            Vec::new(),
        ),
        None => Answer {
            status: 200,
            headers,
            data,
            start: 0,
        },
    }
}

/// The long poll: an unchanged poll asking `Prefer: wait=N` waits (when holding is on)
/// until the answer changes or N seconds pass.
fn hold(seen: &Seen, st: &Mutex<State>) {
    let wait = seen
        .header("prefer")
        .and_then(|v| v.trim().strip_prefix("wait="))
        .and_then(|n| n.trim().parse::<u64>().ok());
    let Some(secs) = wait.filter(|s| *s > 0) else {
        return;
    };
    let unchanged =
        |s: &State| seen.header("if-none-match") == Some(etag_of(s.answer.as_bytes()).as_str());
    {
        let mut s = st.lock().unwrap();
        if !s.hold || !unchanged(&s) {
            return;
        }
        s.holding += 1;
    }
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end && unchanged(&st.lock().unwrap()) {
        std::thread::sleep(Duration::from_millis(20));
    }
    st.lock().unwrap().holding -= 1;
}

fn poll_answer(seen: &Seen, st: &Mutex<State>) -> Answer {
    let s = st.lock().unwrap();
    let tag = etag_of(s.answer.as_bytes());
    let mut headers = vec![("ETag".to_string(), tag.clone())];
    if s.hold && seen.header("prefer").is_some_and(|v| v.contains("wait=")) {
        headers.push(("Preference-Applied".into(), "wait".into()));
    }
    if seen.header("if-none-match") == Some(tag.as_str()) {
        Answer::new(304, headers, Vec::new())
    } else {
        Answer::new(200, headers, s.answer.clone().into_bytes())
    }
}
