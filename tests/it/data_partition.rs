//! Read-only root file systems with the agent's state on a data partition (issue 23,
//! docs/packaging.md "Read-only root file systems", docs/updates.md "A/B system updates"):
//! the run-time override of the state and credentials directories, the first boot of an
//! image with an empty data partition (`svc-agent seed` from the image's binary), and which
//! agent runs after an A/B slot switch (never a silent downgrade).
use crate::common::sandbox::wait_for;
use crate::update_support::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use svc::paths::Paths;
use svc::update::rollback::{load_boot, AGENT_MAX_STARTS};
use svc::update::{
    agent_boot_guard, mark_agent_healthy, seed_from_image, Engine, GuardOutcome, SeedOutcome,
    VersionRecords,
};

const STATE: &str = "/data/svc";
const CREDS: &str = "/data/etc";

fn data_paths(root: &Path) -> Paths {
    Paths::new(root)
        .with_locations(Some(STATE), Some(CREDS))
        .unwrap()
}

fn fresh_root(name: &str) -> PathBuf {
    let root = scratch().join("data-partition").join(name);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    root
}

/// `program ARGS --root ROOT` with the data partition's environment (as the unit's drop-in
/// sets it).
fn run_with_data_env(program: &Path, args: &[&str], root: &Path) -> Output {
    crate::common::spawn::output(
        Command::new(program)
            .args(args)
            .args(["--root", root.to_str().unwrap()])
            .env("SVC_STATE_DIR", STATE)
            .env("SVC_CREDENTIALS_DIR", CREDS),
    )
}

