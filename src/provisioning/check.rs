//! Internet check: a real HTTP GET of the check URL; any 2xx counts as online.
use std::time::Duration;

pub(crate) fn online(url: &str, timeout: Duration) -> bool {
    if url.is_empty() {
        return false;
    }
    // Through the one HTTP client: no redirect is followed (a hotel's login page answering
    // 302 is not the internet) and the body is never read.
    match crate::http::get(url, timeout.as_secs().max(1)).send() {
        Ok(r) => (200..300).contains(&r.status()),
        Err(e) => {
            crate::debug!("provisioning", "internet check {} failed: {}", url, e);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn serve_once(status: &'static str) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 1024];
            let _ = s.read(&mut b);
            let _ = write!(s, "HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\nok");
            // Keep-alive: the connection stays open until the client lets go of it.
            while matches!(s.read(&mut b), Ok(n) if n > 0) {}
        });
        format!("http://{addr}/check")
    }

    /// A `204` with no length and the connection kept open, as keep-alive servers answer.
    fn serve_204_kept_alive() -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 1024];
            let _ = s.read(&mut b);
            let _ = write!(s, "HTTP/1.1 204 No Content\r\n\r\n");
            // Hold the connection until the client lets go of it.
            while matches!(s.read(&mut b), Ok(n) if n > 0) {}
        });
        format!("http://{addr}/generate_204")
    }

    #[test]
    fn a_204_from_a_keep_alive_server_is_online() {
        assert!(online(&serve_204_kept_alive(), Duration::from_secs(5)));
    }

    #[test]
    fn real_get_on_loopback() {
        assert!(online(&serve_once("200 OK"), Duration::from_secs(5)));
        assert!(!online(
            &serve_once("503 Unavailable"),
            Duration::from_secs(5)
        ));
        // Nothing listening.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", l.local_addr().unwrap());
        drop(l);
        assert!(!online(&url, Duration::from_secs(2)));
        assert!(!online("", Duration::from_secs(1)));
    }
}
