//! Issue 40, finding 7: on a device with a vendor key (`/etc/svc-signing.pub`), a `file://`
//! management directory (a USB stick) holds no authority of its own: its machine config is
//! applied only when signed by the vendor key (`svc-release publish`), a signed config may
//! not run code from the stick, the stick offers no module registry, and an unsigned
//! `pin_version` cannot lift the downgrade rule. docs/releases.md, *What a stick can change*.
use crate::common;
use crate::update_support::Install;
use crate::update_support::{artifact, fake_binary, test_opts};
use common::sandbox::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use svc::paths::Paths;
use svc::update::Engine;

fn release(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_svc-release"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "svc-release {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A vendor key made by the release tool, its public half installed as the device's
/// `/etc/svc-signing.pub`; returns the private key's path.
fn vendor_key(sb: &Sandbox) -> PathBuf {
    let key = sb.root.join("vendor.key");
    release(&["keygen", path_str(&key)]);
    std::fs::copy(
        sb.root.join("vendor.key.pub"),
        sb.root.join("etc/svc-signing.pub"),
    )
    .unwrap();
    key
}

fn write_exec(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The real svc-server as the machine's active build (it runs local modules).
fn install_real_server(sb: &Sandbox) {
    let bin = sb.root.join("opt/svc/bin/svc-server");
    write_exec(
        &bin,
        &std::fs::read(env!("CARGO_BIN_EXE_svc-server")).unwrap(),
    );
}

/// A program on the stick that records who ran it, then stays up.
fn stick_program(sb: &Sandbox, marker: &Path) -> PathBuf {
    let prog = sb.app.join("tools/run");
    write_exec(
        &prog,
        format!("#!/bin/sh\nid -u > {}\nexec sleep 600\n", marker.display()).as_bytes(),
    );
    prog
}

fn module_config(exe: &Path) -> serde_json::Value {
    json!({
        "components": [{"name": "c", "model": "stick:evil:m", "type": "generic",
                        "namespace": "rdk", "attributes": {}}],
        "modules": [{"type": "local", "name": "evil", "module_id": "stick:evil",
                     "executable_path": exe.display().to_string()}],
        "agent": {}
    })
}

/// The attack: the stick's `poll.json` carries an unsigned config naming a local module
/// whose executable is on the stick. Before the fix svc-server ran it as root.
#[test]
fn an_unsigned_stick_config_never_runs_a_module_from_the_stick() {
    let sb = Sandbox::new("stick-unsigned-module");
    vendor_key(&sb);
    sb.file_app();
    install_real_server(&sb);
    let marker = sb.root.join("module-ran");
    let prog = stick_program(&sb, &marker);
    sb.answer(json!({"poll_interval_secs": 1, "config": module_config(&prog)}));
    let mut agent = sb.spawn_agent(&[]);
    wait_for(
        "the unsigned config refused (or its module run)",
        120,
        || marker.exists() || sb.log().contains("is not signed"),
    );
    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    terminate(&mut agent);
    assert!(
        ran.is_empty(),
        "a module from an unsigned stick config ran as uid {ran}"
    );
    assert!(
        !sb.root.join("opt/svc/config.json").exists(),
        "the unsigned config was cached"
    );
    let log = sb.log();
    assert!(
        log.contains("this device has a vendor key"),
        "the refusal names why: {log}"
    );
}

/// An svc-server build of `version` (a fake that stays up) made active through the engine.
fn install_running(paths: &Paths, version: &str) {
    let body = fake_binary("svc-server", version, "hang", 0);
    let src = paths.root().join(format!("src-svc-server-{version}"));
    std::fs::write(&src, &body).unwrap();
    let a = artifact(
        "svc-server",
        version,
        &format!("file://{}", src.display()),
        &body,
    );
    Engine::new(paths.clone(), test_opts()).install(&a).unwrap();
}

/// The attack: a validly signed older release on the stick, and an unsigned config beside it
/// whose `pin_version` names it. Before the fix the pin lifted the downgrade rule.
#[test]
fn an_unsigned_stick_pin_cannot_lift_the_downgrade_rule() {
    let sb = Sandbox::new("stick-unsigned-pin");
    let paths = Paths::new(&sb.root);
    install_running(&paths, "1.0.0");
    // A machine that ran from a good config before the stick came.
    std::fs::write(sb.root.join("opt/svc/config.json"), r#"{"agent": {}}"#).unwrap();
    let key = vendor_key(&sb);
    sb.file_app();
    let old = sb.root.join("old-svc-server");
    write_exec(&old, &fake_binary("svc-server", "0.5.0", "hang", 0));
    std::fs::write(sb.app.join("poll.json"), r#"{"poll_interval_secs": 1}"#).unwrap();
    release(&[
        "publish",
        "--key",
        path_str(&key),
        path_str(&sb.app),
        path_str(&old),
    ]);
    let mut answer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sb.app.join("poll.json")).unwrap()).unwrap();
    answer["config"] = json!({"agent": {"svc-server": {"pin_version": "0.5.0"}}});
    sb.answer(answer);
    let link = || {
        std::fs::read_link(sb.root.join("opt/svc/bin/svc-server"))
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    let mut agent = sb.spawn_agent(&[]);
    wait_for("the replayed release refused (or installed)", 120, || {
        link().ends_with("svc-server-0.5.0") || sb.log().contains("refusing 0.5.0")
    });
    terminate(&mut agent);
    assert!(
        link().ends_with("svc-server-1.0.0"),
        "an unsigned pin downgraded svc-server: {}\n{}",
        link(),
        sb.log()
    );
}

fn cached_config(sb: &Sandbox) -> String {
    std::fs::read_to_string(sb.root.join("opt/svc/config.json")).unwrap_or_default()
}

/// The defence's other side: a config published (signed) by `svc-release publish` is
/// applied; the stick offers svc-server no registry; a signed config whose file was swapped
/// (sha256 and size edited to match) is refused by the signature; a signed config naming a
/// program on the stick is refused; the last good config stays throughout.
#[test]
fn a_signed_stick_config_is_applied_and_tampered_or_code_carrying_ones_refused() {
    let sb = Sandbox::new("stick-signed-config");
    let key = vendor_key(&sb);
    sb.file_app();
    sb.install_fake_server();
    let arch = std::env::consts::ARCH;
    let publish = |cfg: serde_json::Value| {
        let mut answer: serde_json::Value =
            serde_json::from_slice(&std::fs::read(sb.app.join("poll.json")).unwrap_or_default())
                .unwrap_or(json!({"poll_interval_secs": 1}));
        answer["config"] = cfg;
        sb.answer(answer);
        release(&[
            "publish",
            "--key",
            path_str(&key),
            "--target",
            arch,
            path_str(&sb.app),
        ]);
    };
    let tool = |mode: &str| {
        json!({"modules": [{"type": "local", "name": "tool", "module_id": "lab:tool",
                            "executable_path": "/bin/true", "env": {"MODE": mode}}],
               "agent": {}})
    };
    publish(tool("signed-one"));
    let answer = std::fs::read_to_string(sb.app.join("poll.json")).unwrap();
    assert!(
        answer.contains("signed_config") && !answer.contains("\"config\""),
        "{answer}"
    );
    let mut agent = sb.spawn_agent(&[]);
    wait_for("the signed config applied", 120, || {
        cached_config(&sb).contains("signed-one")
    });
    wait_for("svc-server started", 60, || !sb.fake("env").is_empty());
    assert!(
        !sb.fake("env").contains("SVC_REGISTRY="),
        "a keyed device's svc-server got the stick's registry: {}",
        sb.fake("env")
    );

    // The config file swapped, the answer edited to match it, the signature kept.
    let mut answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let evil = serde_json::to_vec(&tool("swapped")).unwrap();
    let sha = crate::update_support::sha256_hex(&evil);
    std::fs::write(sb.app.join(format!("artifacts/{sha}")), &evil).unwrap();
    answer["signed_config"]["url"] = json!(format!("artifacts/{sha}"));
    answer["signed_config"]["sha256"] = json!(sha);
    answer["signed_config"]["size"] = json!(evil.len());
    sb.answer(answer);
    wait_for("the swapped config refused", 120, || {
        sb.log().contains("bad signature for config")
    });
    assert!(cached_config(&sb).contains("signed-one"));

    // Signed by the vendor, but running a program from the stick.
    let marker = sb.root.join("module-ran");
    let prog = stick_program(&sb, &marker);
    publish(module_config(&prog));
    wait_for("the code-carrying config refused", 120, || {
        sb.log().contains("no program runs from it")
    });
    assert!(cached_config(&sb).contains("signed-one"));
    wait_for("the refusal in the status on the stick", 60, || {
        std::fs::read_to_string(sb.app.join("status.json"))
            .is_ok_and(|s| s.contains("/modules/0/executable_path"))
    });
    terminate(&mut agent);
    assert!(!marker.exists());
}
