//! The one HTTP client (minreq + rustls, TLS always verified against the system store):
//! every request the agent and svc-server make goes through here, so that the deadline, the
//! size caps, the redirect policy and the machine's identity are decided once.
//!
//! - Redirects: none by default. A request built with [`Request::follow_redirects`]
//!   (artifact and registry GETs) follows at most [`MAX_REDIRECTS`], hop by hop, and never
//!   from https to anything else: the plain hop is refused before it is made.
//! - Identity: the machine's headers go only to the origin they belong to, never to a host a
//!   redirect names.
//! - Caps: the status line and headers are capped here; a body is read with
//!   [`Response::read_body`] up to a cap the caller names, or streamed (`Read`).
//! - Keepalive: a request that may wait long on a quiet connection (a held poll) asks for
//!   TCP keepalive ([`Request::keepalive`]), so that a connection a NAT dropped without a
//!   reset is found in minutes, not at the request's deadline ([`KeepAlive`]).
//! - Traffic: the bytes of every exchange at the HTTP layer are counted ([`take_traffic`]),
//!   for the byte budget (`update::budget`).
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

/// HTTP-layer bytes sent and received by this process since the last [`take_traffic`]:
/// request line, headers and body as sent (the headers minreq adds, `Host` and
/// `Content-Length`, reckoned), status line, headers and body as received. TLS records and
/// handshakes, TCP and IP headers are not counted.
static TRAFFIC: AtomicU64 = AtomicU64::new(0);

/// The bytes counted since the last call (see [`TRAFFIC`]), and the count started again.
pub(crate) fn take_traffic() -> u64 {
    TRAFFIC.swap(0, Ordering::Relaxed)
}

fn count(bytes: u64) {
    TRAFFIC.fetch_add(bytes, Ordering::Relaxed);
}

/// The bytes of a request as it goes out: `METHOD target HTTP/1.1`, the headers minreq adds
/// (`Host`, and `Content-Length` with a body), ours, the blank line and the body.
fn request_bytes(method: &str, url: &str, headers: usize, body: usize) -> u64 {
    let host = origin_of(url).split("://").nth(1).unwrap_or("").len();
    let target = url.len().saturating_sub(origin_of(url).len()).max(1);
    let length = if body > 0 {
        "Content-Length: \r\n".len() + body.to_string().len()
    } else {
        0
    };
    let line = method.len() + 1 + target + " HTTP/1.1\r\n".len();
    (line + "Host: \r\n".len() + host + length + headers + 2 + body) as u64
}

/// Redirects a request that follows them follows at most.
pub(crate) const MAX_REDIRECTS: usize = 5;
const MAX_HEADERS_BYTES: usize = 64 * 1024;
const MAX_STATUS_LINE: usize = 1024;
/// Who is asking, on every request.
pub(crate) const USER_AGENT: &str = concat!("svc-agent/", env!("SVC_VERSION"));

/// Headers that say who this machine is, for one origin (`https://host:port`). Debug shows
/// the origin only.
#[derive(Clone, PartialEq, Eq)]
pub struct Identity {
    pub origin: String,
    pub headers: Vec<(&'static str, String)>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({}, headers redacted)", self.origin)
    }
}

/// `scheme://host[:port]` of a URL.
pub(crate) fn origin_of(url: &str) -> &str {
    let after = url.find("://").map_or(0, |i| i + 3);
    let end = url[after..].find('/').map_or(url.len(), |i| after + i);
    &url[..end]
}

/// Why a request ended without an answer, or an answer was not taken.
#[derive(Debug)]
pub(crate) enum HttpError {
    /// The network failed: connect, TLS, a timeout, a cut (worth another attempt).
    Network(String),
    /// A redirect the policy refuses (https to anything else, not http(s), too many).
    Refused(String),
    /// The body is larger than the caller's cap.
    TooLarge(u64),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Network(m) | HttpError::Refused(m) => f.write_str(m),
            HttpError::TooLarge(cap) => write!(f, "the answer is larger than {cap} bytes"),
        }
    }
}

