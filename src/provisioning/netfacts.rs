//! Network facts for the service: whether the machine is online (the probe the state
//! machine asks each tick: check URL, NetworkManager's connectivity, a default route in
//! /proc, the daemon's last poll) and which Wi-Fi networks are visible (nmcli's scan).
use super::defaults::Settings;
use super::nm;
use super::portal_http::Visible;
use super::state::{NmConnectivity, Observed};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The online probe the driver calls each tick (a stand-in in tests).
pub(crate) type Probe = Box<dyn FnMut(&Settings) -> bool>;

/// Whether the machine is online, for the state machine (`state::is_online` decides; this
/// gathers what it needs): the check URL if one is configured, NetworkManager's connectivity,
/// a default route, and whether the daemon's last poll reached the app.
pub(crate) fn online_probe(
    app_reachable: Option<Arc<AtomicBool>>,
    nmcli: std::path::PathBuf,
) -> Probe {
    Box::new(move |s: &Settings| {
        let check_url = (!s.check_url.is_empty())
            .then(|| super::check::online(&s.check_url, Duration::from_secs(10)));
        let app = app_reachable
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst));
        if check_url.is_none() && app {
            // Online whatever NetworkManager says (`is_online`): no nmcli every tick while
            // the app answers, which is nearly always.
            return true;
        }
        let nm = nm::nmcli(
            &nmcli,
            &["-t", "networking", "connectivity"],
            nm::NMCLI_QUERY,
        )
        .ok()
        .filter(|o| o.success())
        .map(|o| NmConnectivity::parse(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or(NmConnectivity::Unknown);
        super::state::is_online(&Observed {
            check_url,
            nm,
            default_route: has_default_route(),
            app_reachable: app,
        })
    })
}

/// A default route in the kernel's tables (`/proc/net/route`, `/proc/net/ipv6_route`).
fn has_default_route() -> bool {
    let v4 = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    let v6 = std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default();
    default_route_in(&v4, &v6)
}

/// IPv4: destination and mask 00000000; IPv6: destination ::/0 (not the loopback
/// interface, which carries the unreachable default of an empty table).
fn default_route_in(v4: &str, v6: &str) -> bool {
    let four = v4.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 7 && f[1] == "00000000" && f[7] == "00000000"
    });
    let six = v6.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 9 && f[0].bytes().all(|b| b == b'0') && f[1] == "00" && f[9] != "lo"
    });
    four || six
}

/// Visible networks, from `nmcli -t -f SSID,SIGNAL dev wifi list` (terse: `:` separates,
/// `\:` and `\\` escape). Strongest first, one entry per SSID, hidden networks left out.
pub(crate) fn parse_scan(out: &str) -> Vec<Visible> {
    let mut v: Vec<Visible> = Vec::new();
    for line in out.lines() {
        let mut fields = vec![String::new()];
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            let ch = match c {
                '\\' => chars.next(),
                ':' => {
                    fields.push(String::new());
                    None
                }
                c => Some(c),
            };
            if let (Some(ch), Some(f)) = (ch, fields.last_mut()) {
                f.push(ch);
            }
        }
        if fields.len() != 2 || fields[0].is_empty() {
            continue;
        }
        let signal = fields[1].trim().parse::<u8>().unwrap_or(0).min(100);
        match v.iter_mut().find(|n| n.ssid == fields[0]) {
            Some(n) => n.signal = n.signal.max(signal),
            None => v.push(Visible {
                ssid: fields[0].clone(),
                signal,
            }),
        }
    }
    v.sort_by_key(|n| std::cmp::Reverse(n.signal));
    v
}

/// `rescan`: `yes` forces a scan now; `no` takes NetworkManager's list as it is.
pub(super) fn scan(rescan: &str) -> Vec<Visible> {
    let out = nm::nmcli(
        std::path::Path::new("nmcli"),
        &[
            "-t",
            "-f",
            "SSID,SIGNAL",
            "dev",
            "wifi",
            "list",
            "--rescan",
            rescan,
        ],
        nm::NMCLI_SCAN,
    );
    match out {
        Ok(o) if o.success() => parse_scan(&String::from_utf8_lossy(&o.stdout)),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_routes_are_read_from_the_kernel_tables() {
        let v4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n\
                  wlan0\t00000000\t0100A8C0\t0003\t0\t0\t600\t00000000\n";
        assert!(default_route_in(v4, ""));
        let lan_only = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n\
                        wlan0\t0000A8C0\t00000000\t0001\t0\t0\t600\t00FFFFFF\n";
        assert!(!default_route_in(lan_only, ""));
        let lo6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert!(!default_route_in("", lo6));
        let wl6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003    wlan0\n";
        assert!(default_route_in("", wl6));
    }

    #[test]
    fn scan_output_is_parsed_with_escapes_and_deduplicated() {
        let out = "home\\:5G:80\ncafe:35\n:90\nhome\\:5G:60\nback\\\\slash:101\n";
        let v = parse_scan(out);
        assert_eq!(
            v,
            vec![
                Visible {
                    ssid: "back\\slash".into(),
                    signal: 100
                },
                Visible {
                    ssid: "home:5G".into(),
                    signal: 80
                },
                Visible {
                    ssid: "cafe".into(),
                    signal: 35
                },
            ]
        );
    }
}