fn agent_version() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_svc-agent"))
        .args(["version", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["version"].as_str().unwrap().to_string()
}

#[test]
fn first_boot_of_a_read_only_image_seeds_an_empty_data_partition_and_runs() {
    let root = fresh_root("first-boot");
    let paths = data_paths(&root);
    // The image: its agent binary in /usr/lib/svc-agent, nothing in /opt/svc, nothing on /data.
    let image_agent = root.join("usr/lib/svc-agent/svc-agent");
    std::fs::create_dir_all(image_agent.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_svc-agent"), &image_agent).unwrap();
    let version = agent_version();

    let out = run_with_data_env(&image_agent, &["seed"], &root);
    assert!(
        out.status.success(),
        "seed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let link = std::fs::read_link(paths.bin_link("svc-agent")).unwrap();
    assert_eq!(link, PathBuf::from(format!("../cache/svc-agent-{version}")));
    assert_eq!(
        std::fs::read(paths.bin_link("svc-agent")).unwrap(),
        std::fs::read(&image_agent).unwrap(),
        "the image's binary is the first current version"
    );
    let rec = VersionRecords::load(&paths).unwrap();
    assert_eq!(
        rec.get("svc-agent").unwrap().current.as_deref(),
        Some(version.as_str())
    );
    assert!(
        load_boot(&paths).is_none(),
        "a first seed is not on probation"
    );
    assert!(
        !root.join("opt/svc").exists(),
        "nothing written to the read-only place"
    );

    // Every later start: nothing changes.
    let cached = paths.cache_dir().join(format!("svc-agent-{version}"));
    let mtime = std::fs::metadata(&cached).unwrap().modified().unwrap();
    let again = run_with_data_env(&image_agent, &["seed"], &root);
    assert!(again.status.success());
    assert_eq!(
        std::fs::metadata(&cached).unwrap().modified().unwrap(),
        mtime
    );

    // The seeded agent runs from the data partition with its credentials there, and proves
    // healthy (the known-good link is made).
    let app = root.join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(
        app.join("poll.json"),
        r#"{"config": {"components": [], "modules": [], "agent": {"svc-server": {"disable_subsystem": true}}}, "poll_interval_secs": 1}"#,
    )
    .unwrap();
    std::fs::create_dir_all(root.join("data/etc")).unwrap();
    let creds = root.join("data/etc/svc.json");
    std::fs::write(
        &creds,
        serde_json::json!({"cloud": {"app_address": format!("file://{}", app.display()), "id": "part-1", "secret": "data-secret-1"}}).to_string(),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut child = crate::common::spawn::spawn(
        Command::new(paths.bin_link("svc-agent"))
            .args(["run", "--root", root.to_str().unwrap()])
            .env("SVC_STATE_DIR", STATE)
            .env("SVC_CREDENTIALS_DIR", CREDS)
            .env("SVC_AGENT_FIRST_CONTACT_SECS", "5")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(root.join("agent.log")).unwrap()),
    );
    let stable = paths.bin_link("svc-agent.stable");
    wait_for("the seeded agent's first healthy loop", 60, || {
        stable.exists()
    });
    wait_for("status.json on the data partition", 60, || {
        paths.state_dir().join("status.json").is_file()
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !root.join("opt/svc").exists(),
        "nothing written to /opt/svc"
    );
    assert!(!root.join("etc/svc.json").exists());

    // The tools find the same place through the same environment.
    let doctor = run_with_data_env(
        Path::new(env!("CARGO_BIN_EXE_svc-agent")),
        &["doctor", "--json"],
        &root,
    );
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("data/etc/svc.json readable, mode"), "{text}");
    assert!(text.contains("data/svc is writable"), "{text}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_bad_run_time_location_is_a_usage_error_naming_the_variable() {
    let out = Command::new(env!("CARGO_BIN_EXE_svc-agent"))
        .args(["status", "--root", "/nonexistent"])
        .env("SVC_STATE_DIR", "data/svc")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"data/svc\" must be an absolute path") && err.contains("SVC_STATE_DIR"),
        "{err}"
    );
}

fn image(root: &Path, slot: &str, version: &str, behavior: &str) -> PathBuf {
    let p = root.join(format!("slot-{slot}/usr/lib/svc-agent/svc-agent"));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, fake_binary("svc-agent", version, behavior, 0)).unwrap();
    p
}

fn linked(paths: &Paths) -> String {
    active(paths, "svc-agent").0
}

#[test]
fn an_ab_switch_runs_the_newer_agent_and_never_downgrades_or_loses_state() {
    let root = fresh_root("ab-switch");
    let paths = data_paths(&root);
    // Slot A's image ships 0.2.0; the data partition is empty.
    let slot_a = image(&root, "a", "0.2.0", "ok");
    assert_eq!(
        seed_from_image(&paths, &slot_a, "0.2.0").unwrap(),
        SeedOutcome::Seeded {
            version: "0.2.0".into()
        }
    );
    // The agent updates itself to 0.3.0 on the data partition and writes state there.
    let body = fake_binary("svc-agent", "0.3.0", "ok", 0);
    let src = root.join("src-0.3.0");
    std::fs::write(&src, &body).unwrap();
    let a = artifact(
        "svc-agent",
        "0.3.0",
        &format!("file://{}", src.display()),
        &body,
    );
    Engine::new(paths.clone(), test_opts()).install(&a).unwrap();
    assert_eq!(linked(&paths), "0.3.0");
    // 0.3.0 starts and proves healthy (its probation ends, it becomes the known-good one).
    mark_agent_healthy(&paths, "0.3.0").unwrap();
    let marker = paths.state_dir().join("logqueue-marker");
    std::fs::write(&marker, "queued log lines").unwrap();

    // A switch to a slot whose image is older (0.2.0, or slot A again): 0.3.0 stays.
    for _ in 0..2 {
        assert_eq!(
            seed_from_image(&paths, &slot_a, "0.2.0").unwrap(),
            SeedOutcome::KeptNewer {
                image: "0.2.0".into(),
                running: "0.3.0".into()
            }
        );
    }
    assert_eq!(linked(&paths), "0.3.0");
    assert_eq!(std::fs::read(paths.bin_link("svc-agent")).unwrap(), body);
    let rec = VersionRecords::load(&paths).unwrap();
    assert_eq!(
        rec.get("svc-agent").unwrap().current.as_deref(),
        Some("0.3.0")
    );
    assert!(load_boot(&paths).is_none(), "nothing on probation");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "queued log lines"
    );

    // A switch to slot B whose image brings 0.4.0: it becomes current, on probation, with
    // 0.3.0 kept to roll back to.
    let slot_b = image(&root, "b", "0.4.0", "exit1");
    assert_eq!(
        seed_from_image(&paths, &slot_b, "0.4.0").unwrap(),
        SeedOutcome::Upgraded {
            from: "0.3.0".into(),
            to: "0.4.0".into()
        }
    );
    assert_eq!(linked(&paths), "0.4.0");
    let rec = VersionRecords::load(&paths).unwrap();
    assert_eq!(
        rec.get("svc-agent").unwrap().previous.as_deref(),
        Some("0.3.0")
    );
    assert_eq!(load_boot(&paths).unwrap().version, "0.4.0");

    // 0.4.0 never becomes healthy: the boot guard rolls back to 0.3.0 after its starts, and
    // the next start's seed does not bring 0.4.0 back (no seed/rollback loop).
    let mut outcome = GuardOutcome::Stable;
    for _ in 0..=AGENT_MAX_STARTS {
        assert_eq!(
            seed_from_image(&paths, &slot_b, "0.4.0").unwrap(),
            SeedOutcome::Unchanged {
                version: "0.4.0".into()
            }
        );
        outcome = agent_boot_guard(&paths).unwrap();
    }
    assert_eq!(
        outcome,
        GuardOutcome::RolledBack {
            from: "0.4.0".into(),
            to: "0.3.0".into()
        }
    );
    assert_eq!(
        seed_from_image(&paths, &slot_b, "0.4.0").unwrap(),
        SeedOutcome::ImageMarkedBad {
            image: "0.4.0".into(),
            running: "0.3.0".into()
        }
    );
    assert_eq!(linked(&paths), "0.3.0");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "queued log lines"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_dangling_link_on_the_data_partition_is_seeded_again() {
    // A data partition restored from a backup without its cache, or a cache lost to a bad
    // card: the link points nowhere, so the image's agent is put back.
    let root = fresh_root("dangling");
    let paths = data_paths(&root);
    let slot_a = image(&root, "a", "0.2.0", "ok");
    seed_from_image(&paths, &slot_a, "0.2.0").unwrap();
    std::fs::remove_file(paths.cache_dir().join("svc-agent-0.2.0")).unwrap();
    assert_eq!(
        seed_from_image(&paths, &slot_a, "0.2.0").unwrap(),
        SeedOutcome::Seeded {
            version: "0.2.0".into()
        }
    );
    assert_eq!(
        std::fs::read(paths.bin_link("svc-agent")).unwrap(),
        std::fs::read(&slot_a).unwrap()
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
#[ignore = "needs root: a read-only tmpfs mount (scripts/test-cargo.sh runs this)"]
fn doctor_and_install_name_a_state_directory_on_a_read_only_mount() {
    assert!(uid_is_root(), "needs root for a read-only mount");
    let root = fresh_root("ro-mount");
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
        .arg(&data)
        .status()
        .unwrap();
    assert!(st.success(), "mount a read-only tmpfs");
    let agent = Path::new(env!("CARGO_BIN_EXE_svc-agent"));
    let doctor = run_with_data_env(agent, &["doctor", "--json"], &root);
    let install = run_with_data_env(agent, &["install"], &root);
    let _ = Command::new("umount").arg(&data).status();
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{text}");
    assert!(text.contains("data/svc is on a read-only mount"), "{text}");
    let err = String::from_utf8_lossy(&install.stderr);
    assert!(!install.status.success());
    assert!(
        err.contains("data/svc is on a read-only file system"),
        "{err}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

fn uid_is_root() -> bool {
    // /proc/self/status: "Uid:\treal\teffective\t..."
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(|e| e == "0"))
        .unwrap_or(false)
}