/// One request, built and then sent once with [`Request::send`].
pub struct Request {
    /// The body of a POST or a PUT (`put` says which); `None`: a GET.
    post: Option<Vec<u8>>,
    put: bool,
    url: String,
    headers: Vec<(&'static str, String)>,
    timeout_secs: u64,
    follow: bool,
    identity: Option<Identity>,
    keepalive: Option<KeepAlive>,
}

/// A GET of `url` with a deadline of `timeout_secs` for the whole exchange.
pub(crate) fn get(url: &str, timeout_secs: u64) -> Request {
    Request::new(url, None, timeout_secs)
}

/// A POST of `body` to `url` with a deadline of `timeout_secs`.
pub(crate) fn post(url: &str, body: Vec<u8>, timeout_secs: u64) -> Request {
    Request::new(url, Some(body), timeout_secs)
}

/// A PUT of `body` to `url` with a deadline of `timeout_secs` (hawkBit's `configData`).
pub(crate) fn put(url: &str, body: Vec<u8>, timeout_secs: u64) -> Request {
    Request {
        put: true,
        ..Request::new(url, Some(body), timeout_secs)
    }
}

impl Request {
    fn new(url: &str, post: Option<Vec<u8>>, timeout_secs: u64) -> Request {
        Request {
            post,
            put: false,
            url: url.to_string(),
            headers: Vec::new(),
            timeout_secs: timeout_secs.max(1),
            follow: false,
            identity: None,
            keepalive: None,
        }
    }

    pub(crate) fn header(mut self, name: &'static str, value: impl Into<String>) -> Request {
        self.headers.push((name, value.into()));
        self
    }

    /// Follows redirects by the download policy (see the module docs).
    pub(crate) fn follow_redirects(mut self) -> Request {
        self.follow = true;
        self
    }

    /// TCP keepalive on the connection (see [`KeepAlive`]).
    pub(crate) fn keepalive(mut self, k: KeepAlive) -> Request {
        self.keepalive = Some(k);
        self
    }

    /// Sends `identity`'s headers, to its own origin only.
    pub(crate) fn identity(mut self, identity: Option<Identity>) -> Request {
        self.identity = identity;
        self
    }

    fn build(&self, url: &str) -> minreq::Request {
        let base = match &self.post {
            Some(body) if self.put => minreq::put(url).with_body(body.clone()),
            Some(body) => minreq::post(url).with_body(body.clone()),
            None => minreq::get(url),
        };
        let own = self
            .identity
            .iter()
            .filter(|id| origin_of(url) == id.origin)
            .flat_map(|id| id.headers.iter());
        self.headers
            .iter()
            .chain(own)
            .fold(base, |r, (k, v)| r.with_header(*k, v.clone()))
            .with_header("User-Agent", USER_AGENT)
            .with_timeout(self.timeout_secs)
            // Redirects are followed here, hop by hop, or not at all: never by minreq.
            .with_follow_redirects(false)
            .with_max_headers_size(MAX_HEADERS_BYTES)
            .with_max_status_line_length(MAX_STATUS_LINE)
    }

    /// This request's bytes to `url` at the HTTP layer (see [`TRAFFIC`]).
    fn sent_bytes(&self, url: &str) -> u64 {
        let method = match (&self.post, self.put) {
            (Some(_), true) => "PUT",
            (Some(_), false) => "POST",
            (None, _) => "GET",
        };
        let own = self
            .identity
            .iter()
            .filter(|id| origin_of(url) == id.origin)
            .flat_map(|id| id.headers.iter());
        let headers: usize = self
            .headers
            .iter()
            .chain(own)
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum::<usize>()
            + "User-Agent".len()
            + USER_AGENT.len()
            + 4;
        request_bytes(method, url, headers, self.post.as_ref().map_or(0, Vec::len))
    }

