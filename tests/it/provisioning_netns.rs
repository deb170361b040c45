//! The portal answers the hotspot side only, proven with real network namespaces: a
//! "device" namespace with the hotspot address 10.42.0.1/24 on one veth and a wired LAN on
//! another, a "phone" on the hotspot side and a LAN neighbour that routes 10.42.0.0/24 via
//! the device. Linux accepts traffic for a local address on any interface, so without the
//! portal binding to its interface the neighbour reached `/api/status` (and with it the
//! token for `/api/credentials`) without the hotspot password (issue 15).
//!
//! The device side is this test binary run again inside the device namespace
//! (`ip netns exec`), serving until its stdin closes. Needs root and `ip`/`curl`; skipped
//! (with a message) elsewhere, a failure under CI.
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use svc::paths::Paths;
use svc::provisioning::portal::NetworkInput;
use svc::provisioning::portal_http::{Portal, PortalActions, Visible};

const ROLE: &str = "SVC_TEST_NETNS_DEVICE";

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<Vec<NetworkInput>>>);

impl PortalActions for Fake {
    fn networks(&mut self) -> Vec<Visible> {
        Vec::new()
    }
    fn connect(
        &mut self,
        net: NetworkInput,
    ) -> Result<(), svc::provisioning::portal::NetworkRefused> {
        self.0.lock().unwrap().push(net);
        Ok(())
    }
    fn status(&mut self) -> Vec<(String, String)> {
        vec![("hotspot".into(), "up".into())]
    }
}

/// The device side, a process of its own in the device's namespace.
#[test]
#[ignore = "child process of a_lan_neighbour_routing_to_the_hotspot_address_gets_nothing"]
fn device_side() {
    let dir = std::env::var(ROLE).expect("run by the test below, with its directory");
    let mut portal = Portal::start(
        "10.42.0.1:80".parse().unwrap(),
        Paths::new(&dir),
        Box::new(Fake::default()),
    )
    .unwrap();
    println!("READY");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    portal.stop();
}

fn sh(args: &[&str]) {
    let st = Command::new(args[0]).args(&args[1..]).status().unwrap();
    assert!(st.success(), "{args:?}");
}

/// Namespaces removed however the test ends.
struct Netns(Vec<String>);
impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// `curl` from inside `ns`: (exit code, what it printed).
fn curl_from(ns: &str, url: &str) -> (i32, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "curl", "-sS", "-m", "10", url])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn usable() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let tools = ["ip", "curl"].iter().all(|t| {
        Command::new(t)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    });
    root && tools
}

#[test]
#[ignore = "needs root, ip and curl: network namespaces (scripts/test-cargo.sh runs this)"]
fn a_lan_neighbour_routing_to_the_hotspot_address_gets_nothing() {
    assert!(usable(), "needs root, ip and curl (network namespaces)");
    let id = std::process::id() % 100_000;
    let (dev, hot, lan) = (
        format!("svc{id}d"),
        format!("svc{id}h"),
        format!("svc{id}l"),
    );
    let _guard = Netns(vec![dev.clone(), hot.clone(), lan.clone()]);
    for n in [&dev, &hot, &lan] {
        sh(&["ip", "netns", "add", n]);
        sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
    }
    // Hotspot side: device ap0 10.42.0.1/24 <-> phone ph0 10.42.0.2/24.
    sh(&[
        "ip", "-n", &dev, "link", "add", "ap0", "type", "veth", "peer", "name", "ph0", "netns",
        &hot,
    ]);
    // Wired side: device eth0 192.168.77.1/24 <-> neighbour nb0 192.168.77.2/24.
    sh(&[
        "ip", "-n", &dev, "link", "add", "eth0", "type", "veth", "peer", "name", "nb0", "netns",
        &lan,
    ]);
    for (ns, ifname, addr) in [
        (&dev, "ap0", "10.42.0.1/24"),
        (&hot, "ph0", "10.42.0.2/24"),
        (&dev, "eth0", "192.168.77.1/24"),
        (&lan, "nb0", "192.168.77.2/24"),
    ] {
        sh(&["ip", "-n", ns, "addr", "add", addr, "dev", ifname]);
        sh(&["ip", "-n", ns, "link", "set", ifname, "up"]);
    }
    sh(&[
        "ip",
        "-n",
        &lan,
        "route",
        "add",
        "10.42.0.0/24",
        "via",
        "192.168.77.1",
    ]);

    let dir = std::env::temp_dir().join(format!("svc-netns-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut device = Command::new("ip")
        .args(["netns", "exec", &dev])
        .arg(&exe)
        .args([
            "provisioning_netns::device_side",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(device.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.map(|l| l.contains("READY")).unwrap_or(false)),
        "the device side did not start"
    );

    // The phone on the hotspot is served.
    let (code, body) = curl_from(&hot, "http://10.42.0.1/api/status");
    assert_eq!(code, 0, "phone: {body}");
    assert!(body.contains("\"token\""), "phone: {body}");
    // The neighbour on the wired side gets no answer at all (not the token, not a page).
    let (code, body) = curl_from(&lan, "http://10.42.0.1/api/status");
    assert_ne!(code, 0, "neighbour was answered: {body}");
    assert!(!body.contains("token"), "neighbour: {body}");

    drop(device.stdin.take());
    // Read on until it exits, so that its last lines never meet a closed pipe.
    for _ in lines {}
    let _ = device.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
