//! The hawkBit backend against the DDI test server (`ddi_server.rs`) and the real update
//! engine: what the server is told, and when, and that a hostile answer reaches nothing.
//! Each poll uses a new transport, as after a restart or a power cut: everything the backend
//! knows between polls is on disk.
use crate::ddi_server::{DdiServer, CONTROLLER, TENANT, TOKEN};
use crate::update_support::*;
use crate::update_support::{Install, Outcome};
use serde_json::json;
use svc::hawkbit::HawkbitTransport;
use svc::paths::Paths;
use svc::protocol::{PollAnswer, PollOutcome, ProtocolError, Target, Transport};
use svc::update::{Artifact, Engine, VersionRecords};

const NAME: &str = "svc-server";

pub(crate) struct Fixture {
    pub(crate) paths: Paths,
    pub(crate) ddi: DdiServer,
    pub(crate) old_body: Vec<u8>,
}

pub(crate) fn setup(test: &str) -> Fixture {
    let paths = sandbox(&format!("hawkbit-{test}"));
    let old_body = install_old(&paths, NAME, "1.0.0");
    let token = paths.device("/etc/svc-hawkbit.token");
    svc::fsutil::atomic_write(&token, format!("{TOKEN}\n").as_bytes(), 0o600).unwrap();
    Fixture {
        paths,
        ddi: DdiServer::start(),
        old_body,
    }
}

impl Fixture {
    /// A new transport from a config read by the validator, as the agent would make it.
    pub(crate) fn transport(&self) -> HawkbitTransport {
        let cfg = json!({"agent": {"svc-agent": {"hawkbit": {
            "server_url": self.ddi.url(), "tenant": TENANT,
            "controller_id": CONTROLLER, "auth": "target-token"}}}});
        let (cfg, _) = svc::config::parse_value(&cfg).unwrap();
        HawkbitTransport::connect(&self.paths, cfg.agent.agent.hawkbit.as_ref().unwrap()).unwrap()
    }

    pub(crate) fn poll(&self, etag: Option<&str>) -> Result<PollOutcome, ProtocolError> {
        self.transport().poll(&serde_json::Value::Null, etag)
    }

    pub(crate) fn answer(&self) -> (PollAnswer, Option<String>) {
        match self.poll(None).unwrap() {
            PollOutcome::Changed { answer, etag } => (*answer, etag),
            other => panic!("{other:?}"),
        }
    }

    pub(crate) fn install(&self, t: &Target) -> Outcome {
        self.try_install(t).unwrap()
    }

    pub(crate) fn try_install(&self, t: &Target) -> Result<Outcome, svc::update::UpdateError> {
        install_target(&self.paths, &self.transport(), t)
    }

    pub(crate) fn artifact_requests(&self) -> usize {
        let s = self.ddi.state.lock().unwrap();
        s.requests
            .iter()
            .filter(|(_, p, _)| p.starts_with("/artifacts/"))
            .count()
    }
}

/// A target the backend offered, taken by the one engine as the daemon takes it: with the
/// token header on downloads from the server's origin (also the hawkbit_mock tests').
pub(crate) fn install_target(
    paths: &Paths,
    transport: &HawkbitTransport,
    t: &Target,
) -> Result<Outcome, svc::update::UpdateError> {
    let a = Artifact {
        name: NAME.into(),
        version: t.version.clone(),
        url: t.url.clone(),
        sha256: t.sha256.clone(),
        size: t.size,
        signature: t.signature.clone(),
        identity: Some(transport.identity()),
    };
    Engine::new(paths.clone(), test_opts()).install(&a)
}

