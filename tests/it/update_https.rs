//! The update engine against a real HTTPS server on loopback with a test CA: the good path
//! and every way a download or a file can be bad. Each failure must leave the old binary
//! active and intact, nothing of the new version cached, and say why.
use crate::common::https;
use crate::update_support;

use std::time::Duration;

use crate::update_support::{Install, Outcome};
use https::{Behavior, HttpsServer};
use svc::update::{Engine, UpdateError, VersionRecords};
use update_support::*;

const NAME: &str = "svc-server";

struct Fixture {
    paths: svc::paths::Paths,
    server: HttpsServer,
    old_body: Vec<u8>,
}

fn setup(test: &str) -> Fixture {
    let server = HttpsServer::start();
    let paths = sandbox(test);
    let old_body = install_old(&paths, NAME, "1.0.0");
    Fixture {
        paths,
        server,
        old_body,
    }
}

impl Fixture {
    fn updater(&self) -> Engine {
        Engine::new(self.paths.clone(), test_opts())
    }
    fn untouched(&self, new: &str) {
        assert_untouched(&self.paths, NAME, "1.0.0", &self.old_body, new);
    }
}

#[test]
fn good_artifact_is_activated() {
    let f = setup("good");
    let body = fake_binary(NAME, "2.0.0", "ok", 300_000);
    f.server
        .add("/svc-server-2.0.0", body.clone(), Behavior::Normal);
    let a = artifact(NAME, "2.0.0", &f.server.url("/svc-server-2.0.0"), &body);
    let out = f.updater().install(&a).unwrap();
    assert_eq!(
        out,
        Outcome::Activated {
            version: "2.0.0".into(),
            previous: Some("1.0.0".into())
        }
    );
    let (v, bytes) = active(&f.paths, NAME);
    assert_eq!(v, "2.0.0");
    assert_eq!(bytes, body);
    let rec = VersionRecords::load(&f.paths).unwrap();
    let r = rec.get(NAME).unwrap();
    assert_eq!(r.current.as_deref(), Some("2.0.0"));
    assert_eq!(r.previous.as_deref(), Some("1.0.0"));
    assert_eq!(r.target.as_deref(), Some("2.0.0"));
    assert!(no_part(&f.paths, NAME, "2.0.0"));
    // The link is the only name in bin/ (no temp links left).
    let names: Vec<_> = std::fs::read_dir(f.paths.bin_dir())
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(names.len(), 1);
    // A second call downloads nothing.
    let n = f.server.requests("/svc-server-2.0.0").len();
    assert_eq!(
        f.updater().install(&a).unwrap(),
        Outcome::AlreadyCurrent {
            version: "2.0.0".into()
        }
    );
    assert_eq!(f.server.requests("/svc-server-2.0.0").len(), n);
}

#[test]
fn truncated_file_is_rejected() {
    let f = setup("truncated");
    let body = fake_binary(NAME, "2.0.0", "ok", 200_000);
    // The server has only the first 3/4 of the file (a complete, well-formed response).
    f.server
        .add("/t", body[..body.len() * 3 / 4].to_vec(), Behavior::Normal);
    let a = artifact(NAME, "2.0.0", &f.server.url("/t"), &body);
    let err = f.updater().install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::SizeMismatch { .. }), "{err}");
    assert!(err.to_string().contains("size mismatch"), "{err}");
    f.untouched("2.0.0");
    assert!(no_part(&f.paths, NAME, "2.0.0"), "bad file left behind");
}

#[test]
fn wrong_sha256_is_rejected() {
    let f = setup("wrong-sha");
    let body = fake_binary(NAME, "2.0.0", "ok", 0);
    f.server.add("/s", body.clone(), Behavior::Normal);
    let mut a = artifact(NAME, "2.0.0", &f.server.url("/s"), &body);
    a.sha256 = Some(sha256_hex(b"something else"));
    let err = f.updater().install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::ShaMismatch { .. }), "{err}");
    assert!(err.to_string().contains(&sha256_hex(&body)), "{err}");
    f.untouched("2.0.0");
    assert!(no_part(&f.paths, NAME, "2.0.0"));
}

#[test]
fn more_bytes_than_announced_abort_the_download() {
    let f = setup("wrong-size");
    let body = fake_binary(NAME, "2.0.0", "ok", 500_000);
    f.server.add("/z", body.clone(), Behavior::Normal);
    let mut a = artifact(NAME, "2.0.0", &f.server.url("/z"), &body);
    a.size = Some(body.len() as u64 / 2);
    let err = f.updater().install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::TooLarge { .. }), "{err}");
    assert_eq!(
        f.server.requests("/z").len(),
        1,
        "a size violation is not retried"
    );
    f.untouched("2.0.0");
    assert!(no_part(&f.paths, NAME, "2.0.0"));
}

