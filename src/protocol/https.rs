//! The protocol over HTTPS, through the one HTTP client (`crate::http`). Credentials travel
//! in headers, never in a URL; TLS is always verified against the system store
//! (`SSL_CERT_FILE` honoured).
use super::{PollAnswer, PollOutcome, ProtocolError, Transport, MAX_ANSWER_BYTES};
use crate::credentials::Credentials;
use crate::http;
use serde_json::Value;

/// Seconds a request may take in all (connect, TLS, send, answer); `SVC_AGENT_HTTP_TIMEOUT_SECS`
/// overrides it (slow satellite links, tests).
const TIMEOUT_SECS: u64 = 30;

pub(crate) fn timeout_secs() -> u64 {
    std::env::var("SVC_AGENT_HTTP_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s: &u64| *s > 0)
        .unwrap_or(TIMEOUT_SECS)
}

#[derive(Clone)]
pub(crate) struct HttpsTransport {
    creds: Credentials,
    base: String,
    last_bytes: (u64, u64),
}

impl HttpsTransport {
    pub(crate) fn new(creds: Credentials) -> HttpsTransport {
        let base = creds.app_address.trim_end_matches('/').to_string();
        HttpsTransport {
            creds,
            base,
            last_bytes: (0, 0),
        }
    }

    /// A management request: the machine's identity on it, and by the one redirect policy
    /// for management requests none is followed (a 3xx is an answer, retried later;
    /// following it would resend the secret and the body to wherever it points).
    fn request(&self, path: &str, body: Vec<u8>) -> http::Request {
        self.request_within(path, body, timeout_secs())
    }

    fn request_within(&self, path: &str, body: Vec<u8>, secs: u64) -> http::Request {
        let identity = http::Identity {
            origin: http::origin_of(&self.base).to_string(),
            headers: self.creds.identity_headers(),
        };
        http::post(&format!("{}{}", self.base, path), body, secs)
            .header("Content-Type", "application/json")
            .identity(Some(identity))
    }
}

pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Status, headers and body of one answer.
pub(crate) struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Sends a request and reads at most `MAX_ANSWER_BYTES` of the answer.
fn exchange(req: http::Request) -> Result<Answer, ProtocolError> {
    exchange_capped(req, MAX_ANSWER_BYTES)
}

/// Sends a request and reads at most `cap` bytes of the answer (the hawkBit backend's
/// documents have a smaller cap than this protocol's answers).
pub(crate) fn exchange_capped(req: http::Request, cap: u64) -> Result<Answer, ProtocolError> {
    let resp = req.send().map_err(answer_error)?;
    let status = resp.status();
    let headers = resp.headers().to_vec();
    let body = resp.read_body(cap).map_err(answer_error)?;
    Ok(Answer {
        status,
        headers,
        body,
    })
}

fn answer_error(e: http::HttpError) -> ProtocolError {
    match e {
        http::HttpError::TooLarge(_) => ProtocolError::BadAnswer(e.to_string()),
        e => ProtocolError::Network(e.to_string()),
    }
}

pub(crate) fn http_error(status: u16, headers: &[(String, String)], body: &[u8]) -> ProtocolError {
    let retry_after_secs = header(headers, "retry-after").and_then(|v| v.trim().parse().ok());
    // A short, printable excerpt of the error body helps; a page of HTML does not.
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    ProtocolError::Http {
        status,
        retry_after_secs,
        body: text,
    }
}

impl HttpsTransport {
    /// One poll; with `hold_secs`, the app may hold it that long (RFC 7240 `Prefer: wait`),
    /// and the whole exchange may take the hold plus the usual deadline: a connection that
    /// went silent (a NAT or proxy that dropped it without a reset) ends then, and the
    /// next poll opens a new one. The flag: the app said it holds polls
    /// (`Preference-Applied: wait`).
    fn poll_with(
        &mut self,
        status: Option<&Value>,
        etag: Option<&str>,
        hold_secs: u64,
    ) -> Result<(PollOutcome, bool), ProtocolError> {
        let body = status
            .map(|s| serde_json::to_vec(s).unwrap_or_default())
            .unwrap_or_default();
        let sent = body.len() as u64;
        let mut req = self.request_within(
            "/api/v1/agent/poll",
            body,
            hold_secs.saturating_add(timeout_secs()),
        );
        if let Some(tag) = etag {
            req = req.header("If-None-Match", tag);
        }
        if hold_secs > 0 {
            // A held poll is quiet for up to the hold: a NAT that forgets it is found by
            // keepalive within minutes, not at the hold's end (docs/protocol.md).
            req = req.keepalive(http::KeepAlive::from_env());
        }
        // Every poll asks; `wait=0` (answer at once) lets an app that can hold say so.
        req = req.header("Prefer", format!("wait={hold_secs}"));
        if status.is_none() {
            // The status has not changed since the app last answered: not sent again.
            req = req.header("X-Svc-Status", "unchanged");
        }
        let a = exchange(req)?;
        let held = header(&a.headers, "preference-applied")
            .is_some_and(|v| v.split(',').any(|p| p.trim().starts_with("wait")));
        let header_bytes: u64 = a
            .headers
            .iter()
            .map(|(k, v)| (k.len() + v.len() + 4) as u64)
            .sum();
        self.last_bytes = (sent, a.body.len() as u64 + header_bytes);
        match a.status {
            304 => Ok((PollOutcome::NotModified, held)),
            200 => Ok((
                PollOutcome::Changed {
                    answer: Box::new(PollAnswer::parse(&a.body)?),
                    etag: header(&a.headers, "etag").map(str::to_string),
                },
                held,
            )),
            _ => Err(http_error(a.status, &a.headers, &a.body)),
        }
    }
}

impl Transport for HttpsTransport {
    fn poll(&mut self, status: &Value, etag: Option<&str>) -> Result<PollOutcome, ProtocolError> {
        self.poll_with(Some(status), etag, 0).map(|(o, _)| o)
    }

    fn poll_held(
        &mut self,
        status: Option<&Value>,
        etag: Option<&str>,
        hold_secs: u64,
    ) -> Result<(PollOutcome, bool), ProtocolError> {
        self.poll_with(status, etag, hold_secs)
    }

    fn detach(&self) -> Option<Box<dyn Transport>> {
        Some(Box::new(self.clone()))
    }

    fn send_logs(&mut self, batch: &[u8]) -> Result<(), ProtocolError> {
        let a = exchange(self.request("/api/v1/agent/logs", batch.to_vec()))?;
        if (200..300).contains(&a.status) {
            Ok(())
        } else {
            Err(http_error(a.status, &a.headers, &a.body))
        }
    }

    fn resolve_url(&self, url: &str) -> String {
        if url.contains("://") {
            url.to_string()
        } else {
            format!("{}/{}", self.base, url.trim_start_matches('/'))
        }
    }

    fn last_poll_bytes(&self) -> (u64, u64) {
        self.last_bytes
    }
}