#[test]
fn success_is_reported_only_after_probation() {
    let f = setup("success");
    let body = fake_binary(NAME, "2.0.0", "ok", 200_000);
    f.ddi
        .deploy("17", &format!("[{}]", f.ddi.chunk(NAME, "2.0.0", &body)));
    let (answer, etag) = f.answer();
    assert_eq!(answer.poll_interval_secs, Some(300), "config.polling.sleep");
    let target = answer.targets.server.expect("svc-server offered");
    assert_eq!(target.sha256.as_deref(), Some(sha256_hex(&body).as_str()));
    assert!(answer.targets.agent.is_none() && answer.config.is_none());
    assert_eq!(f.ddi.feedback_steps(), ["proceeding/none"]);
    assert_eq!(f.ddi.feedback()[0].0, "17");

    assert!(matches!(f.install(&target), Outcome::Activated { .. }));
    // Activated and on probation: "downloaded", never "closed" yet. The base is unchanged.
    assert_eq!(f.poll(etag.as_deref()).unwrap(), PollOutcome::NotModified);
    assert_eq!(
        f.ddi.feedback_steps(),
        ["proceeding/none", "downloaded/none"]
    );
    f.poll(etag.as_deref()).unwrap();
    assert_eq!(f.ddi.feedback().len(), 2, "nothing new while on probation");

    svc::update::end_server_probation(&f.paths, "2.0.0").unwrap();
    let (answer, _) = f.answer();
    assert_eq!(
        f.ddi.feedback_steps(),
        ["proceeding/none", "downloaded/none", "closed/success"]
    );
    assert!(answer.targets.server.is_none(), "the action is over");
    f.answer();
    assert_eq!(f.ddi.feedback().len(), 3, "closed is said once");
    // Every DDI request carried the token, and only in its header.
    let s = f.ddi.state.lock().unwrap();
    for (_, path, headers) in s
        .requests
        .iter()
        .filter(|(_, p, _)| !p.starts_with("/artifacts/"))
    {
        assert!(!path.contains(TOKEN));
        assert!(headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == &format!("TargetToken {TOKEN}")));
    }
}

#[test]
fn a_rollback_is_a_failure_naming_what_runs() {
    let f = setup("rollback");
    let body = fake_binary(NAME, "2.0.0", "exit1", 1000);
    f.ddi
        .deploy("18", &format!("[{}]", f.ddi.chunk(NAME, "2.0.0", &body)));
    let target = f.answer().0.targets.server.unwrap();
    f.install(&target);
    f.poll(None).unwrap();
    // The agent's probation rule rolls back (what agent::updates does on crashes).
    svc::update::rollback(&f.paths, svc::update::Kind::of(NAME).unwrap()).unwrap();
    f.poll(None).unwrap();
    let fb = f.ddi.feedback();
    assert_eq!(
        f.ddi.feedback_steps(),
        ["proceeding/none", "downloaded/none", "closed/failure"]
    );
    let why = fb[2].1["status"]["details"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        why.contains("2.0.0 was rolled back") && why.contains("svc-server 1.0.0 runs"),
        "{why}"
    );
    assert_eq!(active(&f.paths, NAME).1, f.old_body);
}

#[test]
fn hostile_deployments_reach_nothing_and_are_reported_once() {
    let f = setup("hostile");
    let body = fake_binary(NAME, "2.0.0", "ok", 1000);
    let good = f.ddi.chunk(NAME, "2.0.0", &body);
    let away = good.replace("127.0.0.1", "localhost");
    let cases = [
        (
            "31",
            good.replace("\"sha256\": \"", "\"sha256\": \"zz"),
            "not 64 hex",
        ),
        (
            "32",
            good.replace("\"name\": \"svc-server\"", "\"name\": \"kernel\""),
            "unknown chunk",
        ),
        ("33", away, "points away"),
        (
            "34",
            good.replace("\"size\": ", "\"size\": 0, \"x\": "),
            "no size",
        ),
    ];
    for (i, (id, chunk, why)) in cases.iter().enumerate() {
        f.ddi.deploy(id, &format!("[{chunk}]"));
        // Told to the server, a refusal is a poll that worked (issue 46).
        assert!(f.answer().0.targets.server.is_none(), "{id}");
        // The server drops an action closed as failed; offered again (a server not caught
        // up, an operator's Force update): still refused, and told again (issue 46).
        f.ddi.deploy(id, &format!("[{chunk}]"));
        assert!(f.answer().0.targets.server.is_none(), "{id}");
        let fb = f.ddi.feedback();
        assert_eq!(fb.len(), 2 * (i + 1), "{id}: {:?}", f.ddi.feedback_steps());
        for fb in &fb[2 * i..] {
            assert_eq!(fb.0, *id);
            assert_eq!(fb.1["status"]["result"]["finished"], "failure");
            assert!(fb.1["status"]["details"][0].as_str().unwrap().contains(why));
        }
    }
    assert_eq!(f.artifact_requests(), 0, "nothing was downloaded");
    assert_untouched(&f.paths, NAME, "1.0.0", &f.old_body, "2.0.0");
    assert!(!f.paths.cache_dir().join("svc-server-2.0.0.part").exists());
}