#[test]
fn signatures_are_required_once_a_vendor_key_is_installed() {
    let f = setup("signature");
    let sign = install_vendor_key(&f.paths);
    let body = fake_binary(NAME, "2.0.0", "ok", 0);
    f.server.add("/g", body.clone(), Behavior::Normal);
    let good = artifact(NAME, "2.0.0", &f.server.url("/g"), &body);

    // Missing signature.
    let err = f.updater().install(&good).unwrap_err();
    assert!(matches!(err, UpdateError::Signature(_)), "{err}");
    f.untouched("2.0.0");
    assert!(no_part(&f.paths, NAME, "2.0.0"));

    // A signature over other fields (here: another version) is a bad signature.
    let mut other = good.clone();
    other.version = "2.0.1".into();
    let mut bad = good.clone();
    bad.signature = Some(sign(&other));
    let err = f.updater().install(&bad).unwrap_err();
    assert!(matches!(err, UpdateError::Signature(_)), "{err}");
    assert!(err.to_string().contains("bad signature"), "{err}");
    f.untouched("2.0.0");
    assert!(no_part(&f.paths, NAME, "2.0.0"));

    // The right signature passes.
    let mut signed = good.clone();
    signed.signature = Some(sign(&good));
    f.updater().install(&signed).unwrap();
    assert_eq!(active(&f.paths, NAME).0, "2.0.0");
}

#[test]
fn elf_for_another_architecture_is_rejected() {
    let f = setup("wrong-arch");
    let mut body = fake_binary(NAME, "2.0.0", "ok", 0);
    let other: u16 = if svc::update::verify::this_machine() == 62 {
        183
    } else {
        62
    };
    body[18..20].copy_from_slice(&other.to_le_bytes());
    f.server.add("/arch", body.clone(), Behavior::Normal);
    let a = artifact(NAME, "2.0.0", &f.server.url("/arch"), &body);
    let err = f.updater().install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::WrongArch { .. }), "{err}");
    f.untouched("2.0.0");
    assert!(no_part(&f.paths, NAME, "2.0.0"));
}

#[test]
fn non_elf_is_rejected() {
    let f = setup("non-elf");
    let body =
        b"#!/bin/sh\necho '{\"binary_name\":\"svc-server\",\"version\":\"2.0.0\"}'\n".to_vec();
    f.server.add("/sh", body.clone(), Behavior::Normal);
    let a = artifact(NAME, "2.0.0", &f.server.url("/sh"), &body);
    let err = f.updater().install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::NotElf(_)), "{err}");
    f.untouched("2.0.0");
    assert!(no_part(&f.paths, NAME, "2.0.0"));
}

#[test]
fn a_binary_that_is_not_what_it_claims_is_rejected() {
    let f = setup("wrong-binary-name");
    // A real ELF for this machine, but it says it is svc-agent.
    let body = fake_binary("svc-agent", "2.0.0", "ok", 0);
    f.server.add("/agent", body.clone(), Behavior::Normal);
    let a = artifact(NAME, "2.0.0", &f.server.url("/agent"), &body);
    let err = f.updater().install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::VersionCheck(_)), "{err}");
    assert!(err.to_string().contains("binary_name"), "{err}");
    f.untouched("2.0.0");

    // One whose `version --json` never returns is killed and rejected.
    let body = fake_binary(NAME, "2.0.1", "version-hangs", 0);
    f.server.add("/hang", body.clone(), Behavior::Normal);
    let a = artifact(NAME, "2.0.1", &f.server.url("/hang"), &body);
    let mut opts = test_opts();
    opts.version_timeout = Duration::from_millis(500);
    let err = Engine::new(f.paths.clone(), opts).install(&a).unwrap_err();
    assert!(err.to_string().contains("did not finish"), "{err}");
    assert_untouched(&f.paths, NAME, "1.0.0", &f.old_body, "2.0.1");
}

