//! The protocol against an ordinary HTTP/1.1 server that keeps connections alive (Python's
//! http.server with protocol_version "HTTP/1.1", as nginx and Go do): a `304` to a poll and
//! a `204` to a log batch carry no body and no `Connection: close`, and must not be read to
//! EOF (which waited for the request timeout and counted the poll as a network failure).
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use svc::credentials::Credentials;
use svc::protocol::PollOutcome;

const SERVER: &str = r#"
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/api/v1/agent/poll":
            if self.headers.get("If-None-Match") == '"v1"':
                self.send_response(304)
                self.send_header("ETag", '"v1"')
                self.end_headers()
                return
            body = b'{"config": {"components": [], "modules": [], "agent": {}}}'
            self.send_response(200)
            self.send_header("ETag", '"v1"')
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(204)
            self.end_headers()
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start() -> (Server, u16) {
    let mut child = Command::new("python3")
        .args(["-c", SERVER])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (installed on every machine of this kind)");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().expect("the server printed its port");
    (Server(child), port)
}

#[test]
fn a_304_and_a_204_on_a_kept_alive_connection_are_answers_not_timeouts() {
    let (_server, port) = start();
    exchange(&format!("http://127.0.0.1:{port}"));
}

/// The same over HTTPS with Debian's nginx in front of Python's server (nginx keeps the
/// agent's connection alive, and sends 304 and 204 with neither a length nor a close).
#[test]
#[ignore = "needs nginx (scripts/test-cargo.sh installs it and runs this)"]
fn a_304_and_a_204_through_nginx_are_answers_not_timeouts() {
    use crate::common::{nginx, testca};
    let ca = testca::test_ca();
    let (_server, port) = start();
    let dir = std::env::temp_dir().join(format!("svc-keepalive-nginx-{}", std::process::id()));
    let front = nginx::Nginx::start(&dir, &ca.cert_file, &ca.key_file, port);
    exchange(&front.url);
    drop(front);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One changed poll, three unchanged ones and three log batches against `app_address`;
/// each must be answered without waiting for the request timeout.
fn exchange(app_address: &str) {
    let creds = Credentials::parse(
        format!(
            r#"{{"cloud": {{"app_address": "{app_address}", "id": "p1", "secret": "keepalive-secret"}}}}"#
        )
        .as_bytes(),
    )
    .unwrap();
    let mut t = svc::protocol::connect(&creds).unwrap();
    let status = serde_json::json!({"agent": {}});
    match t.poll(&status, None).unwrap() {
        PollOutcome::Changed { etag, .. } => assert_eq!(etag.as_deref(), Some("\"v1\"")),
        other => panic!("first poll: {other:?}"),
    }
    for i in 0..3 {
        match t.poll(&status, Some("\"v1\"")) {
            Ok(PollOutcome::NotModified) => {}
            other => panic!("unchanged poll {i}: {other:?}"),
        }
    }
    for i in 0..3 {
        t.send_logs(br#"[{"message": "x"}]"#)
            .unwrap_or_else(|e| panic!("log batch {i} answered 204: {e}"));
    }
}