#[test]
fn huge_and_malformed_answers_are_errors_not_applied() {
    let f = setup("huge");
    let huge = format!("{{\"config\": {{}}, \"pad\": \"{}\"}}", "x".repeat(2 << 20));
    f.ddi.state.lock().unwrap().queued.extend([
        (200, vec![], huge.into_bytes()),
        (200, vec![], b"<html>".to_vec()),
    ]);
    let e = f.poll(None).unwrap_err();
    assert!(
        matches!(&e, ProtocolError::BadAnswer(m) if m.contains("larger than")),
        "{e}"
    );
    let e = f.poll(None).unwrap_err();
    assert!(
        matches!(&e, ProtocolError::BadAnswer(m) if m.contains("not a DDI")),
        "{e}"
    );
    // A base whose deploymentBase link leaves the server.
    let other =
        json!({"_links": {"deploymentBase": {"href": "http://localhost:1/x/deploymentBase/1"}}});
    f.ddi
        .state
        .lock()
        .unwrap()
        .queued
        .push_back((200, vec![], other.to_string().into_bytes()));
    let e = f.poll(None).unwrap_err();
    assert!(
        matches!(&e, ProtocolError::BadAnswer(m) if m.contains("points away")),
        "{e}"
    );
    assert!(f.ddi.feedback().is_empty());
}

#[test]
fn throttling_and_server_errors_follow_the_agents_retry_rule() {
    let f = setup("throttle");
    f.ddi.state.lock().unwrap().queued.extend([
        (
            429,
            vec![("Retry-After".to_string(), "7".to_string())],
            vec![],
        ),
        (429, vec![], vec![]),
        (503, vec![], b"maintenance".to_vec()),
    ]);
    for (status, after) in [(429, Some(7)), (429, None), (503, None)] {
        match f.poll(None).unwrap_err() {
            ProtocolError::Http {
                status: s,
                retry_after_secs,
                ..
            } => assert_eq!((s, retry_after_secs), (status, after)),
            e => panic!("{e}"),
        }
    }
    assert!(matches!(f.poll(None).unwrap(), PollOutcome::Changed { .. }));
}

#[test]
fn a_wrong_token_is_refused_and_never_quoted() {
    let f = setup("token");
    svc::fsutil::atomic_write(
        &f.paths.device("/etc/svc-hawkbit.token"),
        b"wrong-token-value-123",
        0o600,
    )
    .unwrap();
    let e = f.poll(None).unwrap_err();
    assert!(matches!(e, ProtocolError::Http { status: 401, .. }), "{e}");
    assert!(!e.to_string().contains("wrong-token-value-123"));
    std::fs::remove_file(f.paths.device("/etc/svc-hawkbit.token")).unwrap();
    let cfg = json!({"agent": {"svc-agent": {"hawkbit": {
        "server_url": f.ddi.url(), "tenant": TENANT, "controller_id": CONTROLLER, "auth": "target-token"}}}});
    let (cfg, _) = svc::config::parse_value(&cfg).unwrap();
    let e =
        HawkbitTransport::connect(&f.paths, cfg.agent.agent.hawkbit.as_ref().unwrap()).unwrap_err();
    assert!(e.to_string().contains("svc-hawkbit.token"), "{e}");
}

