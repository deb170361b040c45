//! A client of wpa_supplicant's control interface: text commands over a unix datagram
//! socket (`/run/wpa_supplicant/<ifname>`). The reply goes to the sender's address, so the
//! client binds one of its own, in the abstract namespace (nothing left behind in /tmp).
//! Unsolicited events (`<N>TEXT`, after `ATTACH`) are queued, at most `MAX_QUEUED`.
use std::collections::VecDeque;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// wpa_supplicant's replies and events fit in 4 KiB (`CTRL_IFACE_MAX_LEN` is 8 KiB for a
/// command); a longer datagram is cut here and still parsed as text.
const MAX_DATAGRAM: usize = 8192;
/// Events not read yet; the oldest are dropped beyond this.
const MAX_QUEUED: usize = 64;

pub(crate) struct Ctrl {
    sock: UnixDatagram,
    events: VecDeque<String>,
}

impl Ctrl {
    /// Connects to the control socket at `path` (an interface's or the global one).
    pub(crate) fn open(path: &Path) -> io::Result<Ctrl> {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "svc-agent-wpa-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let sock = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)?;
        sock.connect(path)?;
        Ok(Ctrl {
            sock,
            events: VecDeque::new(),
        })
    }

    /// Sends one command and returns its reply (events arriving meanwhile are queued).
    pub(crate) fn request(&mut self, cmd: &str, timeout: Duration) -> io::Result<String> {
        self.sock.send(cmd.as_bytes())?;
        let deadline = Instant::now() + timeout;
        loop {
            let msg = self.recv_until(deadline)?.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("wpa_supplicant did not answer {}", command_name(cmd)),
                )
            })?;
            match event_text(&msg) {
                Some(ev) => self.queue(ev.to_string()),
                None => return Ok(msg),
            }
        }
    }

    /// The next event (its text without the `<N>` level), waiting at most `timeout`.
    pub(crate) fn event(&mut self, timeout: Duration) -> io::Result<Option<String>> {
        if let Some(e) = self.events.pop_front() {
            return Ok(Some(e));
        }
        let deadline = Instant::now() + timeout;
        while let Some(msg) = self.recv_until(deadline)? {
            if let Some(ev) = event_text(&msg) {
                return Ok(Some(ev.to_string()));
            }
            // A late reply to a command that timed out: not an event.
        }
        Ok(None)
    }

    fn queue(&mut self, ev: String) {
        if self.events.len() >= MAX_QUEUED {
            self.events.pop_front();
        }
        self.events.push_back(ev);
    }

    fn recv_until(&mut self, deadline: Instant) -> io::Result<Option<String>> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        self.sock.set_read_timeout(Some(left))?;
        let mut buf = vec![0u8; MAX_DATAGRAM];
        match self.sock.recv(&mut buf) {
            Ok(n) => Ok(Some(String::from_utf8_lossy(&buf[..n]).into_owned())),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// The command's first word: what errors may name (arguments can carry a key).
pub(crate) fn command_name(cmd: &str) -> &str {
    cmd.split_whitespace().next().unwrap_or("")
}

/// `<3>DPP-CONF-RECEIVED` → `DPP-CONF-RECEIVED`; `None` for a reply.
fn event_text(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix('<')?;
    let end = rest.find('>')?;
    rest[..end]
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| rest[end + 1..].trim_end_matches('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_told_from_replies() {
        assert_eq!(
            event_text("<3>DPP-CONF-RECEIVED"),
            Some("DPP-CONF-RECEIVED")
        );
        assert_eq!(event_text("OK\n"), None);
        assert_eq!(event_text("<x>y"), None);
        assert_eq!(
            command_name("DPP_BOOTSTRAP_GEN key=00"),
            "DPP_BOOTSTRAP_GEN"
        );
    }

    #[test]
    fn replies_come_back_and_events_in_between_are_kept() {
        let dir = std::env::temp_dir().join(format!("svc-wpactrl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("wlan0");
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        let t = std::thread::spawn(move || {
            let mut b = [0u8; 256];
            let (n, from) = server.recv_from(&mut b).unwrap();
            assert_eq!(&b[..n], b"PING");
            server.send_to_addr(b"<3>CTRL-EVENT-X a", &from).unwrap();
            server.send_to_addr(b"PONG\n", &from).unwrap();
        });
        let mut c = Ctrl::open(&path).unwrap();
        assert_eq!(
            c.request("PING", Duration::from_secs(20)).unwrap(),
            "PONG\n"
        );
        assert_eq!(
            c.event(Duration::from_secs(1)).unwrap().as_deref(),
            Some("CTRL-EVENT-X a")
        );
        t.join().unwrap();
        // Nobody answers any more: a timeout naming the command, not a hang.
        let e = c.request("DPP_LISTEN 2412", Duration::from_millis(200));
        assert!(e.is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
