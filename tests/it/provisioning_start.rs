//! #39: agent-provisioning started only after the first-contact wait (up to 60 s), so a
//! Wi-Fi-only machine whose networks are only in the manufacturer defaults sat that long
//! before it tried them (29-47 s in the lab). It starts before the wait now, from the config
//! the agent has (cached or none), and a config first contact brings reaches it as any
//! config change does. NetworkManager is a stand-in `nmcli` on PATH that logs its calls.
use crate::common::sandbox::*;
use std::os::unix::fs::PermissionsExt;

/// A stand-in nmcli: one Wi-Fi device, nothing connected, no connectivity; every call
/// appended to `nmcli.calls` as one line.
fn stand_in_nmcli(sb: &Sandbox) {
    let bin = sb.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        r#"#!/bin/sh
echo "$*" >> '{}'
case "$*" in
"-t -f TYPE dev") echo wifi ;;
"-t -f TYPE,STATE,CONNECTION dev") echo 'wifi:disconnected:' ;;
"-t networking connectivity") echo none ;;
esac
exit 0
"#,
        sb.root.join("nmcli.calls").display()
    );
    std::fs::write(bin.join("nmcli"), script).unwrap();
    std::fs::set_permissions(bin.join("nmcli"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The complete lines the stand-in has logged.
fn nmcli_calls(sb: &Sandbox) -> Vec<String> {
    let text = std::fs::read_to_string(sb.root.join("nmcli.calls")).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete.lines().map(str::to_string).collect()
}

#[test]
fn provisioning_tries_the_factory_networks_during_the_first_contact_wait() {
    let sb = Sandbox::new("prov-first-contact");
    sb.install_fake_server();
    // An app that refuses every connection: first contact never comes.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    sb.write_credentials(&format!("https://127.0.0.1:{port}"));
    std::fs::write(
        sb.root.join("etc/svc-defaults.json"),
        r#"{"hotspot_prefix": "svc-test", "hotspot_password": "per-device-9f3k",
            "roaming_mode": true,
            "networks": [{"type": "wifi", "ssid": "factory-net", "psk": "password1", "priority": 5}]}"#,
    )
    .unwrap();
    stand_in_nmcli(&sb);
    let path = format!(
        "{}:{}",
        sb.root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut agent = sb.spawn_agent(&[
        ("PATH", path.as_str()),
        // Far longer than the test: svc-server's start would end the wait.
        ("SVC_AGENT_FIRST_CONTACT_SECS", "3600"),
    ]);
    wait_for(
        "agent-provisioning to bring up the manufacturer's network (nmcli connection up id net-factory-net)",
        120,
        || {
            nmcli_calls(&sb)
                .iter()
                .any(|l| l == "connection up id net-factory-net" || l.ends_with(" connection up id net-factory-net"))
        },
    );
    assert!(
        sb.fake("pids").is_empty(),
        "svc-server started: the first-contact wait was over\n{}",
        sb.log()
    );
    assert!(
        !sb.log().contains("the server is reachable"),
        "{}",
        sb.log()
    );
    terminate(&mut agent);
}