    pub(crate) fn send(self) -> Result<Response, HttpError> {
        use_ring();
        let mut current = self.url.clone();
        for _ in 0..=MAX_REDIRECTS {
            // The whole exchange, body included, keeps this deadline: on the daemon's loop
            // it is a bounded wait for systemd's watchdog (`watchdog`), until the answer is
            // dropped.
            let wait = crate::watchdog::waiting(std::time::Duration::from_secs(self.timeout_secs));
            let armer = self
                .keepalive
                .and_then(|k| Armer::start(port_of(&current), k, self.timeout_secs));
            let sent = self.build(&current).send_lazy();
            drop(armer);
            // A request that got no answer is not counted: most never left (no connection).
            let lazy = sent.map_err(|e| HttpError::Network(network_text(&e)))?;
            count(self.sent_bytes(&current) + received_head_bytes(&lazy));
            let resp = Response { lazy, _wait: wait };
            if !self.follow || !matches!(resp.status(), 301 | 302 | 303 | 307 | 308) {
                return Ok(resp);
            }
            let location = resp.header("location").ok_or_else(|| {
                HttpError::Refused(format!(
                    "{current} answered {} without a Location",
                    resp.status()
                ))
            })?;
            let next = join_location(&current, location.trim());
            if self.url.starts_with("https://") && !next.starts_with("https://") {
                return Err(HttpError::Refused(format!(
                    "{} redirected to plain http {next}; not followed",
                    self.url
                )));
            }
            if !(next.starts_with("https://") || next.starts_with("http://")) {
                return Err(HttpError::Refused(format!(
                    "{} redirected to {next}; only http(s) is followed",
                    self.url
                )));
            }
            current = next;
        }
        Err(HttpError::Refused(format!(
            "{}: more than {MAX_REDIRECTS} redirects",
            self.url
        )))
    }
}

/// TCP keepalive that finds a dead connection within a bound: after `idle` seconds of
/// silence the kernel sends a probe (an empty segment, 52 bytes with its answer's as many
/// at the IP level), then up to `count` more `interval` apart; with no answer to `count`
/// of them the connection fails with `ETIMEDOUT`, the blocked read returns, and the request
/// ends as a network failure (retried on a new connection by the caller's backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeepAlive {
    idle: u32,
    interval: u32,
    count: u32,
}

/// How fast a silently dropped held poll is found (docs/protocol.md: 5 minutes).
pub(crate) const KEEPALIVE_BOUND_SECS: u64 = 300;

impl KeepAlive {
    /// Found within `bound_secs`: three probes `bound/30` apart after `bound - 3 probes` of
    /// silence (300 s: a probe after 270 s of silence, the connection given up 30 s later).
    /// One probe round trip per 270 s of an idle held poll: about 32 KiB a day.
    pub(crate) fn within(bound_secs: u64) -> KeepAlive {
        let bound = bound_secs.clamp(4, 86_400) as u32;
        let count = 3;
        let interval = (bound / 30).max(1);
        KeepAlive {
            idle: bound - count * interval,
            interval,
            count,
        }
    }

    /// The product's bound; `SVC_AGENT_KEEPALIVE_SECS` overrides it (tests, a link whose
    /// NATs forget faster or slower).
    pub(crate) fn from_env() -> KeepAlive {
        let secs = std::env::var("SVC_AGENT_KEEPALIVE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(KEEPALIVE_BOUND_SECS);
        KeepAlive::within(secs)
    }

    /// Sets the options on one socket; false when one was refused.
    fn apply(self, fd: i32) -> bool {
        use crate::sys::set_sockopt_int as set;
        set(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)
            && set(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, self.idle as i32)
            && set(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_KEEPINTVL,
                self.interval as i32,
            )
            && set(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, self.count as i32)
            // Keepalive probes only a connection with nothing in flight: one whose data
            // (our request, a TLS record) went into the drop retransmits for about 15 min
            // instead. The user timeout bounds that case by the same bound (tcp(7)).
            && set(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_USER_TIMEOUT,
                self.bound_ms(),
            )
    }

    /// The whole bound, in the milliseconds `TCP_USER_TIMEOUT` takes.
    fn bound_ms(self) -> i32 {
        ((self.idle + self.count * self.interval) as i32).saturating_mul(1000)
    }
}

/// The port a URL's connection goes to.
fn port_of(url: &str) -> u16 {
    let origin = origin_of(url);
    let host_port = origin.split_once("://").map_or(origin, |(_, r)| r);
    let port = host_port
        .rsplit_once(':')
        .filter(|(h, _)| !h.ends_with(']') || host_port.starts_with('['))
        .and_then(|(_, p)| p.parse().ok());
    port.unwrap_or(if url.starts_with("http://") { 80 } else { 443 })
}

/// The sockets this process has open now: descriptor and socket inode (a descriptor number
/// is reused once closed; the inode names one socket).
fn sockets() -> std::collections::HashMap<i32, u64> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Default::default();
    };
    dir.flatten()
        .filter_map(|e| {
            let link = std::fs::read_link(e.path()).ok()?;
            let inode = link
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()?;
            Some((e.file_name().to_str()?.parse().ok()?, inode))
        })
        .collect()
}

