//! Issue 40, findings 1-3 and the `url` note: a `file://` management directory (a USB stick,
//! a share another user writes) attacking the real `svc-agent run` through the names in it.
//! Each test was the attack first, run against the code before `fsutil::Dir`.
use crate::common;
use crate::update_support::sha256_hex;
use common::sandbox::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::{Duration, Instant};

/// A root-only file outside the management directory, without a trailing newline (what
/// the old `append_lines` cut back to).
fn plant_secret(sb: &Sandbox, len: usize) -> (std::path::PathBuf, Vec<u8>) {
    let p = sb.root.join("etc/secret");
    let mut bytes = b"root:$6$secret-hash:19000:0:99999:7:::\n".to_vec();
    while bytes.len() < len {
        bytes.push(b'x');
    }
    std::fs::write(&p, &bytes).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    (p, bytes)
}

fn unchanged(p: &Path, bytes: &[u8]) -> Result<(), String> {
    let now = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    if now != bytes || mode != 0o600 {
        return Err(format!(
            "{} was written: {} bytes (was {}), mode {mode:o}",
            p.display(),
            now.len(),
            bytes.len()
        ));
    }
    Ok(())
}

#[test]
fn a_symlinked_logs_jsonl_never_writes_the_file_it_names() {
    let sb = Sandbox::new("fs-logs-link");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"poll_interval_secs": 1}));
    let (secret, bytes) = plant_secret(&sb, 72);
    std::os::unix::fs::symlink(&secret, sb.app.join("logs.jsonl")).unwrap();
    let mut agent = sb.spawn_agent(&[]);
    // Either the attack lands (the file grows) or the shipper reports the refusal.
    wait_for("the shipper to try logs.jsonl", 90, || {
        unchanged(&secret, &bytes).is_err() || sb.log().contains("logs.jsonl")
    });
    unchanged(&secret, &bytes).unwrap();
    let log = sb.log();
    assert!(
        log.contains("symbolic link"),
        "the refusal must say why:\n{log}"
    );
    // Still a link to the untouched file: nothing replaced it either.
    assert!(std::fs::symlink_metadata(sb.app.join("logs.jsonl"))
        .unwrap()
        .file_type()
        .is_symlink());
    let st = terminate(&mut agent);
    assert!(st.success(), "agent exit {st:?}\n{log}");
}

/// The datagrams a stand-in systemd receives on `NOTIFY_SOCKET`.
struct Notify(UnixDatagram);

impl Notify {
    fn bind(sb: &Sandbox) -> (Notify, String) {
        let p = sb.root.join("notify.sock");
        let s = UnixDatagram::bind(&p).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        (Notify(s), path_str(&p).to_string())
    }

    /// Waits (bounded) for a datagram containing `what`.
    fn wait_for(&self, what: &str, secs: u64) {
        let end = Instant::now() + Duration::from_secs(secs);
        let mut buf = [0u8; 512];
        while Instant::now() < end {
            if let Ok(n) = self.0.recv(&mut buf) {
                if String::from_utf8_lossy(&buf[..n]).contains(what) {
                    return;
                }
            }
        }
        panic!("no {what:?} on the notify socket in {secs} s");
    }
}

#[test]
fn a_fifo_as_poll_json_holds_neither_the_start_nor_the_stop() {
    let sb = Sandbox::new("fs-fifo");
    sb.file_app();
    sb.install_fake_server();
    let st = std::process::Command::new("mkfifo")
        .arg(sb.app.join("poll.json"))
        .status()
        .unwrap();
    assert!(st.success());
    let (notify, sock) = Notify::bind(&sb);
    let mut agent = sb.spawn_agent(&[("NOTIFY_SOCKET", &sock)]);
    notify.wait_for("READY=1", 90);
    wait_for("svc-server to start", 60, || !sb.fake("pids").is_empty());
    wait_for("the poll error naming poll.json", 60, || {
        sb.log().contains("poll.json")
    });
    let log = sb.log();
    assert!(
        log.contains("not a regular file"),
        "the error must say what is wrong:\n{log}"
    );
    let st = terminate(&mut agent);
    assert!(st.success(), "agent exit {st:?}\n{log}");
}

#[test]
fn planted_links_at_status_temp_names_are_never_written_through() {
    let sb = Sandbox::new("fs-temp-links");
    sb.file_app();
    sb.install_fake_server();
    sb.answer(json!({"poll_interval_secs": 1}));
    let (secret, bytes) = plant_secret(&sb, 72);
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_FAST_START", "1")]);
    // The names the agent's writes used to take (`.status.json.tmp.<pid>.<n>`, n counting
    // up per process), planted before its first status report can go out: fast start
    // starts svc-server before anything is polled, so the first poll comes after it.
    let pid = agent.id();
    for n in 0..2000 {
        let link = sb.app.join(format!(".status.json.tmp.{pid}.{n}"));
        std::os::unix::fs::symlink(&secret, link).unwrap();
    }
    wait_for("a status report in the management directory", 90, || {
        std::fs::read_to_string(sb.app.join("status.json")).is_ok_and(|s| s.contains("running"))
            || unchanged(&secret, &bytes).is_err()
    });
    unchanged(&secret, &bytes).unwrap();
    let st = terminate(&mut agent);
    assert!(st.success(), "agent exit {st:?}\n{}", sb.log());
}

