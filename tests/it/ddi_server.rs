//! A DDI test server written from the hawkBit DDI API documentation (docs/hawkbit.md lists
//! the resources and fields), plain HTTP on 127.0.0.1, one thread per connection, every
//! answer closing its connection. What it serves:
//!
//! - `GET /{tenant}/controller/v1/{controllerId}`: `{"config": {"polling": {"sleep"}},
//!   "_links": {"deploymentBase": {"href"}}}` with an `ETag` (a hash of the body), `304` on a
//!   matching `If-None-Match`;
//! - `PUT .../configData` (`{"mode", "data": {..}}`): recorded; the base names it (a
//!   `configData` link) while the test asks for it;
//! - `GET .../deploymentBase/{actionId}`: the deployment document set by the test;
//! - `POST .../deploymentBase/{actionId}/feedback`: recorded; `closed` ends the action (the
//!   base stops naming it, as hawkBit does);
//! - `GET .../cancelAction/{id}` (`{"id", "cancelAction": {"stopId"}}`) and `POST
//!   .../cancelAction/{id}/feedback`: the base names it while set; `closed` drops the
//!   stopped deployment, `rejected` keeps it;
//! - `GET /artifacts/{name}`: bytes set by the test, with `Range: bytes=N-` answered `206`
//!   (`softwaremodules/{id}/artifacts/{file}` in hawkBit; the path is the server's to choose).
//!
//! Requests without `Authorization: TargetToken {token}` get `401`, artifacts included. A test can queue raw
//! answers for the base resource (429, 503, a huge body) and swap any document, make the
//! server slow (`pace`: artifacts a step at a time as the test allows; `before_answer`: every
//! other answer), ignore `Range`, and count the artifact bytes it served (`served`).
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub const TENANT: &str = "DEFAULT";
pub const CONTROLLER: &str = "dev-1";
pub const TOKEN: &str = "tok-4f1e9c0d2b7a4e55";

/// Header names (lower case) and values.
pub type Headers = Vec<(String, String)>;

#[derive(Default)]
pub struct State {
    /// The deployment document (raw, so tests can make it hostile) and its action id.
    pub deployment: Option<(String, Vec<u8>)>,
    pub sleep: String,
    pub artifacts: HashMap<String, Vec<u8>>,
    /// Answers given instead of the base resource, one per poll: (status, headers, body).
    pub queued: VecDeque<(u16, Headers, Vec<u8>)>,
    /// Every feedback document received, by action id.
    pub feedback: Vec<(String, serde_json::Value)>,
    /// Every request: method, path, headers.
    pub requests: Vec<(String, String, Headers)>,
    /// Ranges asked for on artifacts.
    pub ranges: Vec<String>,
    /// Cut each artifact answer after this many bytes (once per entry).
    pub cut_after: VecDeque<usize>,
    /// Feedback posts answered 503 before one is taken.
    pub fail_feedback: usize,
    /// A cancel action (its id, the action it stops), named by the base until answered.
    pub cancel: Option<(String, String)>,
    /// Feedback on cancel actions: (cancel id, document).
    pub cancel_feedback: Vec<(String, serde_json::Value)>,
    /// The base names `configData` until a `PUT` brings it.
    pub ask_config: bool,
    /// Every `configData` document received.
    pub config_data: Vec<serde_json::Value>,
    /// Artifact answers wait while this is set (a download in flight, for as long as a test
    /// needs to change the deployment under it).
    pub hold_artifacts: bool,
    /// An action waiting for consent: (id named by the link, its `confirmationBase`
    /// document, the deployment document it becomes once `confirmed`).
    pub confirm: Option<(String, Vec<u8>, Vec<u8>)>,
    /// Every confirmation feedback: (action id, document).
    pub confirm_feedback: Vec<(String, serde_json::Value)>,
    /// Artifact answers are written `PACE_STEP` bytes at a time, each step only once this
    /// says yes (given the byte of the file it starts at); a no closes the connection there.
    pub pace: Option<Pacer>,
    /// Called before every answer that is not an artifact (a slow server).
    pub before_answer: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Artifact bytes written to connections (bodies only).
    pub served: usize,
    /// Artifacts are always answered whole (`200`), `Range` or not.
    pub ignore_range: bool,
}

