//! Another service holding the ports the hotspot needs (comitup #84: a DNS server or a
//! dnsmasq on port 53, or a DHCP server on port 67, and NetworkManager's shared-mode
//! dnsmasq cannot start: phones get no address and no name, the portal looks dead and
//! nothing says why). Read from the kernel's socket tables (`/proc/net/{udp,tcp}{,6}`) and
//! each process's open sockets (`/proc/<pid>/fd`), so the culprit is named with its pid.
use std::collections::HashMap;

/// A socket bound to a port the hotspot needs, on an address the hotspot's would collide
/// with (any address, or the hotspot's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bound {
    pub proto: &'static str,
    pub port: u16,
    pub inode: u64,
}

/// A process, as far as the report needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    pub pid: u32,
    pub name: String,
    pub cmdline: String,
}

impl Holder {
    /// NetworkManager's own dnsmasq for a shared connection (its pid file is
    /// `/run/nm-dnsmasq-<ifname>.pid`).
    fn is_networkmanagers(&self) -> bool {
        self.cmdline.contains("/nm-dnsmasq-")
    }
}

/// 10.42.0.1 as `/proc/net/udp` writes it (the address's bytes in host order, x86 and arm:
/// little endian).
fn hotspot_addr_hex() -> String {
    let ip: std::net::Ipv4Addr = super::dns::HOTSPOT_ADDR
        .parse()
        .unwrap_or(std::net::Ipv4Addr::new(10, 42, 0, 1));
    format!("{:08X}", u32::from_ne_bytes(ip.octets()))
}

/// Sockets of one `/proc/net/<proto>` table on port 53 (DNS) or 67 (DHCP, UDP only) whose
/// local address is any address or the hotspot's. TCP: listening sockets only.
pub(crate) fn parse_table(text: &str, proto: &'static str) -> Vec<Bound> {
    let ours = hotspot_addr_hex();
    let tcp = proto.starts_with("tcp");
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (addr, port) = f.get(1)?.split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let state = f.get(3)?;
            let inode = f.get(9)?.parse::<u64>().ok()?;
            let wanted = port == 53 || (port == 67 && !tcp);
            let any = addr.bytes().all(|b| b == b'0');
            let listening = !tcp || *state == "0A";
            (wanted && listening && (any || addr == ours)).then_some(Bound { proto, port, inode })
        })
        .collect()
}

/// What stands in the hotspot's way, one sentence each: a port held by a process other than
/// NetworkManager's dnsmasq, and (`hotspot_up`) NetworkManager's dnsmasq not running at all.
pub(crate) fn problems(
    bound: &[Bound],
    owners: &HashMap<u64, Holder>,
    nm_dnsmasq_running: bool,
    hotspot_up: bool,
) -> Vec<String> {
    // One sentence per port and process, naming the socket kinds it holds (a DNS server
    // holds udp, udp6, tcp and tcp6 at once).
    let mut held: Vec<(u16, String, Vec<&str>)> = Vec::new();
    for b in bound {
        let who = match owners.get(&b.inode) {
            Some(h) if h.is_networkmanagers() => continue,
            // Never its command line: another program's arguments may hold its secrets.
            Some(h) => format!("{} (pid {})", h.name, h.pid),
            None => "a process this service cannot see".to_string(),
        };
        match held.iter_mut().find(|(p, w, _)| *p == b.port && *w == who) {
            Some((_, _, protos)) => {
                if !protos.contains(&b.proto) {
                    protos.push(b.proto);
                }
            }
            None => held.push((b.port, who, vec![b.proto])),
        }
    }
    let mut out: Vec<String> = held
        .into_iter()
        .map(|(port, who, protos)| {
            let (what, lost) = if port == 53 {
                ("DNS", "names resolved to the portal")
            } else {
                ("DHCP", "address")
            };
            format!(
                "port {port} ({what}: {}) is held by {who}: NetworkManager's dnsmasq cannot serve the hotspot, phones get no {lost}",
                protos.join(", ")
            )
        })
        .collect();
    if hotspot_up && !nm_dnsmasq_running {
        out.push(
            "NetworkManager's dnsmasq (DHCP and DNS of the hotspot) is not running: phones get no address".into(),
        );
    }
    out
}

/// At most this many processes and open files per process are looked at.
const MAX_PROCS: usize = 8192;
const MAX_FDS: usize = 4096;

