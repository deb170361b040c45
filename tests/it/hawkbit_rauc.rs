//! OS images from hawkBit (issue 43): a deployment chunk whose artifact is a RAUC bundle goes
//! through the one OS engine (`osimage`, the daemon's `agent::os`), the same as an offer on
//! the agent's own protocol. The real daemon on the hawkBit backend against the DDI test
//! server (`ddi_server.rs`), and the RAUC stand-in on a private bus with the test as the boot
//! loader (`os_rauc.rs`). What the server hears: `closed` + `success` only once the health
//! gate passed on the new slot (the action id kept on disk across the reboot); `failure` with
//! the reason after a rollback (told by the old slot's agent), RAUC's refusal, or a download
//! that is not the server's bytes; the old slot untouched then.
use crate::common::sandbox::*;
use crate::ddi_server::{DdiServer, CONTROLLER, TENANT};
use crate::os_rauc::{bundle, config, good, install_server, Machine, COMPATIBLE, CRASHING_SERVER};
use crate::update_support::sha256_hex;
use serde_json::json;

/// A machine of the RAUC stand-in whose config names the DDI test server (svc-server kept
/// as in `os_rauc`).
fn machine(name: &str, ddi: &DdiServer) -> Machine {
    let m = Machine::new(name, true);
    crate::hawkbit_daemon::on_hawkbit(&m.sb, ddi, &hawkbit_config(config(), ddi));
    m
}

/// `cfg` naming the DDI test server.
fn hawkbit_config(mut cfg: serde_json::Value, ddi: &DdiServer) -> serde_json::Value {
    cfg["agent"]["svc-agent"] = json!({"hawkbit": {"server_url": ddi.url(), "tenant": TENANT,
        "controller_id": CONTROLLER, "auth": "target-token"}});
    cfg
}

/// Offers `served` as RAUC bundle `version` in action `id`, the deployment saying the size
/// and sha256 of `body` (gooseBit's shape: the chunk named after its `.raucb` file).
fn deploy(ddi: &DdiServer, id: &str, version: &str, body: &[u8], served: &[u8]) {
    deploy_in(ddi, id, version, body, served, ("forced", "available"));
}

/// `deploy` with the server's `update` (`forced`, `skip`) and `maintenanceWindow`
/// (`available`, `unavailable`).
fn deploy_in(
    ddi: &DdiServer,
    id: &str,
    version: &str,
    body: &[u8],
    served: &[u8],
    (update, window): (&str, &str),
) {
    let file = format!("lab-{version}.raucb");
    ddi.state
        .lock()
        .unwrap()
        .artifacts
        .insert(file.clone(), served.to_vec());
    let href = format!("{}/artifacts/{file}", ddi.url());
    let chunk = format!(
        r#"[{{"part": "os", "version": "{version}", "name": "{file}", "artifacts": [{{"filename": "{file}", "size": {}, "hashes": {{"sha256": "{}"}}, "_links": {{"download": {{"href": "{href}"}}}}}}]}}]"#,
        body.len(),
        sha256_hex(body)
    );
    ddi.deploy_with(id, &chunk, "forced", update, window);
}