/// See [`State::pace`].
pub type Pacer = Arc<dyn Fn(usize) -> bool + Send + Sync>;

/// Bytes of one paced step.
pub const PACE_STEP: usize = 256 * 1024;

pub struct DdiServer {
    pub port: u16,
    pub state: Arc<Mutex<State>>,
}

impl DdiServer {
    pub fn start() -> DdiServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            sleep: "00:05:00".into(),
            ..State::default()
        }));
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, port, &st);
                });
            }
        });
        DdiServer { port, state }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Offers `chunks` (a JSON array) as action `id`.
    pub fn deploy(&self, id: &str, chunks: &str) {
        self.deploy_with(id, chunks, "forced", "forced", "available");
    }

    /// Offers `chunks` as action `id` with `deployment.download`, `deployment.update` and
    /// `deployment.maintenanceWindow` as given.
    pub fn deploy_with(&self, id: &str, chunks: &str, download: &str, update: &str, window: &str) {
        let doc = format!(
            r#"{{"id": "{id}", "deployment": {{"download": "{download}", "update": "{update}", "maintenanceWindow": "{window}", "chunks": {chunks}}}, "actionHistory": {{"status": "RUNNING", "messages": []}}}}"#
        );
        self.state.lock().unwrap().deployment = Some((id.to_string(), doc.into_bytes()));
    }

    /// Sends `chunks` as action `id` for confirmation (`confirmationBase`); `confirmed`
    /// turns it into a deployment, `denied` leaves it waiting (as hawkBit does). `doc_id`:
    /// the id the document says, which a hostile server makes differ from the link's.
    pub fn ask_consent(&self, id: &str, doc_id: &str, chunks: &str) {
        let conf = format!(
            r#"{{"id": "{doc_id}", "confirmation": {{"download": "forced", "update": "forced", "maintenanceWindow": "available", "chunks": {chunks}}}, "actionHistory": {{"status": "WAIT_FOR_CONFIRMATION", "messages": []}}}}"#
        );
        let dep = format!(
            r#"{{"id": "{id}", "deployment": {{"download": "forced", "update": "forced", "chunks": {chunks}}}, "actionHistory": {{"status": "RUNNING", "messages": []}}}}"#
        );
        self.state.lock().unwrap().confirm =
            Some((id.to_string(), conf.into_bytes(), dep.into_bytes()));
    }

    /// One chunk of `name` whose artifact is `body`, served at `/artifacts/{file}`.
    pub fn chunk(&self, name: &str, version: &str, body: &[u8]) -> String {
        let file = format!("{name}-{version}");
        self.state
            .lock()
            .unwrap()
            .artifacts
            .insert(file.clone(), body.to_vec());
        let href = format!("{}/artifacts/{file}", self.url());
        format!(
            r#"{{"part": "bApp", "version": "{version}", "name": "{name}", "artifacts": [{{"filename": "{file}", "size": {}, "hashes": {{"sha1": "0", "md5": "0", "sha256": "{}"}}, "_links": {{"download-http": {{"href": "{href}"}}, "download": {{"href": "{href}"}}}}}}]}}"#,
            body.len(),
            hex(&Sha256::digest(body))
        )
    }

    pub fn feedback(&self) -> Vec<(String, serde_json::Value)> {
        self.state.lock().unwrap().feedback.clone()
    }

    /// `execution/finished` of each feedback, for compact assertions.
    pub fn feedback_steps(&self) -> Vec<String> {
        self.steps_where(|_| true)
    }

    /// `execution/finished` of each feedback of action `id`.
    pub fn action_steps(&self, id: &str) -> Vec<String> {
        self.steps_where(|a| a == id)
    }

    fn steps_where(&self, of: impl Fn(&str) -> bool) -> Vec<String> {
        self.feedback()
            .iter()
            .filter(|(a, _)| of(a))
            .map(|(_, d)| {
                format!(
                    "{}/{}",
                    d["status"]["execution"].as_str().unwrap_or("?"),
                    d["status"]["result"]["finished"].as_str().unwrap_or("?")
                )
            })
            .collect()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn serve(mut conn: TcpStream, port: u16, st: &Mutex<State>) -> std::io::Result<()> {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if conn.read(&mut byte)? == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_string();
    let target = first.next().unwrap_or("").to_string();
    let path = target.split('?').next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let h = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = vec![
        0u8;
        h("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    ];
    conn.read_exact(&mut body)?;
    if !path.starts_with("/artifacts/") {
        let slow = st.lock().unwrap().before_answer.clone();
        if let Some(f) = slow {
            f();
        }
    }
    let mut s = st.lock().unwrap();
    s.requests
        .push((method.clone(), path.clone(), headers.clone()));
    let base = format!("/{TENANT}/controller/v1/{CONTROLLER}");
    let origin = format!("http://127.0.0.1:{port}");

    let authorized = h("authorization").as_deref() == Some(&format!("TargetToken {TOKEN}"));
    if let Some(file) = path.strip_prefix("/artifacts/") {
        if !authorized {
            return reply(&mut conn, 401, &[], b"");
        }
        let Some(bytes) = s.artifacts.get(file).cloned() else {
            return reply(&mut conn, 404, &[], b"");
        };
        let from = h("range")
            .and_then(|r| r.strip_prefix("bytes=").map(str::to_string))
            .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok())
            .filter(|_| !s.ignore_range);
        if let Some(r) = h("range") {
            s.ranges.push(r);
        }
        let cut = s.cut_after.pop_front();
        drop(s);
        while st.lock().unwrap().hold_artifacts {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let (status, part, extra) = match from {
            Some(n) if n < bytes.len() => (
                206,
                &bytes[n..],
                vec![(
                    "Content-Range".to_string(),
                    format!("bytes {n}-{}/{}", bytes.len() - 1, bytes.len()),
                )],
            ),
            _ => (200, &bytes[..], vec![]),
        };
        let mut extra = extra;
        extra.push(("ETag".into(), format!("\"{}\"", bytes.len())));
        let pace = st.lock().unwrap().pace.clone();
        let head = head_text(status, &extra, part.len());
        conn.write_all(head.as_bytes())?;
        let end = cut.map_or(part.len(), |n| n.min(part.len()));
        let start = bytes.len() - part.len();
        let step = if pace.is_some() {
            PACE_STEP
        } else {
            end.max(1)
        };
        let mut at = 0;
        while at < end {
            if pace.as_ref().is_some_and(|p| !p(start + at)) {
                return Ok(());
            }
            let n = step.min(end - at);
            conn.write_all(&part[at..at + n])?;
            st.lock().unwrap().served += n;
            at += n;
        }
        return conn.flush();
    }
    if !authorized {
        return reply(&mut conn, 401, &[], b"{\"message\": \"unauthorized\"}");
    }
    if path == base && method == "GET" {
        if let Some((status, hs, b)) = s.queued.pop_front() {
            return reply(&mut conn, status, &hs, &b);
        }
        let mut links = serde_json::Map::new();
        if s.ask_config {
            links.insert(
                "configData".into(),
                serde_json::json!({"href": format!("{origin}{base}/configData")}),
            );
        }
        if let Some((id, _)) = &s.cancel {
            links.insert(
                "cancelAction".into(),
                serde_json::json!({"href": format!("{origin}{base}/cancelAction/{id}")}),
            );
        }
        if let Some((id, doc, _)) = &s.confirm {
            let c = &hex(&Sha256::digest(doc))[..8];
            links.insert(
                "confirmationBase".into(),
                serde_json::json!({"href": format!("{origin}{base}/confirmationBase/{id}?c={c}")}),
            );
        }
        if let Some((id, doc)) = &s.deployment {
            // As hawkBit's `c`: a hash of the action's state, so a changed deployment (its
            // maintenance window, say) changes the base and its ETag.
            let c = &hex(&Sha256::digest(doc))[..8];
            links.insert(
                "deploymentBase".into(),
                serde_json::json!({"href": format!("{origin}{base}/deploymentBase/{id}?c={c}")}),
            );
        }
        let doc = serde_json::json!({"config": {"polling": {"sleep": s.sleep}}, "_links": links});
        let bytes = serde_json::to_vec(&doc).unwrap();
        let etag = format!("\"{}\"", &hex(&Sha256::digest(&bytes))[..16]);
        if h("if-none-match").as_deref() == Some(etag.as_str()) {
            return reply(&mut conn, 304, &[("ETag".into(), etag)], b"");
        }
        return reply(&mut conn, 200, &[("ETag".into(), etag)], &bytes);
    }
    if let Some(rest) = path.strip_prefix(&format!("{base}/cancelAction/")) {
        let Some((cid, stop)) = s.cancel.clone() else {
            return reply(&mut conn, 404, &[], b"");
        };
        if let Some(id) = rest.strip_suffix("/feedback") {
            let doc: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if doc["status"]["execution"] == "closed" {
                s.deployment = None;
            }
            s.cancel = None;
            s.cancel_feedback.push((id.to_string(), doc));
            return reply(&mut conn, 200, &[], b"");
        }
        if rest != cid {
            return reply(&mut conn, 404, &[], b"");
        }
        let doc = serde_json::json!({"id": cid, "cancelAction": {"stopId": stop}});
        return reply(&mut conn, 200, &[], doc.to_string().as_bytes());
    }
    if let Some(rest) = path.strip_prefix(&format!("{base}/confirmationBase/")) {
        let Some((cid, conf, dep)) = s.confirm.clone() else {
            return reply(&mut conn, 404, &[], b"");
        };
        if let Some(id) = rest.strip_suffix("/feedback") {
            if method != "POST" || id != cid {
                return reply(&mut conn, 404, &[], b"");
            }
            let doc: serde_json::Value = match serde_json::from_slice(&body) {
                Ok(d) => d,
                Err(_) => return reply(&mut conn, 400, &[], b""),
            };
            match doc["confirmation"].as_str() {
                Some("confirmed") => {
                    s.confirm = None;
                    s.deployment = Some((cid.clone(), dep));
                }
                Some("denied") => {}
                _ => return reply(&mut conn, 400, &[], b""),
            }
            s.confirm_feedback.push((id.to_string(), doc));
            return reply(&mut conn, 200, &[], b"");
        }
        if rest != cid {
            return reply(&mut conn, 404, &[], b"");
        }
        return reply(&mut conn, 200, &[], &conf);
    }
    if path == format!("{base}/configData") {
        if method != "PUT" {
            return reply(&mut conn, 405, &[], b"");
        }
        return match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(doc) if doc["data"].is_object() => {
                s.config_data.push(doc);
                s.ask_config = false;
                reply(&mut conn, 200, &[], b"")
            }
            _ => reply(&mut conn, 400, &[], b""),
        };
    }
    if let Some(rest) = path.strip_prefix(&format!("{base}/deploymentBase/")) {
        if let Some(id) = rest.strip_suffix("/feedback") {
            if method != "POST" {
                return reply(&mut conn, 405, &[], b"");
            }
            let doc: serde_json::Value = match serde_json::from_slice(&body) {
                Ok(d) => d,
                Err(_) => return reply(&mut conn, 400, &[], b""),
            };
            if s.fail_feedback > 0 {
                s.fail_feedback -= 1;
                return reply(&mut conn, 503, &[], b"");
            }
            let closed = doc["status"]["execution"] == "closed";
            s.feedback.push((id.to_string(), doc));
            if closed && s.deployment.as_ref().map(|(d, _)| d.as_str()) == Some(id) {
                s.deployment = None;
            }
            return reply(&mut conn, 200, &[], b"");
        }
        return match &s.deployment {
            Some((id, doc)) if id == rest => {
                let doc = doc.clone();
                reply(&mut conn, 200, &[], &doc)
            }
            _ => reply(&mut conn, 404, &[], b""),
        };
    }
    reply(&mut conn, 404, &[], b"")
}

fn head_text(status: u16, headers: &[(String, String)], len: usize) -> String {
    let mut t = format!("HTTP/1.1 {status} X\r\nContent-Length: {len}\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        t.push_str("Content-Type: application/hal+json\r\n");
    }
    for (k, v) in headers {
        t.push_str(&format!("{k}: {v}\r\n"));
    }
    t.push_str("\r\n");
    t
}

fn reply(
    conn: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let len = if status == 304 { 0 } else { body.len() };
    conn.write_all(head_text(status, headers, len).as_bytes())?;
    conn.write_all(body)?;
    conn.flush()
}