#[test]
fn a_cut_artifact_download_resumes_with_range() {
    let f = setup("resume");
    let body = fake_binary(NAME, "2.0.0", "ok", 600_000);
    f.ddi
        .deploy("40", &format!("[{}]", f.ddi.chunk(NAME, "2.0.0", &body)));
    f.ddi.state.lock().unwrap().cut_after.push_back(250_000);
    let target = f.answer().0.targets.server.unwrap();
    assert!(matches!(f.install(&target), Outcome::Activated { .. }));
    assert_eq!(active(&f.paths, NAME).1, body);
    let ranges = f.ddi.state.lock().unwrap().ranges.clone();
    assert!(
        ranges
            .iter()
            .any(|r| r.starts_with("bytes=") && r != "bytes=0-"),
        "{ranges:?}"
    );
    let rec = VersionRecords::load(&f.paths).unwrap();
    assert_eq!(rec.get(NAME).unwrap().probation.as_deref(), Some("2.0.0"));
}

#[test]
fn feedback_the_server_did_not_take_is_sent_again_after_a_restart() {
    let f = setup("refeed");
    let body = fake_binary(NAME, "2.0.0", "ok", 1000);
    f.ddi
        .deploy("50", &format!("[{}]", f.ddi.chunk(NAME, "2.0.0", &body)));
    let target = f.answer().0.targets.server.unwrap();
    f.install(&target);
    svc::update::end_server_probation(&f.paths, "2.0.0").unwrap();
    // The success is due; the server fails to take it twice (a restart between each poll:
    // a new transport every time). It is told once it answers.
    f.ddi.state.lock().unwrap().fail_feedback = 2;
    f.poll(None).unwrap();
    f.poll(None).unwrap();
    assert_eq!(f.ddi.feedback_steps(), ["proceeding/none"]);
    f.poll(None).unwrap();
    assert_eq!(
        f.ddi.feedback_steps(),
        ["proceeding/none", "closed/success"]
    );
    let rec: serde_json::Value = serde_json::from_slice(
        &std::fs::read(f.paths.state_dir().join("hawkbit-action.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["stage"], "closed");
}

#[test]
fn config_data_is_sent_when_the_server_asks() {
    let f = setup("configdata");
    f.answer();
    assert!(
        f.ddi.state.lock().unwrap().config_data.is_empty(),
        "not asked"
    );
    f.ddi.state.lock().unwrap().ask_config = true;
    f.answer();
    f.answer();
    let docs = f.ddi.state.lock().unwrap().config_data.clone();
    assert_eq!(docs.len(), 1, "sent once, when asked: {docs:?}");
    let d = &docs[0];
    assert_eq!(d["mode"], "merge");
    assert_eq!(d["data"]["svc_server_version"], "1.0.0");
    assert_eq!(d["data"]["sw_version"], "1.0.0");
    assert_eq!(d["data"]["arch"], std::env::consts::ARCH);
    // No `board`: the architecture, the board `svc-release swu` images name.
    assert_eq!(d["data"]["hw_boardname"], std::env::consts::ARCH);
    assert!(d["data"]["svc_agent_version"].is_string());
}

/// Issue 43: `hawkbit.board` is the `hw_boardname` the server is told (gooseBit assigns a
/// RAUC bundle only to a device whose board is the bundle's `compatible`).
#[test]
fn config_data_names_the_configured_board() {
    let f = setup("configdata-board");
    f.ddi.state.lock().unwrap().ask_config = true;
    let cfg = json!({"agent": {"svc-agent": {"hawkbit": {
        "server_url": f.ddi.url(), "tenant": TENANT, "controller_id": CONTROLLER,
        "auth": "target-token", "board": "svc-lab-amd64"}}}});
    let (cfg, _) = svc::config::parse_value(&cfg).unwrap();
    let mut t =
        HawkbitTransport::connect(&f.paths, cfg.agent.agent.hawkbit.as_ref().unwrap()).unwrap();
    t.poll(&serde_json::Value::Null, None).unwrap();
    let docs = f.ddi.state.lock().unwrap().config_data.clone();
    assert_eq!(docs.len(), 1, "{docs:?}");
    assert_eq!(docs[0]["data"]["hw_boardname"], "svc-lab-amd64");
    assert_eq!(docs[0]["data"]["arch"], std::env::consts::ARCH);
}

#[test]
fn bytes_that_do_not_match_the_deployments_hash_are_refused_and_reported() {
    let f = setup("wronghash");
    let body = fake_binary(NAME, "2.0.0", "ok", 5000);
    let chunk = f.ddi.chunk(NAME, "2.0.0", &body);
    // The server describes other bytes than it serves: a well-formed, wrong sha256.
    let wrong = sha256_hex(b"something else");
    f.ddi.deploy(
        "60",
        &format!("[{}]", chunk.replace(&sha256_hex(&body), &wrong)),
    );
    let target = f.answer().0.targets.server.unwrap();
    let e = f.try_install(&target).unwrap_err();
    assert!(e.to_string().contains("sha256"), "{e}");
    assert_untouched(&f.paths, NAME, "1.0.0", &f.old_body, "2.0.0");
    f.poll(None).unwrap();
    assert_eq!(
        f.ddi.feedback_steps(),
        ["proceeding/none", "closed/failure"]
    );
    let why = f.ddi.feedback()[1].1["status"]["details"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        why.contains("svc-server 2.0.0 was refused") && why.contains("svc-server 1.0.0 runs"),
        "{why}"
    );
}

#[test]
fn a_cancel_is_accepted_before_activation_and_rejected_after() {
    let f = setup("cancel");
    let body = fake_binary(NAME, "2.0.0", "ok", 1000);
    f.ddi
        .deploy("70", &format!("[{}]", f.ddi.chunk(NAME, "2.0.0", &body)));
    assert!(f.answer().0.targets.server.is_some());
    // Before activation: accepted, the target withdrawn, nothing activated.
    f.ddi.state.lock().unwrap().cancel = Some(("900".into(), "70".into()));
    let (answer, _) = f.answer();
    assert!(answer.targets.server.is_none(), "{answer:?}");
    let cf = f.ddi.state.lock().unwrap().cancel_feedback.clone();
    assert_eq!(cf.len(), 1);
    assert_eq!(cf[0].0, "900");
    assert_eq!(cf[0].1["status"]["execution"], "closed");
    assert_eq!(cf[0].1["status"]["result"]["finished"], "success");
    assert_untouched(&f.paths, NAME, "1.0.0", &f.old_body, "2.0.0");
    // The stopped action offered again by a server that has not caught up: not taken.
    f.ddi
        .deploy("70", &format!("[{}]", f.ddi.chunk(NAME, "2.0.0", &body)));
    assert!(f.answer().0.targets.server.is_none());

    // After activation: rejected; the action goes on and reports for itself.
    f.ddi
        .deploy("71", &format!("[{}]", f.ddi.chunk(NAME, "2.0.0", &body)));
    let target = f.answer().0.targets.server.unwrap();
    f.install(&target);
    f.ddi.state.lock().unwrap().cancel = Some(("901".into(), "71".into()));
    let (answer, _) = f.answer();
    assert!(answer.targets.server.is_some(), "the action goes on");
    let cf = f.ddi.state.lock().unwrap().cancel_feedback.clone();
    assert_eq!(cf.len(), 2);
    assert_eq!(cf[1].1["status"]["execution"], "rejected");
    svc::update::end_server_probation(&f.paths, "2.0.0").unwrap();
    f.answer();
    let steps: Vec<String> = f
        .ddi
        .feedback()
        .iter()
        .filter(|(id, _)| id == "71")
        .map(|(_, d)| d["status"]["execution"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(steps, ["proceeding", "downloaded", "closed"]);
}

/// An SWUpdate image of `files` (name, version, bytes) whose sw-description says `desc_body`
/// for each (a lie when it differs), signed by `sign` when given.
pub(crate) fn swu_image(
    files: &[(&str, &str, &[u8])],
    desc_body: &[&[u8]],
    sign: Option<&dyn Fn(&Artifact) -> String>,
    extra: Option<(&str, &[u8])>,
) -> Vec<u8> {
    use svc::update::swu;
    let images: Vec<swu::Image> = files
        .iter()
        .zip(desc_body)
        .map(|((name, version, _), said)| {
            let a = Artifact {
                name: name.to_string(),
                version: version.to_string(),
                url: String::new(),
                sha256: Some(sha256_hex(said)),
                size: Some(said.len() as u64),
                signature: None,
                identity: None,
            };
            swu::Image {
                filename: name.to_string(),
                name: name.to_string(),
                version: version.to_string(),
                sha256: sha256_hex(said),
                signature: sign.map(|s| s(&a)),
            }
        })
        .collect();
    let desc = swu::sw_description(files[0].1, svc::update::this_target(), &images);
    let mut entries: Vec<(&str, &[u8])> = vec![("sw-description", desc.as_bytes())];
    entries.extend(files.iter().map(|(n, _, b)| (*n, *b)));
    entries.extend(extra);
    let mut out = Vec::new();
    swu::write_newc(&mut out, &entries).unwrap();
    out
}

/// A deployment chunk for an image, served by the DDI test server (a hawkBit gives sha256,
/// sha1 and md5; gooseBit's sha1-only shape is in `hawkbit_goosebit.rs`).
pub(crate) fn swu_chunk(f: &Fixture, version: &str, image: &[u8]) -> String {
    f.ddi.chunk("image", version, image).replace(
        &format!("\"filename\": \"image-{version}\""),
        &format!("\"filename\": \"image-{version}.swu\""),
    )
}

#[test]
fn swu_images_are_taken_apart_by_the_engine_and_hostile_ones_refused_whole() {
    let f = setup("swu");
    let sign = install_vendor_key(&f.paths);
    let body = fake_binary(NAME, "2.0.0", "ok", 1000);
    let other = fake_binary(NAME, "2.0.0", "exit1", 1000);
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "41",
            swu_image(&[(NAME, "2.0.0", &body)], &[&other], Some(&sign), None),
            "2.0.0",
            "does not match sw-description",
        ),
        (
            "42",
            swu_image(&[(NAME, "2.0.0", &body)], &[&body], None, None),
            "2.0.0",
            "no signature",
        ),
        (
            "43",
            swu_image(
                &[(NAME, "2.0.0", &body)],
                &[&body],
                Some(&sign),
                Some(("evil", b"x")),
            ),
            "2.0.0",
            "does not name",
        ),
        (
            "44",
            swu_image(&[(NAME, "2.0.0", &body)], &[&body], Some(&sign), None),
            "2.0.1",
            "sw-description says version 2.0.0",
        ),
    ];
    for (i, (id, image, offered, why)) in cases.iter().enumerate() {
        f.ddi
            .deploy(id, &format!("[{}]", swu_chunk(&f, offered, image)));
        assert!(f.answer().0.targets.server.is_none(), "{id}");
        // Offered again (a server not caught up, Force update): over for this agent, not
        // fetched again (not a transfer fault), told again.
        let fetched = f.artifact_requests();
        f.ddi
            .deploy(id, &format!("[{}]", swu_chunk(&f, offered, image)));
        assert!(f.answer().0.targets.server.is_none());
        assert_eq!(f.artifact_requests(), fetched, "{id}");
        let fb = f.ddi.feedback();
        assert_eq!(fb.len(), 2 * (i + 1), "{id}: {:?}", f.ddi.feedback_steps());
        for fb in &fb[2 * i..] {
            assert_eq!(fb.1["status"]["result"]["finished"], "failure");
            assert!(fb.1["status"]["details"][0].as_str().unwrap().contains(why));
        }
        assert_untouched(&f.paths, NAME, "1.0.0", &f.old_body, "2.0.0");
        assert!(
            !f.paths.cache_dir().join("swu/files").exists(),
            "{id}: nothing left"
        );
    }
    // A good image: its file is the engine's target, checked again and activated there.
    let image = swu_image(&[(NAME, "2.0.0", &body)], &[&body], Some(&sign), None);
    f.ddi
        .deploy("45", &format!("[{}]", swu_chunk(&f, "2.0.0", &image)));
    let t = f
        .answer()
        .0
        .targets
        .server
        .expect("svc-server out of the image");
    assert!(t.url.starts_with("file://"), "{t:?}");
    assert_eq!(t.sha256.as_deref(), Some(sha256_hex(&body).as_str()));
    assert!(matches!(f.install(&t), Outcome::Activated { .. }));
    assert_eq!(active(&f.paths, NAME).1, body);
    // Polled again while the action runs: not downloaded again.
    let before = f.artifact_requests();
    f.poll(None).unwrap();
    assert_eq!(f.artifact_requests(), before);
}

/// Issue 40, finding 5: on a device with a vendor key, a machine config inside an image
/// is authority from outside like a binary: without `svc-signature` it is refused as a wrong
/// one is, the action fails once with the reason, and nothing of it is applied. Signed, it
/// is the answer's config.
#[test]
fn a_config_in_an_image_without_a_valid_signature_is_refused_on_a_keyed_device() {
    let f = setup("swu-config");
    let sign = install_vendor_key(&f.paths);
    let cfg = serde_json::to_vec(&json!({"modules": [{"type": "local", "name": "evil",
        "module_id": "x:evil", "executable_path": "/bin/true"}]}))
    .unwrap();
    let wrong = |a: &Artifact| {
        sign(&Artifact {
            version: "other".into(),
            ..a.clone()
        })
    };
    type Signer<'a> = Option<&'a dyn Fn(&Artifact) -> String>;
    let cases: Vec<(&str, Signer, &str)> = vec![
        ("51", None, "no signature"),
        ("52", Some(&wrong), "bad signature"),
    ];
    for (i, (id, signer, why)) in cases.into_iter().enumerate() {
        let image = swu_image(&[("config", "7", &cfg)], &[&cfg], signer, None);
        f.ddi
            .deploy(id, &format!("[{}]", swu_chunk(&f, "7", &image)));
        assert!(f.answer().0.config.is_none(), "{id}: a config got through");
        assert!(f.answer().0.config.is_none(), "{id}: a config got through");
        let fb = f.ddi.feedback();
        assert_eq!(fb.len(), i + 1, "{id}: {:?}", f.ddi.feedback_steps());
        assert_eq!(fb[i].1["status"]["result"]["finished"], "failure");
        let details = fb[i].1["status"]["details"][0].as_str().unwrap();
        assert!(details.contains(why), "{id}: {details}");
        assert!(!f.paths.state_dir().join("config.json").exists());
    }
    let image = swu_image(&[("config", "7", &cfg)], &[&cfg], Some(&sign), None);
    f.ddi
        .deploy("53", &format!("[{}]", swu_chunk(&f, "7", &image)));
    let got = f.answer().0.config.expect("the signed config");
    assert_eq!(got["modules"][0]["name"], "evil");
}

/// The action the base names is gone when its deployment is read (cancelled and removed, or
/// another assigned, between the two requests): nothing to do now, and the poll worked, so
/// the next one comes at the server's interval. Before, the 404 was a failed poll under the
/// rule for other 4xx: an hour with no poll at all.
#[test]
fn a_deployment_gone_between_the_base_and_its_read_is_no_failed_poll() {
    let f = setup("deployment-gone");
    let base = format!("/{TENANT}/controller/v1/{CONTROLLER}");
    let doc = json!({"config": {"polling": {"sleep": "00:00:05"}}, "_links": {"deploymentBase":
        {"href": format!("{}{base}/deploymentBase/99?c=1", f.ddi.url())}}});
    f.ddi
        .state
        .lock()
        .unwrap()
        .queued
        .push_back((200, Vec::new(), doc.to_string().into_bytes()));
    let (answer, etag) = f.answer();
    assert_eq!(answer.targets, svc::protocol::Targets::default());
    assert_eq!(answer.poll_interval_secs, Some(5));
    // No ETag kept: a base that still names the link is read whole, the deployment again.
    assert_eq!(etag, None);
}