/// The machine's conflicts now (`hotspot_up`: whether the hotspot should be serving).
pub(crate) fn check(hotspot_up: bool) -> Vec<String> {
    let mut bound = Vec::new();
    for proto in ["udp", "udp6", "tcp", "tcp6"] {
        if let Ok(t) = std::fs::read_to_string(format!("/proc/net/{proto}")) {
            bound.extend(parse_table(&t, proto));
        }
    }
    let mut owners = HashMap::new();
    let mut nm_dnsmasq = false;
    let procs = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    for e in procs.take(MAX_PROCS) {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline"))
            .map(|b| {
                let b = &b[..b.len().min(512)];
                String::from_utf8_lossy(b)
                    .replace('\0', " ")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        let name = std::fs::read_to_string(e.path().join("comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let holder = Holder { pid, name, cmdline };
        nm_dnsmasq |= holder.is_networkmanagers();
        if bound.is_empty() {
            continue;
        }
        let fds = std::fs::read_dir(e.path().join("fd")).into_iter().flatten();
        for fd in fds.flatten().take(MAX_FDS) {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            let inode = t
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(i) = inode.filter(|i| bound.iter().any(|b| b.inode == *i)) {
                owners.insert(i, holder.clone());
            }
        }
    }
    problems(&bound, &owners, nm_dnsmasq, hotspot_up)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UDP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  1: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1111 2 0000000000000000 0
  2: 3500007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000   101        0 2222 2 0000000000000000 0
  3: 01002A0A:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 3333 2 0000000000000000 0
  4: 00000000:0043 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4444 2 0000000000000000 0
  5: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 5555 2 0000000000000000 0
";
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
  0: 00000000:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6666 1 0000000000000000 100 0 0 10 0
  1: 01002A0A:0035 0100A8C0:D431 01 00000000:00000000 00:00000000 00000000     0        0 7777 1 0000000000000000 100 0 0 10 0
";

    fn holder(pid: u32, name: &str, cmdline: &str) -> Holder {
        Holder {
            pid,
            name: name.into(),
            cmdline: cmdline.into(),
        }
    }

    #[test]
    fn ports_53_and_67_on_any_or_the_hotspot_address_are_found() {
        let u = parse_table(UDP, "udp");
        let inodes: Vec<u64> = u.iter().map(|b| b.inode).collect();
        // systemd-resolved's 127.0.0.53:53 and a DHCP client's :68 are no conflict.
        assert_eq!(inodes, vec![1111, 3333, 4444]);
        let t = parse_table(TCP, "tcp");
        // Only the listening socket; an established connection is no server.
        assert_eq!(t.iter().map(|b| b.inode).collect::<Vec<_>>(), vec![6666]);
    }

    #[test]
    fn a_foreign_dns_server_is_named_and_networkmanagers_dnsmasq_is_not() {
        let bound = parse_table(UDP, "udp");
        let mut owners = HashMap::new();
        owners.insert(
            1111,
            holder(812, "dnsmasq", "dnsmasq --conf-file=/dev/null"),
        );
        let nm =
            "/usr/sbin/dnsmasq --listen-address=10.42.0.1 --pid-file=/run/nm-dnsmasq-wlan0.pid";
        owners.insert(3333, holder(900, "dnsmasq", nm));
        owners.insert(4444, holder(900, "dnsmasq", nm));
        let p = problems(&bound, &owners, true, true);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("port 53 (DNS: udp) is held by dnsmasq (pid 812)"),
            "{p:?}"
        );
        assert!(
            !p[0].contains("conf-file"),
            "no command line in the report: {p:?}"
        );
        // The same process on several kinds of socket: one sentence.
        let mut both = bound.clone();
        both.extend(parse_table(TCP, "tcp"));
        owners.insert(
            6666,
            holder(812, "dnsmasq", "dnsmasq --conf-file=/dev/null"),
        );
        let p = problems(&both, &owners, true, true);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("port 53 (DNS: udp, tcp) is held by dnsmasq (pid 812)"),
            "{p:?}"
        );
        owners.remove(&6666);
        // Only NetworkManager's own: nothing to report.
        owners.insert(1111, holder(900, "dnsmasq", nm));
        assert!(problems(&bound, &owners, true, true).is_empty());
        // NetworkManager's dnsmasq gone while the hotspot is up: said too.
        let p = problems(&[], &HashMap::new(), false, true);
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("not running"), "{p:?}");
        assert!(problems(&[], &HashMap::new(), false, false).is_empty());
    }
}