/// The `closed` feedback of action `id`, once it came: (finished, details).
fn closed(ddi: &DdiServer, id: &str) -> Option<(String, String)> {
    ddi.feedback()
        .iter()
        .find(|(a, d)| a == id && d["status"]["execution"] == "closed")
        .map(|(_, d)| {
            (
                d["status"]["result"]["finished"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string(),
                d["status"]["details"].to_string(),
            )
        })
}

/// Waits for `n` more polls of the DDI base resource.
fn wait_ddi_polls(ddi: &DdiServer, n: usize) {
    let polls = || {
        ddi.state
            .lock()
            .unwrap()
            .requests
            .iter()
            .filter(|(m, p, _)| m == "GET" && p.ends_with(&format!("/controller/v1/{CONTROLLER}")))
            .count()
    };
    let start = polls();
    wait_for(&format!("{n} more polls of the DDI server"), 120, || {
        polls() >= start + n
    });
}

fn wait_closed(m: &Machine, ddi: &DdiServer, id: &str) -> (String, String) {
    wait_for(&format!("action {id} closed"), 180, || {
        closed(ddi, id).is_some()
    });
    let c = closed(ddi, id).unwrap();
    let _ = &m.sb;
    c
}

/// Installed, rebooted into, gate passed, marked good: `closed` + `success` only then, told
/// by the new slot's agent from the action record the old slot's agent wrote.
#[test]
fn a_rauc_bundle_from_hawkbit_is_closed_success_only_after_its_health_gate() {
    let ddi = DdiServer::start();
    let mut m = machine("hb-os-good", &ddi);
    let b = good("2.0");
    deploy(&ddi, "41", "2.0", &b, &b);
    m.start(&[]);
    m.wait_reboots(1);
    m.wait_os("the reboot in the status", |o| o["state"] == "rebooting");
    {
        let f = m.fake();
        assert_eq!(f.installs.len(), 1, "{}", m.sb.log());
        assert!(f.installs[0].ends_with("/opt/svc/os/bundle-2.0.raucb"));
        assert_eq!(f.primary, 1);
    }
    assert!(
        closed(&ddi, "41").is_none(),
        "closed before the reboot: {:?}",
        ddi.action_steps("41")
    );
    // The power goes with the reboot: the action id lives on in the record on disk.
    m.boot(false, &[]);
    let (finished, details) = wait_closed(&m, &ddi, "41");
    assert_eq!(finished, "success", "{details}; {}", m.logs());
    assert!(
        m.fake()
            .marks
            .contains(&("good".to_string(), "booted".to_string())),
        "success told before the slot was marked good"
    );
    assert_eq!(m.os()["version"], "2.0");
    assert_eq!(m.os()["booted_slot"], "rootfs.1");
    let s = ddi.action_steps("41");
    assert_eq!(
        s.first().map(String::as_str),
        Some("proceeding/none"),
        "{s:?}"
    );
    assert_eq!(
        s.iter().filter(|x| x.starts_with("closed")).count(),
        1,
        "{s:?}"
    );
    wait_ddi_polls(&ddi, 3);
    assert_eq!(m.fake().installs.len(), 1, "installed again");
    assert_eq!(m.reboots(), 1);
}

/// svc-server crashes on the new OS: rolled back, and the old slot's agent tells the server
/// `closed` + `failure` with why; nothing `success` before.
#[test]
fn a_rauc_bundle_whose_gate_fails_is_told_failure_by_the_old_slot() {
    let ddi = DdiServer::start();
    let mut m = machine("hb-os-gate-fail", &ddi);
    let b = good("2.0");
    deploy(&ddi, "42", "2.0", &b, &b);
    m.start(&[]);
    m.wait_reboots(1);
    install_server(&m.sb, CRASHING_SERVER);
    m.boot(false, &[]);
    m.wait_reboots(2);
    // The failing slot's agent polls on until the power goes: it tells nothing final.
    wait_ddi_polls(&ddi, 2);
    assert!(
        closed(&ddi, "42").is_none(),
        "closed on the failing slot: {:?}",
        ddi.action_steps("42")
    );
    install_server(&m.sb, FAKE_SERVER);
    m.boot(false, &[]);
    let (finished, details) = wait_closed(&m, &ddi, "42");
    assert_eq!(finished, "failure", "{details}");
    assert!(
        details.contains("rolled back") && details.contains("svc-server crashed"),
        "{details}"
    );
    assert!(details.contains("OS 1.0 runs"), "{details}");
    assert_eq!(m.os()["booted_slot"], "rootfs.0");
    wait_ddi_polls(&ddi, 3);
    assert_eq!(m.fake().installs.len(), 1, "a rolled back version again");
}

/// The trust rule: on a device with a vendor key, a bundle from hawkBit (which carries no
/// ed25519 signature) is vouched for by RAUC's keyring alone: one signed with another RAUC
/// key is refused by RAUC, the action fails with RAUC's reason, the slots stay as they were.
#[test]
fn a_bundle_rauc_refuses_fails_the_action_and_leaves_the_slots() {
    let ddi = DdiServer::start();
    let mut m = machine("hb-os-rauc-refuses", &ddi);
    std::fs::write(
        m.sb.root.join("etc/svc-signing.pub"),
        format!("{}\n", "ab".repeat(32)),
    )
    .unwrap();
    let b = bundle("2.0", COMPATIBLE, "stranger", 1000);
    deploy(&ddi, "43", "2.0", &b, &b);
    m.start(&[]);
    let (finished, details) = wait_closed(&m, &ddi, "43");
    assert_eq!(finished, "failure", "{details}");
    assert!(
        details.contains("signature verification failed"),
        "{details}"
    );
    let f = m.fake();
    assert_eq!(f.installs.len(), 1, "RAUC is the one to judge the bundle");
    assert_eq!((f.booted, f.primary), (0, 0));
    drop(f);
    assert_eq!(m.reboots(), 0);
    assert_eq!(m.sb.status()["svc_server"]["running"], json!(true));
}

/// Bytes that are not the server's (a wrong hash, a truncated file): the action fails
/// naming why, RAUC never sees a byte, nothing is left on the data partition.
#[test]
fn a_bundle_not_matching_the_deployment_fails_before_rauc() {
    let ddi = DdiServer::start();
    let mut m = machine("hb-os-mismatch", &ddi);
    let b = good("2.0");
    let mut other = b.clone();
    other[10] ^= 1;
    deploy(&ddi, "44", "2.0", &b, &other);
    m.start(&[]);
    let (finished, details) = wait_closed(&m, &ddi, "44");
    assert_eq!(finished, "failure", "{details}");
    assert!(details.contains("sha256"), "{details}");
    let c = good("3.0");
    deploy(&ddi, "45", "3.0", &c, &c[..c.len() / 2]);
    let (finished, details) = wait_closed(&m, &ddi, "45");
    assert_eq!(finished, "failure", "{details}");
    assert!(details.contains("size"), "{details}");
    assert!(m.fake().installs.is_empty());
    assert_eq!(m.reboots(), 0);
    let left: Vec<_> = std::fs::read_dir(m.sb.root.join("opt/svc/os"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// A bundle larger than the space left on the data partition: not downloaded, RAUC not
/// asked, no reboot; the status says why, and the action is not told `success`.
#[test]
fn a_bundle_larger_than_the_space_left_is_not_downloaded() {
    let ddi = DdiServer::start();
    let mut m = machine("hb-os-space", &ddi);
    let _fs = crate::update_support::SmallFs::mount(&m.sb.root.join("opt/svc/os"), "4m");
    let b = bundle("2.0", COMPATIBLE, "lab", 6 << 20);
    deploy(&ddi, "46", "2.0", &b, &b);
    m.start(&[]);
    m.wait_os("the failure", |o| {
        o["last_result"]
            .as_str()
            .is_some_and(|r| r.contains("free space"))
    });
    assert!(m.fake().installs.is_empty());
    assert_eq!(m.reboots(), 0);
    assert!(!m.sb.root.join("opt/svc/os/bundle-2.0.raucb.part").exists());
    assert_eq!(ddi.state.lock().unwrap().served, 0, "bytes downloaded");
    assert!(closed(&ddi, "46").is_none(), "{:?}", ddi.action_steps("46"));
}

/// Another action offered while RAUC writes the first one's bundle: the install goes on,
/// the second waits (said), RAUC is asked once; a cancel of an OS action is rejected (a
/// slot being written is not withdrawn half-way).
#[test]
fn an_offer_while_an_install_runs_waits_for_it() {
    let ddi = DdiServer::start();
    let m = &mut machine("hb-os-second-offer", &ddi);
    m.fake().hold = true;
    let b = good("2.0");
    deploy(&ddi, "47", "2.0", &b, &b);
    m.start(&[]);
    wait_for("RAUC to be installing", 120, || {
        m.fake().installs.len() == 1
    });
    ddi.state.lock().unwrap().cancel = Some(("c1".into(), "47".into()));
    wait_for("the cancel answered", 120, || {
        !ddi.state.lock().unwrap().cancel_feedback.is_empty()
    });
    let answer = ddi.state.lock().unwrap().cancel_feedback[0].1.clone();
    assert_eq!(answer["status"]["execution"], "rejected", "{answer}");
    // The action is read again after the cancel (the base changed): only then is another
    // action assigned, or that read would meet the new one's id (a 404, an hour's wait).
    let seen = ddi.state.lock().unwrap().requests.len();
    wait_for("action 47 read again after the cancel", 120, || {
        let s = ddi.state.lock().unwrap();
        s.requests[seen.min(s.requests.len())..]
            .iter()
            .any(|(m, p, _)| m == "GET" && p.contains("/deploymentBase/47"))
    });
    let c = good("3.0");
    deploy(&ddi, "48", "3.0", &c, &c);
    wait_for("the second offer's wait said", 120, || {
        m.sb.log()
            .contains("OS 3.0 offered while OS 2.0 is being installed")
    });
    assert_eq!(m.fake().installs.len(), 1);
    m.fake().hold = false;
    m.wait_reboots(1);
    assert_eq!(m.fake().versions[1].as_deref(), Some("2.0"));
}

/// Power cuts during RAUC's write and during the new slot's first boot (its gate): the
/// action outlives both on disk, the server never hears anything final before the gate
/// passes, and then hears `closed` + `success` once.
#[test]
fn power_cuts_during_the_install_and_the_gate_end_in_one_success() {
    let ddi = DdiServer::start();
    let mut m = machine("hb-os-cuts", &ddi);
    m.fake().hold = true;
    let b = good("2.0");
    deploy(&ddi, "49", "2.0", &b, &b);
    m.start(&[]);
    wait_for("RAUC to be installing", 120, || {
        m.fake().installs.len() == 1
    });
    m.wait_os("the install under way", |o| o["state"] == "installing");
    // Cut 1: during the install. The old slot boots; the install is asked for again.
    m.boot(false, &[]);
    m.wait_reboots(1);
    assert_eq!(m.fake().installs.len(), 2);
    // Cut 2: the new slot's first boot, inside its gate (svc-server's probation is long).
    m.boot(false, &[("SVC_AGENT_PROBATION_SECS", "3600")]);
    m.wait_os("the gate on the new slot", |o| o["state"] == "gate");
    wait_ddi_polls(&ddi, 2);
    assert!(closed(&ddi, "49").is_none(), "{:?}", ddi.action_steps("49"));
    m.boot(false, &[]);
    let (finished, details) = wait_closed(&m, &ddi, "49");
    assert_eq!(finished, "success", "{details}; {}", m.logs());
    assert_eq!(m.fake().booted, 1);
    wait_ddi_polls(&ddi, 2);
    let s = ddi.action_steps("49");
    assert_eq!(
        s.iter().filter(|x| x.starts_with("closed")).count(),
        1,
        "{s:?}"
    );
}

/// Attack (issue 43): a hawkBit RAUC deployment outside the maintenance window (the
/// server's, `maintenanceWindow: unavailable`, then the machine's own) was installed by RAUC
/// at once, which made the new slot the next boot: a cut booted it outside the window. Now
/// the bundle is downloaded and kept, RAUC is not asked, a cut boots the old slot; in the
/// window it is installed from the kept bundle (fetched once) and `closed` + `success`
/// follows the gate.
#[test]
fn a_rauc_deployment_outside_the_window_waits_downloaded_before_rauc() {
    use crate::os_rauc::{window_closed, window_open, UTC};
    let ddi = DdiServer::start();
    let mut m = machine("hb-os-window", &ddi);
    let b = good("2.0");
    deploy_in(&ddi, "45", "2.0", &b, &b, ("forced", "unavailable"));
    m.start(&UTC);
    let downloaded_waiting = |what: &'static str| {
        move |o: &serde_json::Value| {
            o["state"] == "downloaded" && o["waiting"].as_str().is_some_and(|w| w.contains(what))
        }
    };
    m.wait_os("the wait for the server's window", |o| {
        o["waiting"]
            .as_str()
            .is_some_and(|w| w.contains("update server"))
    });
    wait_ddi_polls(&ddi, 2);
    {
        let f = m.fake();
        assert!(f.installs.is_empty(), "RAUC installed outside the window");
        assert_eq!((f.booted, f.primary), (0, 0));
    }
    assert_eq!(m.os()["state"], "downloaded", "{}", m.os());
    // A cut; the server's window opens but the machine's own is closed: still waiting.
    m.power_cycle(false);
    assert_eq!(m.fake().booted, 0);
    let cache = |sb: &Sandbox, cfg| {
        crate::hawkbit_daemon::cache_config(
            sb,
            &hawkbit_config(cfg, &ddi),
            crate::ddi_server::TOKEN,
        )
    };
    cache(&m.sb, window_closed());
    deploy_in(&ddi, "45", "2.0", &b, &b, ("forced", "available"));
    m.start(&UTC);
    m.wait_os(
        "the wait for the machine's window",
        downloaded_waiting("maintenance window"),
    );
    wait_ddi_polls(&ddi, 2);
    assert!(
        m.fake().installs.is_empty(),
        "RAUC installed outside the window"
    );
    assert!(closed(&ddi, "45").is_none(), "{:?}", ddi.action_steps("45"));
    // The machine's window opens: installed from the kept bundle, rebooted, gate, success.
    m.power_off();
    cache(&m.sb, window_open());
    m.start(&UTC);
    m.wait_reboots(1);
    assert_eq!(m.fake().installs.len(), 1);
    m.boot(false, &UTC);
    let (finished, details) = wait_closed(&m, &ddi, "45");
    assert_eq!(finished, "success", "{details}; {}", m.logs());
    let fetched = ddi
        .state
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|(meth, p, _)| meth == "GET" && p.ends_with("lab-2.0.raucb"))
        .count();
    assert_eq!(fetched, 1, "the bundle was downloaded again");
}

/// `update: skip` for a RAUC bundle: downloaded and verified, RAUC never asked (it makes the
/// slot it writes the next boot); `downloaded`, told once the bundle is verified on the data
/// partition, ends the download-only action (it was told once RAUC had written the slot).
#[test]
fn a_download_only_rauc_deployment_is_downloaded_and_never_installed() {
    let ddi = DdiServer::start();
    let mut m = machine("hb-os-dlonly", &ddi);
    let b = good("2.0");
    deploy_in(&ddi, "46", "2.0", &b, &b, ("skip", "available"));
    m.start(&[]);
    wait_for("downloaded", 120, || {
        ddi.action_steps("46")
            .contains(&"downloaded/none".to_string())
    });
    wait_ddi_polls(&ddi, 2);
    let f = m.fake();
    assert!(
        f.installs.is_empty(),
        "RAUC installed a download-only action"
    );
    assert_eq!((f.booted, f.primary), (0, 0));
    drop(f);
    assert_eq!(m.reboots(), 0);
    assert_eq!(
        ddi.action_steps("46"),
        ["proceeding/none", "downloaded/none"]
    );
}
