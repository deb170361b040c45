//! Power-cut tests: for every crash point of download → verify → activate → record →
//! clean, a child process (this test binary, re-executed) performs an update with
//! `SVC_CRASH_AT=<point>` and is SIGKILLed there. Then, before anything else runs, the link
//! must point at a complete, verified binary (old or new); and a fresh run must converge to
//! the target.
use crate::common::https;
use crate::update_support;

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use crate::update_support::{Install, Outcome};
use https::{Behavior, HttpsServer};
use svc::paths::Paths;
use svc::update::{Artifact, Engine, VersionRecords, CRASH_POINTS};
use update_support::*;

/// Not a test: the body of the child process. Runs only when re-executed by
/// `crash_at_every_point_then_converge` (which sets `SVC_TEST_CHILD_ROOT`).
#[test]
#[ignore = "child process of crash_at_every_point_then_converge"]
fn child_update() {
    let (Some(root), Some(art)) = (
        std::env::var_os("SVC_TEST_CHILD_ROOT"),
        std::env::var("SVC_TEST_CHILD_ARTIFACT").ok(),
    ) else {
        return;
    };
    let a: Artifact = serde_json::from_str(&art).unwrap();
    let r = Engine::new(Paths::new(root), test_opts()).install(&a);
    println!("child result: {r:?}");
    r.unwrap();
}

fn run_child(paths: &Paths, a: &Artifact, crash_at: Option<&str>) -> std::process::ExitStatus {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "update_powercut::child_update",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("SVC_TEST_CHILD_ROOT", paths.root())
    .env("SVC_TEST_CHILD_ARTIFACT", serde_json::to_string(a).unwrap())
    .env_remove("SVC_CRASH_AT");
    if let Some(p) = crash_at {
        cmd.env("SVC_CRASH_AT", p);
    }
    // The child's libtest chatter would bury the parent's report; its log stays on stderr.
    cmd.stdout(std::process::Stdio::null()).status().unwrap()
}

/// The link exists and its target is byte-identical to one of the verified bodies, and
/// that target runs and says what it is.
fn assert_link_sound(paths: &Paths, name: &str, bodies: &[(&str, &[u8])], when: &str) {
    let (v, bytes) = active(paths, name);
    let ok = bodies
        .iter()
        .any(|(bv, b)| *bv == v && sha256_hex(b) == sha256_hex(&bytes));
    assert!(
        ok,
        "{when}: link points at {v}, not a complete verified binary"
    );
    let target = paths.bin_link(name);
    let info =
        svc::update::verify::version_check(&target, name, std::time::Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{when}: active binary does not run: {e}"));
    assert_eq!(info.version, v);
}

#[test]
fn crash_at_every_point_then_converge() {
    let server = HttpsServer::start();
    let mut runs = 0;
    for name in ["svc-server", "svc-agent"] {
        let new_body = fake_binary(name, "2.0.0", "ok", 1_500_000);
        let path = format!("/{name}-2.0.0");
        server.add(&path, new_body.clone(), Behavior::Normal);
        for point in CRASH_POINTS {
            let paths = sandbox(&format!("powercut-{name}-{point}"));
            let old_body = install_old(&paths, name, "1.0.0");
            let a = artifact(name, "2.0.0", &server.url(&path), &new_body);
            let bodies = [
                ("1.0.0", old_body.as_slice()),
                ("2.0.0", new_body.as_slice()),
            ];
            let before = server.requests(&path).len();

            let st = run_child(&paths, &a, Some(point));
            runs += 1;
            assert_eq!(
                st.signal(),
                Some(libc::SIGKILL),
                "{name} {point}: child did not crash there: {st:?}"
            );
            assert_link_sound(
                &paths,
                name,
                &bodies,
                &format!("{name} after crash at {point}"),
            );

            let st = run_child(&paths, &a, None);
            runs += 1;
            assert!(st.success(), "{name} {point}: fresh run failed: {st:?}");
            assert_link_sound(
                &paths,
                name,
                &bodies,
                &format!("{name} after re-run ({point})"),
            );
            assert_eq!(
                active(&paths, name).0,
                "2.0.0",
                "{name} {point}: did not converge"
            );
            let rec = VersionRecords::load(&paths).unwrap();
            let r = rec.get(name).unwrap();
            assert_eq!(r.current.as_deref(), Some("2.0.0"), "{name} {point}");
            assert_eq!(r.previous.as_deref(), Some("1.0.0"), "{name} {point}");
            assert!(no_part(&paths, name, "2.0.0"), "{name} {point}: part left");
            // No temp links or temp files left behind in bin/.
            let bin: Vec<String> = std::fs::read_dir(paths.bin_dir())
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.'))
                .collect();
            assert!(bin.is_empty(), "{name} {point}: stale temp links {bin:?}");
            // A crash mid-download resumes: the re-run asked for the rest only.
            let reqs = server.requests(&path);
            if *point == "download-half" {
                let resumed = reqs[before..]
                    .iter()
                    .any(|r| r.header("range").is_some_and(|v| v != "bytes=0-"));
                assert!(
                    resumed,
                    "{name}: the re-run did not resume with Range: {reqs:?}"
                );
            }
            // Idempotent afterwards.
            let out = Engine::new(paths.clone(), test_opts()).install(&a).unwrap();
            assert_eq!(
                out,
                Outcome::AlreadyCurrent {
                    version: "2.0.0".into()
                }
            );
        }
    }
    println!(
        "power-cut: {} crash points x 2 names, {runs} child runs, all converged",
        CRASH_POINTS.len()
    );
    assert_eq!(runs, CRASH_POINTS.len() * 4);
}