#[test]
fn connection_cut_at_half_resumes_with_range() {
    let f = setup("resume");
    let body = fake_binary(NAME, "2.0.0", "ok", 1_000_000);
    let half = body.len() as u64 / 2;
    f.server.add("/r", body.clone(), Behavior::Normal);
    f.server.next("/r", Behavior::Cut(half));
    let a = artifact(NAME, "2.0.0", &f.server.url("/r"), &body);
    f.updater().install(&a).unwrap();
    assert_eq!(active(&f.paths, NAME), ("2.0.0".into(), body.clone()));
    let reqs = f.server.requests("/r");
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert!(reqs[0].header("range").is_none());
    assert_eq!(
        reqs[1].header("range"),
        Some(format!("bytes={half}-").as_str()),
        "resumed from the .part length, not restarted"
    );
    assert_eq!(
        reqs[1].header("if-range"),
        Some(f.server.etag("/r").as_str())
    );
}

#[test]
fn a_link_that_keeps_dropping_is_resumed_after_a_restart() {
    let f = setup("resume-later");
    let body = fake_binary(NAME, "2.0.0", "ok", 1_000_000);
    let third = body.len() as u64 / 3;
    f.server.add("/d", body.clone(), Behavior::Cut(third));
    let a = artifact(NAME, "2.0.0", &f.server.url("/d"), &body);
    let err = f.updater().install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::Network { .. }), "{err}");
    f.untouched("2.0.0");
    // The partial download is kept for the next check (never executable, never linked).
    let part = f.paths.cache_dir().join("svc-server-2.0.0.part");
    assert_eq!(std::fs::metadata(&part).unwrap().len(), third);
    // Later the link is fine again: a new updater (as after a restart) resumes.
    f.server.set_behavior("/d", Behavior::Normal);
    let before = f.server.requests("/d").len();
    f.updater().install(&a).unwrap();
    assert_eq!(active(&f.paths, NAME), ("2.0.0".into(), body));
    let reqs = f.server.requests("/d");
    assert_eq!(reqs.len(), before + 1);
    assert_eq!(
        reqs[before].header("range"),
        Some(format!("bytes={third}-").as_str())
    );
    assert!(no_part(&f.paths, NAME, "2.0.0"));
}

#[test]
fn not_found_fails_at_once_with_one_request() {
    let f = setup("404");
    let body = fake_binary(NAME, "2.0.0", "ok", 0);
    f.server.add(
        "/missing",
        body.clone(),
        Behavior::Status(404, vec![], "404 Not Found".into()),
    );
    let a = artifact(NAME, "2.0.0", &f.server.url("/missing"), &body);
    let err = f.updater().install(&a).unwrap_err();
    assert!(
        matches!(err, UpdateError::HttpStatus { status: 404, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("404"), "{err}");
    assert_eq!(f.server.requests("/missing").len(), 1, "no retry storm");
    f.untouched("2.0.0");
    assert!(no_part(&f.paths, NAME, "2.0.0"));
}

#[test]
fn a_trickle_times_out_after_bounded_attempts() {
    let f = setup("trickle");
    let body = fake_binary(NAME, "2.0.0", "ok", 0);
    f.server.add(
        "/slow",
        body.clone(),
        Behavior::Trickle {
            chunk: 16,
            every: Duration::from_millis(200),
        },
    );
    let a = artifact(NAME, "2.0.0", &f.server.url("/slow"), &body);
    let mut opts = test_opts();
    opts.download.request_timeout = Duration::from_secs(1);
    opts.download.max_attempts = 2;
    let err = Engine::new(f.paths.clone(), opts).install(&a).unwrap_err();
    match &err {
        UpdateError::Network { attempts, last, .. } => {
            assert_eq!(*attempts, 2);
            assert!(
                last.contains("timeout") || last.contains("timed out"),
                "{last}"
            );
        }
        e => panic!("expected a network timeout, got {e}"),
    }
    // The bound is what counts: no more requests than attempts. On a loaded machine an
    // attempt's 1 s deadline can pass before the server has read its request (TLS still
    // handshaking), so the server may have seen fewer.
    let seen = f.server.requests("/slow").len();
    assert!((1..=2).contains(&seen), "{seen} requests for 2 attempts");
    f.untouched("2.0.0");
}

#[test]
fn a_download_without_a_length_that_fills_the_disk_stops_and_gives_the_space_back() {
    // The whole state folder on a real 24 MiB file system; a pinned URL whose server
    // announces no size streams over 48 MiB. Before, ENOSPC was retried as a network error and
    // the full .part kept for resuming, after which nothing else the agent writes fit.
    let server = HttpsServer::start();
    let paths = sandbox("enospc");
    let _fs = SmallFs::mount(paths.root(), "24m");
    let old_body = install_old(&paths, NAME, "1.0.0");
    let body = fake_binary(NAME, "2.0.0", "ok", 48 * 1024 * 1024);
    server.add("/endless", body.clone(), Behavior::NoLength);
    let mut a = artifact(NAME, "2.0.0", &server.url("/endless"), &body);
    a.size = None;
    let opts = test_opts();
    let margin = opts.download.free_space_margin;
    let err = Engine::new(paths.clone(), opts).install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::NoSpace { .. }), "{err}");
    assert_eq!(
        server.requests("/endless").len(),
        1,
        "a full disk is not a network error to retry"
    );
    assert!(
        no_part(&paths, NAME, "2.0.0"),
        "the partial download is removed"
    );
    assert_untouched(&paths, NAME, "1.0.0", &old_body, "2.0.0");
    // What the agent writes next still fits.
    let free = svc::sys::free_bytes(paths.root()).unwrap();
    assert!(free >= margin, "only {free} bytes left");
    std::fs::write(paths.state_dir().join("after"), vec![0u8; 512 * 1024]).unwrap();
}