/// Arms keepalive on the connection a request is opening: minreq makes and owns the socket,
/// so a helper thread looks for the TCP sockets to the request's port that were not open
/// before the request, and sets the options on them once connected. Another new connection
/// to the same port (the log uploader's, to the same app, often opened with the next poll)
/// may be found first: so the thread goes on looking until the request returns (drop) or
/// its deadline, every 20 ms until one is armed, then less and less often (at most every
/// `ARMED_STEP_MAX`), and each new one gets the options too (which costs nothing).
/// How often the armer looks for the request's socket until it has armed one.
const ARMING_STEP: std::time::Duration = std::time::Duration::from_millis(20);
/// How seldom it looks at most once it has: a later new socket (the request's own, when
/// another connection to the port came first) is armed within this.
const ARMED_STEP_MAX: std::time::Duration = std::time::Duration::from_secs(5);

struct Armer {
    done: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Armer {
    fn start(port: u16, k: KeepAlive, deadline_secs: u64) -> Option<Armer> {
        let before: std::collections::HashSet<u64> = sockets().into_values().collect();
        let done = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let flag = std::sync::Arc::clone(&done);
        let end = std::time::Instant::now() + std::time::Duration::from_secs(deadline_secs);
        let thread = crate::sys::thread("keepalive")
            .stack_size(64 * 1024)
            .spawn(move || {
                let mut armed = std::collections::HashSet::new();
                // The connect and the TLS handshake take a few round trips: look soon.
                let mut step = ARMING_STEP;
                loop {
                    for (fd, inode) in sockets() {
                        if !before.contains(&inode)
                            && !armed.contains(&inode)
                            && crate::sys::tcp_peer_port(fd) == Some(port)
                            && k.apply(fd)
                        {
                            armed.insert(inode);
                        }
                    }
                    if !armed.is_empty() {
                        step = (step * 2).min(ARMED_STEP_MAX);
                    }
                    let (lock, cv) = &*flag;
                    let Ok(guard) = lock.lock() else { return };
                    let left = end.saturating_duration_since(std::time::Instant::now());
                    if *guard || left.is_zero() {
                        return;
                    }
                    let Ok((guard, _)) = cv.wait_timeout_while(guard, left.min(step), |d| !*d)
                    else {
                        return;
                    };
                    if *guard {
                        return;
                    }
                }
            });
        match thread {
            Ok(t) => Some(Armer {
                done,
                thread: Some(t),
            }),
            Err(e) => {
                crate::warn!("http", "no keepalive on this connection: {e}");
                None
            }
        }
    }
}

impl Drop for Armer {
    fn drop(&mut self) {
        let (lock, cv) = &*self.done;
        if let Ok(mut d) = lock.lock() {
            *d = true;
            cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Makes *ring* the process's TLS crypto provider (once, before the first request). minreq
/// builds its one `ClientConfig` from the process default, and rustls chooses none by itself
/// when both of its providers are compiled in (minreq turns on the aws-lc-rs one); a process
/// that already chose one keeps it.
fn use_ring() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// minreq's error text, with the likely cause named when the clock makes every certificate
/// look invalid (a board without a battery-backed clock boots in 1970).
fn network_text(e: &minreq::Error) -> String {
    let text = format!("request failed: {e}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let built: u64 = env!("SVC_BUILD_EPOCH").parse().unwrap_or(0);
    if (text.contains("NotValidYet") || text.contains("Expired")) && now < built {
        format!("{text} (the system clock is before this agent's build date: waiting for time sync would fix this)")
    } else {
        text
    }
}

/// An answer's status line (`HTTP/1.1 200 OK`), its headers and the blank line.
fn received_head_bytes(lazy: &minreq::ResponseLazy) -> u64 {
    let headers: usize = lazy
        .headers
        .iter()
        .map(|(k, v)| k.len() + v.len() + 4)
        .sum();
    (13 + lazy.reason_phrase.len() + 2 + headers + 2) as u64
}

/// An answer whose body has not been read yet.
pub(crate) struct Response {
    lazy: minreq::ResponseLazy,
    _wait: crate::watchdog::Wait,
}

impl Response {
    pub(crate) fn status(&self) -> u16 {
        self.lazy.status_code
    }

    pub(crate) fn reason(&self) -> &str {
        &self.lazy.reason_phrase
    }

    pub(crate) fn headers(&self) -> &[(String, String)] {
        &self.lazy.headers
    }

    /// The first header of that name (names compare without case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.lazy
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The whole body, at most `cap` bytes. 1xx, 204 and 304 answers have none (RFC 9110
    /// §6.4.1), and a keep-alive server does not close the connection after them: reading
    /// to EOF would wait for the deadline.
    pub(crate) fn read_body(self, cap: u64) -> Result<Vec<u8>, HttpError> {
        let status = self.status();
        let mut body = Vec::new();
        if (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(body);
        }
        let read = self.lazy.take(cap.saturating_add(1)).read_to_end(&mut body);
        count(body.len() as u64);
        read.map_err(|e| HttpError::Network(format!("reading the answer: {e}")))?;
        if body.len() as u64 > cap {
            return Err(HttpError::TooLarge(cap));
        }
        Ok(body)
    }
}

/// The body as a stream (downloads), for the caller to cap.
impl Read for Response {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.lazy.read(buf)?;
        count(n as u64);
        Ok(n)
    }
}

/// A Location made absolute against the URL that answered it (RFC 9110 §10.2.2).
fn join_location(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
    let origin_end = rest.find('/').unwrap_or(rest.len());
    let origin = format!("{scheme}://{}", &rest[..origin_end]);
    if let Some(path) = location.strip_prefix("//") {
        format!("{scheme}://{path}")
    } else if location.starts_with('/') {
        format!("{origin}{location}")
    } else {
        let path = &rest[origin_end..];
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        format!("{origin}{dir}{location}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_join_like_a_browser() {
        let b = "https://app.example:8443/a/b/file?x=1";
        assert_eq!(join_location(b, "https://cdn/x"), "https://cdn/x");
        assert_eq!(join_location(b, "/root"), "https://app.example:8443/root");
        assert_eq!(
            join_location(b, "next"),
            "https://app.example:8443/a/b/next"
        );
        assert_eq!(join_location(b, "//other/p"), "https://other/p");
        assert_eq!(join_location("https://h", "x"), "https://h/x");
    }

    #[test]
    fn keepalive_finds_a_dead_connection_within_its_bound() {
        let k = KeepAlive::within(KEEPALIVE_BOUND_SECS);
        assert_eq!((k.idle, k.interval, k.count), (270, 10, 3));
        let t = KeepAlive::within(6);
        assert_eq!(t.idle + t.count * t.interval, 6);
        assert_eq!(port_of("https://h:8443/a"), 8443);
        assert_eq!(port_of("https://h/a"), 443);
        assert_eq!(port_of("http://h"), 80);
        assert_eq!(port_of("https://[::1]:9/x"), 9);
        assert_eq!(port_of("https://[::1]/x"), 443);
    }

    /// The bytes a plain-http server sees and sends for one exchange, against the estimate
    /// the byte budget counts.
    #[test]
    fn the_counted_bytes_are_those_on_the_socket_within_a_few() {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://127.0.0.1:{}/v1/poll?x=1",
            listener.local_addr().unwrap().port()
        );
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-Etag: \"abc\"\r\n\r\nhello world";
        let server = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let (mut seen, mut length) = (0usize, 0usize);
            loop {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                seen += line.len();
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0u8; length];
            r.read_exact(&mut body).unwrap();
            (&conn).write_all(answer).unwrap();
            seen + length
        });
        let req = post(&url, vec![b'x'; 300], 10).header("X-Svc-Status", "abcdef");
        let estimate = req.sent_bytes(&url);
        let resp = req.send().unwrap();
        let head = received_head_bytes(&resp.lazy);
        assert_eq!(resp.read_body(1000).unwrap(), b"hello world");
        let sent = server.join().unwrap() as u64;
        assert!(
            estimate.abs_diff(sent) <= 8,
            "estimated {estimate} bytes sent, the server read {sent}"
        );
        assert_eq!(head + 11, answer.len() as u64, "received");
    }

    #[test]
    fn the_armer_sets_keepalive_on_the_new_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let armer = Armer::start(port, KeepAlive::within(60), 30).unwrap();
        let _accepted = listener;
        let conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        // The armer ends by itself once it has armed the connection.
        let mut armer = armer;
        armer.thread.take().unwrap().join().unwrap();
        use std::os::fd::AsRawFd;
        let get = |level, name| crate::sys::sockopt_int(conn.as_raw_fd(), level, name);
        assert_eq!(get(libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 54);
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), 2);
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 3);
    }

    #[test]
    fn origins() {
        assert_eq!(origin_of("https://h:8443/a/b"), "https://h:8443");
        assert_eq!(origin_of("https://h"), "https://h");
        assert_eq!(origin_of("http://h/"), "http://h");
    }
}
