//! A cross-check of the DDI resources gooseBit lacks (`confirmationBase`, `cancelAction`)
//! against `hawkbit_mock`, a DDI mock nobody here wrote (the hawkbit-rs project's, from
//! crates.io): its documents are what the agent must read, and it answers a feedback only if
//! the body is exactly the one it expects (else `404`). So this checks both the documents the
//! agent reads and the bodies it sends against another reading of the DDI documentation
//! than `ddi_server.rs`. `installedBase` it does not serve (the agent does not read it).
use crate::update_support::*;
use hawkbit::ddi::{ConfirmationResponse, Execution, Finished, Type};
use hawkbit_mock::ddi::{ChunkProtocol, Deployment, DeploymentBuilder, ServerBuilder, Target};
use serde_json::json;
use svc::hawkbit::HawkbitTransport;
use svc::paths::Paths;
use svc::protocol::{PollAnswer, PollOutcome, Transport};

const NAME: &str = "svc-server";

/// The device: svc-server 1.0.0, the target's token, polling the mock as `target`.
struct Device {
    paths: Paths,
    url: String,
    controller: String,
    artifact: std::path::PathBuf,
}

impl Device {
    fn new(test: &str, url: &str, target: &Target) -> Device {
        let paths = sandbox(&format!("hawkbit-mock-{test}"));
        install_old(&paths, NAME, "1.0.0");
        let hawkbit::ddi::ClientAuthorization::TargetToken(token) = &target.client_auth else {
            panic!("the mock's default is a target token");
        };
        svc::fsutil::atomic_write(
            &paths.device("/etc/svc-hawkbit.token"),
            format!("{token}\n").as_bytes(),
            0o600,
        )
        .unwrap();
        let artifact = paths.root().join("svc-server-2.0.0");
        std::fs::write(&artifact, fake_binary(NAME, "2.0.0", "ok", 1000)).unwrap();
        Device {
            paths,
            url: url.to_string(),
            controller: target.name.clone(),
            artifact,
        }
    }

    /// A new transport for each poll, as after a restart: what it knows is on disk.
    fn transport(&self) -> HawkbitTransport {
        let cfg = json!({"agent": {"svc-agent": {"hawkbit": {
            "server_url": self.url, "tenant": "DEFAULT", "controller_id": self.controller,
            "auth": "target-token", "auto_confirm": true}}}});
        let (cfg, _) = svc::config::parse_value(&cfg).unwrap();
        HawkbitTransport::connect(&self.paths, cfg.agent.agent.hawkbit.as_ref().unwrap()).unwrap()
    }

    fn poll(&self) -> PollAnswer {
        match self
            .transport()
            .poll(&serde_json::Value::Null, None)
            .unwrap()
        {
            PollOutcome::Changed { answer, .. } => *answer,
            other => panic!("{other:?}"),
        }
    }

    /// Action `id` offering svc-server 2.0.0 (the mock serves the file with the token).
    fn deployment(&self, id: &str, confirm: bool) -> Deployment {
        let bytes = std::fs::read(&self.artifact).unwrap();
        let sha256 = sha256_hex(&bytes);
        // The mock lists md5 and sha1 too; the agent reads sha256.
        DeploymentBuilder::new(id, Type::Forced, Type::Forced)
            .confirmation_required(confirm)
            .chunk(
                ChunkProtocol::HTTP,
                "bApp",
                "2.0.0",
                NAME,
                vec![(
                    self.artifact.clone(),
                    &"0".repeat(32),
                    &"0".repeat(40),
                    &sha256,
                )],
            )
            .build()
    }

    fn install(&self, t: &svc::protocol::Target) {
        let out = crate::hawkbit::install_target(&self.paths, &self.transport(), t).unwrap();
        assert!(
            matches!(out, crate::update_support::Outcome::Activated { .. }),
            "{out:?}"
        );
    }
}

#[test]
fn hawkbit_mock_consent_then_a_cancel_before_activation() {
    let server = ServerBuilder::default().build();
    let target = server.add_target("kiosk-17");
    let dev = Device::new("consent-cancel", &server.base_url(), &target);
    // Consent: the action is sent for confirmation; with auto_confirm the agent confirms.
    target.push_deployment(dev.deployment("10", true));
    let confirmed = target.expect_confirmation_feedback(
        "10",
        None,
        ConfirmationResponse::Confirmed,
        vec!["confirmed by auto_confirm on the device"],
    );
    let answer = dev.poll();
    assert!(answer.targets.server.is_none(), "nothing before consent");
    assert_eq!(target.confirmation_hits(), 1);
    assert_eq!(confirmed.calls(), 1, "the mock took the confirmation");

    // Confirmed: the server offers it as a deployment; the agent takes it.
    target.push_deployment(dev.deployment("10", false));
    let proceeding = target.expect_deployment_feedback(
        "10",
        Execution::Proceeding,
        Finished::None,
        Some(json!({"cnt": 0, "of": 1})),
        vec!["0 of 1 running"],
    );
    let answer = dev.poll();
    let t = answer.targets.server.expect("offered");
    assert_eq!(t.version, "2.0.0");
    assert_eq!(
        proceeding.calls(),
        1,
        "the mock took the proceeding feedback"
    );

    // Cancelled before activation: accepted, the target withdrawn.
    target.cancel_action("10");
    let cancelled = target.expect_cancel_feedback(
        "10",
        Execution::Closed,
        Finished::Success,
        vec!["action 10 stopped before activation"],
    );
    let answer = dev.poll();
    assert!(answer.targets.server.is_none(), "{answer:?}");
    assert_eq!(target.cancel_action_hits(), 1);
    assert_eq!(cancelled.calls(), 1, "the mock took the cancel feedback");
    assert_eq!(active(&dev.paths, NAME).0, "1.0.0");
}

#[test]
fn hawkbit_mock_cancel_after_activation_is_rejected() {
    let server = ServerBuilder::default().build();
    let target = server.add_target("kiosk-18");
    let dev = Device::new("cancel-late", &server.base_url(), &target);
    target.push_deployment(dev.deployment("11", false));
    let proceeding = target.expect_deployment_feedback(
        "11",
        Execution::Proceeding,
        Finished::None,
        Some(json!({"cnt": 0, "of": 1})),
        vec!["0 of 1 running"],
    );
    let t = dev.poll().targets.server.expect("offered");
    assert_eq!(proceeding.calls(), 1);
    dev.install(&t);
    // Active, in probation: `downloaded`, then the cancel is rejected.
    let downloaded = target.expect_deployment_feedback(
        "11",
        Execution::Downloaded,
        Finished::None,
        None,
        vec!["verified and activated; in probation"],
    );
    target.cancel_action("11");
    let rejected = target.expect_cancel_feedback(
        "11",
        Execution::Rejected,
        Finished::None,
        vec!["action 11 is already active; it runs on to its probation"],
    );
    let answer = dev.poll();
    assert!(answer.targets.server.is_some(), "the action goes on");
    assert_eq!(
        downloaded.calls(),
        1,
        "the mock took the downloaded feedback"
    );
    assert_eq!(rejected.calls(), 1, "the mock took the rejection");
    // Through probation: `closed` + `success`, as the mock expects it.
    svc::update::end_server_probation(&dev.paths, "2.0.0").unwrap();
    let success = target.expect_deployment_feedback(
        "11",
        Execution::Closed,
        Finished::Success,
        None,
        vec!["running and through probation"],
    );
    dev.poll();
    assert_eq!(success.calls(), 1, "the mock took the success");
    assert_eq!(active(&dev.paths, NAME).0, "2.0.0");
}
