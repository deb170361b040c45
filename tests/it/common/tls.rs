//! A loopback HTTPS server for tests, with a test CA made at test time.
//!
//! - The certificate is the process's one test CA's ([`super::testca::test_ca`]); every
//!   [`HttpsServer::start`] makes sure it exists before the first request.
//! - [`HttpsServer`] serves in-memory files with ETag/Last-Modified, `Range` + `If-Range`,
//!   `If-None-Match`/`If-Modified-Since` (304), and scripted misbehaviour ([`Behavior`]):
//!   a cut connection, a 404, a trickle. Every request is recorded for assertions.
//!
//! The server side uses rustls with the aws-lc-rs provider; the client under test is the
//! product's own (minreq via the system store).
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use super::testca::test_ca;

/// How the server answers requests for one path.
#[derive(Debug, Clone)]
pub enum Behavior {
    Normal,
    /// The first full (non-Range) GET sends the headers for the whole file, then `at` bytes,
    /// then closes the connection without TLS close_notify. Later requests are served normally.
    CutOnceAt(u64),
    /// Every GET is cut after `at` bytes (a link that always drops).
    CutAlwaysAt(u64),
    NotFound,
    /// `302 Found` to this Location, as a CDN or a misconfigured proxy answers.
    Redirect(String),
    /// `chunk` bytes every `every`, until the client goes away.
    Trickle {
        chunk: usize,
        every: Duration,
    },
    /// `200` with no Content-Length: the body ends when the server closes the connection,
    /// as a streaming endpoint or an old proxy answers.
    NoLength,
}

#[derive(Debug, Clone)]
pub struct Resource {
    pub body: Arc<Vec<u8>>,
    pub etag: String,
    pub last_modified: String,
    pub behavior: Behavior,
}

/// One request as the server saw it (header names lowercased).
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
}

#[derive(Default)]
struct State {
    resources: HashMap<String, Resource>,
    seen: Vec<SeenRequest>,
    cut_done: std::collections::HashSet<String>,
}

