//! The protocol over HTTPS with minreq + rustls. Credentials travel in headers, never in a
//! URL; TLS is always verified against the system store (`SSL_CERT_FILE` honoured).
use super::{PollAnswer, PollOutcome, ProtocolError, Transport, MAX_ANSWER_BYTES};
use crate::credentials::Credentials;
use serde_json::Value;
use std::io::Read;

/// Seconds a request may take in all (connect, TLS, send, answer); `SVC_AGENT_HTTP_TIMEOUT_SECS`
/// overrides it (slow satellite links, tests).
const TIMEOUT_SECS: u64 = 30;

fn timeout_secs() -> u64 {
    std::env::var("SVC_AGENT_HTTP_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s: &u64| *s > 0)
        .unwrap_or(TIMEOUT_SECS)
}

pub struct HttpsTransport {
    creds: Credentials,
    base: String,
    last_bytes: (u64, u64),
}

impl HttpsTransport {
    pub fn new(creds: Credentials) -> HttpsTransport {
        let base = creds.app_address.trim_end_matches('/').to_string();
        HttpsTransport {
            creds,
            base,
            last_bytes: (0, 0),
        }
    }

    fn request(&self, path: &str, body: Vec<u8>) -> minreq::Request {
        let req = minreq::post(format!("{}{}", self.base, path));
        self.creds
            .identity_headers()
            .into_iter()
            .fold(req, |r, (k, v)| r.with_header(k, v))
            .with_header("Content-Type", "application/json")
            .with_header("User-Agent", concat!("svc-agent/", env!("SVC_VERSION")))
            .with_timeout(timeout_secs())
            // The one redirect policy for management requests: none is followed. A 3xx is an
            // answer (an error, retried later); following it would resend the secret and the
            // body to wherever the Location points, plain http included.
            .with_follow_redirects(false)
            .with_max_headers_size(64 * 1024)
            .with_max_status_line_length(1024)
            .with_body(body)
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn network_error(e: minreq::Error) -> ProtocolError {
    let text = e.to_string();
    let hint = if text.contains("NotValidYet") || text.contains("Expired") {
        clock_hint()
    } else {
        String::new()
    };
    ProtocolError::Network(format!("{text}{hint}"))
}

/// A board without a battery-backed clock boots in 1970, and every certificate then looks
/// invalid: say so rather than blame TLS.
fn clock_hint() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let built: u64 = env!("SVC_BUILD_EPOCH").parse().unwrap_or(0);
    if now < built {
        " (the system clock is before this agent's build date: waiting for time sync would fix this)".into()
    } else {
        String::new()
    }
}

/// Status, headers and body of one answer.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Sends a request and reads at most `MAX_ANSWER_BYTES` of the answer.
fn exchange(req: minreq::Request) -> Result<Answer, ProtocolError> {
    let resp = req.send_lazy().map_err(network_error)?;
    let status = resp.status_code;
    let headers = resp.headers.clone();
    let mut body = Vec::new();
    if bodiless(status) {
        // No body follows (RFC 9110 §6.4.1), and a keep-alive server does not close the
        // connection: reading to EOF would wait for the request timeout.
        return Ok(Answer {
            status,
            headers,
            body,
        });
    }
    resp.take(MAX_ANSWER_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|e| ProtocolError::Network(format!("reading the answer: {e}")))?;
    if body.len() as u64 > MAX_ANSWER_BYTES {
        return Err(ProtocolError::BadAnswer(format!(
            "the answer is larger than {MAX_ANSWER_BYTES} bytes"
        )));
    }
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// Statuses whose answers never carry a body: 1xx, 204 No Content, 304 Not Modified.
fn bodiless(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

fn http_error(status: u16, headers: &[(String, String)], body: &[u8]) -> ProtocolError {
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

impl Transport for HttpsTransport {
    fn poll(&mut self, status: &Value, etag: Option<&str>) -> Result<PollOutcome, ProtocolError> {
        let body = serde_json::to_vec(status).unwrap_or_default();
        let sent = body.len() as u64;
        let mut req = self.request("/api/v1/agent/poll", body);
        if let Some(tag) = etag {
            req = req.with_header("If-None-Match", tag);
        }
        let a = exchange(req)?;
        let header_bytes: u64 = a
            .headers
            .iter()
            .map(|(k, v)| (k.len() + v.len() + 4) as u64)
            .sum();
        self.last_bytes = (sent, a.body.len() as u64 + header_bytes);
        match a.status {
            304 => Ok(PollOutcome::NotModified),
            200 => Ok(PollOutcome::Changed {
                answer: Box::new(PollAnswer::parse(&a.body)?),
                etag: header(&a.headers, "etag").map(str::to_string),
            }),
            _ => Err(http_error(a.status, &a.headers, &a.body)),
        }
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
