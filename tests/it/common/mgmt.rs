//! A management app on loopback HTTPS, scripted per test: answers polls (with ETag and 304),
//! takes log batches, and misbehaves on request (errors, garbage, slowness, resets).
#![allow(dead_code)]
use super::testca::TestCa;
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
}

pub struct MgmtServer {
    pub url: String,
    pub state: Arc<Mutex<State>>,
    pub ca: TestCa,
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

impl MgmtServer {
    pub fn start(dir: &std::path::Path) -> MgmtServer {
        let ca = TestCa::new(dir);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "https://localhost:{}",
            listener.local_addr().unwrap().port()
        );
        let state = Arc::new(Mutex::new(State::default()));
        let (st, cfg) = (Arc::clone(&state), Arc::clone(&ca.server_config));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (st, cfg) = (Arc::clone(&st), Arc::clone(&cfg));
                std::thread::spawn(move || serve(conn, cfg, st));
            }
        });
        MgmtServer { url, state, ca }
    }

    pub fn set_answer(&self, v: serde_json::Value) {
        self.state.lock().unwrap().answer = v.to_string();
    }

    pub fn script(&self, b: Behavior) {
        self.state.lock().unwrap().script.push_back(b);
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

fn serve(tcp: TcpStream, cfg: Arc<rustls::ServerConfig>, st: Arc<Mutex<State>>) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(20)));
    let tcp = Counting {
        inner: tcp,
        read: 0,
        written: 0,
    };
    let conn = match rustls::ServerConnection::new(cfg) {
        Ok(c) => c,
        Err(_) => return,
    };
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .unwrap_or("")
        .split(' ')
        .nth(1)
        .unwrap_or("")
        .to_string();
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
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = buf[head_end..head_end + len].to_vec();
    let mut seen = Seen {
        path: path.clone(),
        headers,
        body,
        status_sent: 0,
        bytes_in: buf.len(),
        bytes_out: 0,
        wire_in: 0,
        wire_out: 0,
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
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            data.len() - start
        );
        seen.status_sent = if range_start.is_some() { 206 } else { 200 };
        st.lock().unwrap().seen.push(seen);
        let _ = tls.write_all(head.as_bytes());
        let body = &data[start..];
        match cut {
            Some(n) => {
                let _ = tls.write_all(&body[..n.min(body.len())]);
                let _ = tls.flush();
                let _ = tls.sock.inner.shutdown(std::net::Shutdown::Both);
            }
            None => {
                let _ = tls.write_all(body);
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.flush();
            }
        }
        return;
    }
    if path.starts_with("/artifacts/") {
        seen.status_sent = 404;
        st.lock().unwrap().seen.push(seen);
        let _ = tls
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let _ = tls.flush();
        tls.conn.send_close_notify();
        let _ = tls.flush();
        return;
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
        Behavior::Reset => {
            st.lock().unwrap().seen.push(seen);
            let _ = tls.sock.inner.shutdown(std::net::Shutdown::Both);
            return;
        }
        Behavior::Garbage => (200, vec![], "{\"config\": [this is not json".into()),
        Behavior::Status(code, h, b) => (code, h, b),
        Behavior::Slow(d) => {
            std::thread::sleep(d);
            normal(&path, &seen, &st)
        }
        Behavior::Normal => normal(&path, &seen, &st),
    };
    let mut resp = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        payload.len()
    );
    for (k, v) in &extra {
        resp.push_str(&format!("{k}: {v}\r\n"));
    }
    resp.push_str("\r\n");
    resp.push_str(&payload);
    seen.status_sent = status;
    seen.bytes_out = resp.len();
    let _ = tls.write_all(resp.as_bytes());
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.flush();
    // Whatever the client still sends (its close_notify) counts too.
    let _ = tls
        .sock
        .inner
        .set_read_timeout(Some(Duration::from_millis(200)));
    let _ = std::io::copy(&mut tls.sock, &mut std::io::sink());
    seen.wire_in = tls.sock.read;
    seen.wire_out = tls.sock.written;
    st.lock().unwrap().seen.push(seen);
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
    if seen.header("if-none-match") == Some(tag.as_str()) {
        (304, vec![("ETag".into(), tag)], String::new())
    } else {
        (200, vec![("ETag".into(), tag)], s.answer.clone())
    }
}