pub struct HttpsServer {
    pub port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl HttpsServer {
    pub fn start() -> HttpsServer {
        let config = test_ca().server_config();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(tcp) = conn else { continue };
                let (config, st) = (config.clone(), st.clone());
                std::thread::spawn(move || {
                    let _ = serve(tcp, config, st);
                });
            }
        });
        HttpsServer { port, state, stop }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{}", self.port, path)
    }

    pub fn add(&self, path: &str, body: Vec<u8>, behavior: Behavior) -> Arc<Vec<u8>> {
        let body = Arc::new(body);
        let etag = format!("\"{:x}-{}\"", body.len(), path.len() + self.port as usize);
        self.state.lock().unwrap().resources.insert(
            path.to_string(),
            Resource {
                body: body.clone(),
                etag,
                last_modified: "Wed, 21 Oct 2026 07:28:00 GMT".into(),
                behavior,
            },
        );
        body
    }

    pub fn set_behavior(&self, path: &str, behavior: Behavior) {
        if let Some(r) = self.state.lock().unwrap().resources.get_mut(path) {
            r.behavior = behavior;
        }
    }

    pub fn etag(&self, path: &str) -> String {
        self.state.lock().unwrap().resources[path].etag.clone()
    }

    /// Requests seen for `path`, in order.
    pub fn requests(&self, path: &str) -> Vec<SeenRequest> {
        let st = self.state.lock().unwrap();
        st.seen.iter().filter(|r| r.path == path).cloned().collect()
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(
    tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    state: Arc<Mutex<State>>,
) -> std::io::Result<()> {
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(conn, tcp.try_clone()?);
    // HTTP/1.1 keep-alive, as nginx and Go serve: the connection stays open after an answer
    // until the client closes it or asks for `Connection: close`.
    while serve_one(&mut tls, &tcp, &state)? {}
    Ok(())
}

/// Serves one request; false when the connection is to end.
fn serve_one(
    tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>,
    tcp: &TcpStream,
    state: &Arc<Mutex<State>>,
) -> std::io::Result<bool> {
    // Read the request head.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if tls.read(&mut byte)? == 0 || head.len() > 64 * 1024 {
            return Ok(false);
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("").to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let keep = !headers
        .get("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let resource = {
        let mut st = state.lock().unwrap();
        st.seen.push(SeenRequest {
            method: method.clone(),
            path: path.clone(),
            headers: headers.clone(),
        });
        st.resources.get(&path).cloned()
    };
    let Some(res) = resource else {
        return respond_simple(tls, keep, "404 Not Found");
    };
    if let Behavior::NotFound = res.behavior {
        return respond_simple(tls, keep, "404 Not Found");
    }
    if let Behavior::Redirect(to) = &res.behavior {
        let h = format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n");
        tls.write_all(h.as_bytes())?;
        return finish(tls, keep);
    }
    let validators = format!(
        "ETag: {}\r\nLast-Modified: {}\r\n",
        res.etag, res.last_modified
    );
    if headers.get("if-none-match") == Some(&res.etag)
        || (!headers.contains_key("if-none-match")
            && headers.get("if-modified-since") == Some(&res.last_modified))
    {
        // No Content-Length, no close: what nginx sends.
        let h = format!("HTTP/1.1 304 Not Modified\r\n{validators}\r\n");
        tls.write_all(h.as_bytes())?;
        return finish(tls, keep);
    }
    let len = res.body.len() as u64;
    // Range honoured only when If-Range (if any) matches the current validator.
    let range_start = headers
        .get("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|_| match headers.get("if-range") {
            Some(v) => v == &res.etag || v == &res.last_modified,
            None => true,
        });
    let (status, start) = match range_start {
        Some(s) if s < len => ("206 Partial Content", s),
        Some(_) => {
            let h = format!("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\n\r\n");
            tls.write_all(h.as_bytes())?;
            return finish(tls, keep);
        }
        None => ("200 OK", 0),
    };
    let length = match res.behavior {
        Behavior::NoLength => String::new(),
        _ => format!("Content-Length: {}\r\n", len - start),
    };
    let mut h = format!(
        "HTTP/1.1 {status}\r\n{validators}Accept-Ranges: bytes\r\n{length}{}",
        // Without a length the body ends where the connection does.
        if matches!(res.behavior, Behavior::NoLength) {
            "Connection: close\r\n"
        } else {
            ""
        }
    );
    if start > 0 {
        h.push_str(&format!(
            "Content-Range: bytes {start}-{}/{len}\r\n",
            len - 1
        ));
    }
    h.push_str("\r\n");
    tls.write_all(h.as_bytes())?;
    let body = &res.body[start as usize..];
    match res.behavior {
        Behavior::CutOnceAt(at) if start == 0 => {
            let first_time = state.lock().unwrap().cut_done.insert(path.clone());
            if first_time {
                tls.write_all(&body[..at as usize])?;
                tls.flush()?;
                // FIN without close_notify: the client sees a truncated stream.
                let _ = tcp.shutdown(Shutdown::Both);
                return Ok(false);
            }
            tls.write_all(body)?;
        }
        Behavior::CutAlwaysAt(at) => {
            let n = (at.saturating_sub(start) as usize).min(body.len());
            tls.write_all(&body[..n])?;
            tls.flush()?;
            let _ = tcp.shutdown(Shutdown::Both);
            return Ok(false);
        }
        Behavior::Trickle { chunk, every } => {
            for piece in body.chunks(chunk) {
                tls.write_all(piece)?;
                tls.flush()?;
                std::thread::sleep(every);
            }
        }
        Behavior::NoLength => {
            tls.write_all(body)?;
            return finish(tls, false);
        }
        _ => {
            for piece in body.chunks(256 * 1024) {
                tls.write_all(piece)?;
            }
        }
    }
    finish(tls, keep)
}

fn respond_simple(
    tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>,
    keep: bool,
    status: &str,
) -> std::io::Result<bool> {
    let body = status.as_bytes();
    let h = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(h.as_bytes())?;
    tls.write_all(body)?;
    finish(tls, keep)
}

/// Ends an answer: flushed, the connection kept for the next request unless the client
/// asked to close it.
fn finish(
    tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>,
    keep: bool,
) -> std::io::Result<bool> {
    if !keep {
        tls.conn.send_close_notify();
    }
    tls.flush()?;
    Ok(keep)
}