#[test]
fn pinned_url_is_checked_conditionally() {
    let f = setup("pin");
    let body = fake_binary(NAME, "9.9.9", "ok", 0);
    f.server.add("/pin", body.clone(), Behavior::Normal);
    let mut a = artifact(NAME, "", &f.server.url("/pin"), &body);
    a.sha256 = None;
    a.size = None;
    let out = f.updater().install(&a).unwrap();
    let version = format!("pin+{}", &sha256_hex(&body)[..12]);
    assert_eq!(
        out,
        Outcome::Activated {
            version: version.clone(),
            previous: Some("1.0.0".into())
        }
    );
    assert_eq!(active(&f.paths, NAME), (version.clone(), body.clone()));
    // Next check: a conditional request, answered 304; nothing downloaded.
    let out = f.updater().install(&a).unwrap();
    assert_eq!(out, Outcome::NotModified { version });
    let reqs = f.server.requests("/pin");
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[1].header("if-none-match"),
        Some(f.server.etag("/pin").as_str())
    );
    // The file is rebuilt at the same URL: downloaded again, a new version, old one kept.
    let body2 = fake_binary(NAME, "9.9.10", "ok", 10);
    f.server.add("/pin", body2.clone(), Behavior::Normal);
    let out = f.updater().install(&a).unwrap();
    let v2 = format!("pin+{}", &sha256_hex(&body2)[..12]);
    assert!(
        matches!(out, Outcome::Activated { ref version, .. } if *version == v2),
        "{out:?}"
    );
    assert_eq!(active(&f.paths, NAME), (v2, body2));
}

#[test]
fn a_rollback_marks_the_version_bad_until_another_is_offered() {
    let f = setup("rollback-bad");
    let body = fake_binary(NAME, "2.0.0", "ok", 0);
    f.server.add("/v2", body.clone(), Behavior::Normal);
    let a = artifact(NAME, "2.0.0", &f.server.url("/v2"), &body);
    f.updater().install(&a).unwrap();
    let (from, to) = svc::update::rollback(&f.paths, svc::update::Kind::of(NAME).unwrap()).unwrap();
    assert_eq!((from.as_deref(), to.as_str()), (Some("2.0.0"), "1.0.0"));
    f.untouched("no-such");
    let n = f.server.requests("/v2").len();
    let err = f.updater().install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::MarkedBad { .. }), "{err}");
    assert_eq!(
        f.server.requests("/v2").len(),
        n,
        "a bad version is not fetched"
    );
    // A different version is offered: it installs, and the mark is lifted.
    let body3 = fake_binary(NAME, "3.0.0", "ok", 0);
    f.server.add("/v3", body3.clone(), Behavior::Normal);
    f.updater()
        .install(&artifact(NAME, "3.0.0", &f.server.url("/v3"), &body3))
        .unwrap();
    assert!(VersionRecords::load(&f.paths)
        .unwrap()
        .get(NAME)
        .unwrap()
        .bad
        .is_empty());
}