/// Whatever the agent said about a file, it must not be its size or its hash.
fn assert_no_oracle(sb: &Sandbox, size: usize, sha: &str) {
    let logs = std::fs::read_to_string(sb.app.join("logs.jsonl")).unwrap_or_default();
    let status = std::fs::read_to_string(sb.app.join("status.json")).unwrap_or_default();
    for (what, text) in [
        ("agent log", sb.log()),
        ("logs.jsonl", logs),
        ("status", status),
    ] {
        assert!(
            !text.contains(sha),
            "the {what} names the file's sha256:\n{text}"
        );
        assert!(
            !text.contains(&format!("got {size}")),
            "the {what} names the file's size:\n{text}"
        );
    }
}

#[test]
fn a_url_outside_the_management_directory_is_refused_before_it_is_read() {
    let sb = Sandbox::new("fs-url-oracle");
    sb.file_app();
    sb.install_fake_server();
    let (secret, bytes) = plant_secret(&sb, 12_345);
    let sha = sha256_hex(&bytes);
    std::fs::create_dir_all(sb.app.join("artifacts")).unwrap();
    std::os::unix::fs::symlink(&secret, sb.app.join("artifacts/linked")).unwrap();
    std::os::unix::fs::symlink(sb.root.join("etc"), sb.app.join("etc-dir")).unwrap();
    let absolute = format!("file://{}", secret.display());
    let mut agent = sb.spawn_agent(&[]);
    let got_size = format!("got {}", bytes.len());
    for (i, (url, says)) in [
        (absolute.as_str(), "outside the management directory"),
        ("../etc/secret", "outside the management directory"),
        ("artifacts/linked", "symbolic link"),
        ("etc-dir/secret", "symbolic link"),
    ]
    .into_iter()
    .enumerate()
    {
        // A new version each time: a target that failed is not the one asked for next.
        sb.answer(json!({"poll_interval_secs": 1, "config": {"agent": {}},
            "targets": {"svc-server": {
                "version": format!("9.9.{i}"), "url": url, "sha256": "0".repeat(64)}}}));
        wait_for(&format!("the agent to act on {url}"), 90, || {
            let log = sb.log();
            // One line naming both: this URL's own refusal.
            let named = url.trim_start_matches("file://");
            log.lines().any(|l| l.contains(says) && l.contains(named))
                || log.contains(&sha)
                || log.contains(&got_size)
        });
        assert_no_oracle(&sb, bytes.len(), &sha);
    }
    unchanged(&secret, &bytes).unwrap();
    let st = terminate(&mut agent);
    assert!(st.success(), "agent exit {st:?}\n{}", sb.log());
}

/// svc-release with `args`, killed (and the test failed) if it has not ended in 60 s.
fn release_tool(args: &[&str]) -> std::process::Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_svc-release"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("svc-release {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn svc_release_neither_writes_nor_hashes_through_names_in_a_shared_directory() {
    let sb = Sandbox::new("fs-release");
    let key = sb.root.join("vendor.key");
    let out = release_tool(&["keygen", path_str(&key)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = sb.root.join("svc-server");
    std::fs::write(
        &bin,
        crate::update_support::fake_binary("svc-server", "1.0.0", "ok", 0),
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mgmt = sb.app.clone();
    let outside = sb.root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let (secret, bytes) = plant_secret(&sb, 4321);
    let publish = || {
        release_tool(&[
            "publish",
            "--key",
            path_str(&key),
            path_str(&mgmt),
            path_str(&bin),
        ])
    };

    // poll.json as a FIFO: a clear refusal, not a hang.
    let st = std::process::Command::new("mkfifo")
        .arg(mgmt.join("poll.json"))
        .status()
        .unwrap();
    assert!(st.success());
    let out = publish();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("not a regular file"),
        "{err}"
    );
    std::fs::remove_file(mgmt.join("poll.json")).unwrap();
    let out = release_tool(&["init", path_str(&mgmt)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // `artifacts` planted as a link to another folder: nothing is written there.
    std::os::unix::fs::symlink(&outside, mgmt.join("artifacts")).unwrap();
    let out = publish();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("symbolic link"),
        "{err}"
    );
    assert!(listing(&outside).is_empty(), "{:?}", listing(&outside));
    std::fs::remove_file(mgmt.join("artifacts")).unwrap();
    let out = publish();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A published artifact swapped for a link to a root-only file: `verify` neither reads
    // nor names it.
    let sha_bin = sha256_hex(&std::fs::read(&bin).unwrap());
    let art = mgmt.join("artifacts").join(&sha_bin);
    std::fs::remove_file(&art).unwrap();
    std::os::unix::fs::symlink(&secret, &art).unwrap();
    let pubkey = sb.root.join("vendor.key.pub");
    let out = release_tool(&["verify", "--pub", path_str(&pubkey), path_str(&mgmt)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("symbolic link"),
        "{err}"
    );
    assert!(!err.contains(&sha256_hex(&bytes)), "{err}");
    unchanged(&secret, &bytes).unwrap();
}