#[test]
fn the_cache_keeps_current_previous_and_target_only() {
    let f = setup("cache");
    for v in ["2.0.0", "3.0.0", "4.0.0"] {
        let body = fake_binary(NAME, v, "ok", 0);
        f.server
            .add(&format!("/{v}"), body.clone(), Behavior::Normal);
        f.updater()
            .install(&artifact(NAME, v, &f.server.url(&format!("/{v}")), &body))
            .unwrap();
    }
    let mut names: Vec<String> = std::fs::read_dir(f.paths.cache_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["svc-server-3.0.0", "svc-server-4.0.0"]);

    // Over the cap, previous goes, the link target never does.
    let recs = VersionRecords::load(&f.paths).unwrap();
    let report = svc::update::cache::clean(&f.paths, &recs, 1).unwrap();
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert!(f.paths.cache_dir().join("svc-server-4.0.0").is_file());
    assert_eq!(active(&f.paths, NAME).0, "4.0.0");
}

#[test]
fn the_executable_of_a_running_process_is_never_removed() {
    let f = setup("cache-running");
    // A process runs a cached version that no record mentions (e.g. svc-server still
    // running an old version); the cap asks for everything to go.
    let old = f.paths.cache_dir().join("svc-server-1.0.0");
    let hang = fake_binary(NAME, "0.9.0", "hang", 0);
    let hang_path = f.paths.cache_dir().join("svc-server-0.9.0");
    std::fs::write(&hang_path, &hang).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hang_path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut running =
        crate::common::spawn::spawn(std::process::Command::new(&hang_path).arg("run"));
    // Wait until the process has exec'd (its /proc exe names the file).
    let exe = format!("/proc/{}/exe", running.id());
    while std::fs::read_link(&exe).ok().as_deref() != Some(hang_path.as_path()) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let recs = VersionRecords::load(&f.paths).unwrap();
    let report = svc::update::cache::clean(&f.paths, &recs, 0).unwrap();
    running.kill().unwrap();
    running.wait().unwrap();
    assert!(
        hang_path.is_file(),
        "removed a running executable: {report:?}"
    );
    assert!(old.is_file(), "removed the link target");
}

#[test]
fn file_urls_work_and_unknown_schemes_do_not() {
    let f = setup("schemes");
    let body = fake_binary(NAME, "2.0.0", "ok", 0);
    let src = f.paths.root().join("v2");
    std::fs::write(&src, &body).unwrap();
    let mut a = artifact(NAME, "2.0.0", &format!("ftp://x{}", src.display()), &body);
    let err = f.updater().install(&a).unwrap_err();
    assert!(matches!(err, UpdateError::UnsupportedUrl(_)), "{err}");
    a.url = format!("file://{}", src.display());
    f.updater().install(&a).unwrap();
    assert_eq!(active(&f.paths, NAME), ("2.0.0".into(), body));
}

/// Issue 15 item 3: a pinned download redirected https → http → https was accepted (only the
/// final URL was checked), so anyone on the path of the plain hop could have sent another
/// file. Redirects are followed hop by hop, and a hop to plain http ends the download
/// before it is made.
#[test]
fn a_download_redirected_through_plain_http_is_refused_before_the_plain_hop() {
    let f = setup("redirect-downgrade");
    let body = fake_binary(NAME, "9.9.9", "ok", 0);
    f.server.add("/real", body.clone(), Behavior::Normal);
    // The plain hop: redirects back to https, and counts who came by.
    let plain = HttpsServer::start_plain();
    let plain_url = plain.url("/hop");
    plain.set_behavior("/hop", Behavior::redirect(&f.server.url("/real")));
    f.server
        .add("/pin", Vec::new(), Behavior::redirect(&plain_url));
    let mut a = artifact(NAME, "", &f.server.url("/pin"), &body);
    a.sha256 = None;
    a.size = None;
    let err = f.updater().install(&a).unwrap_err();
    assert!(
        err.to_string().contains("plain http"),
        "a downgrade must be named: {err}"
    );
    assert_eq!(plain.connections(), 0, "the plain http hop was contacted");
    f.untouched("9.9.9");
}

/// Redirects that stay on https are followed (a CDN), hop by hop, and the file verifies.
#[test]
fn a_download_redirected_within_https_is_followed() {
    let f = setup("redirect-https");
    let body = fake_binary(NAME, "2.0.0", "ok", 1000);
    f.server.add("/cdn/file", body.clone(), Behavior::Normal);
    f.server
        .add("/a", Vec::new(), Behavior::redirect(&f.server.url("/b")));
    f.server
        .add("/b", Vec::new(), Behavior::redirect("/cdn/file"));
    let a = artifact(NAME, "2.0.0", &f.server.url("/a"), &body);
    f.updater().install(&a).unwrap();
    assert_eq!(active(&f.paths, NAME), ("2.0.0".to_string(), body));
}
