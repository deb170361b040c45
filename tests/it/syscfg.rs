//! agent-syscfg under a temporary `--root`: exact file contents, idempotence (effects counted),
//! revert, unsupported systems, and the real `apt-config` / `systemd-analyze` reading what the
//! agent wrote.
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use svc::config::model::SyscfgSection;
use svc::paths::Paths;
use svc::syscfg::{
    apply, journald, record, upgrades, Effects, RealEffects, Restarts, Setting, SettingState,
    SyscfgStatus, SystemFacts,
};

const DISTRO_AUTO: &str =
    "APT::Periodic::Update-Package-Lists \"1\";\nAPT::Periodic::Unattended-Upgrade \"1\";\n";
const DISTRO_UU: &str = "Unattended-Upgrade::Origins-Pattern {\n        \"origin=Debian,codename=${distro_codename},label=Debian\";\n        \"origin=Debian,codename=${distro_codename}-security,label=Debian-Security\";\n};\n";

/// Files go to the real temp root; commands are recorded (and fail when asked to).
#[derive(Default)]
struct Counting {
    writes: Vec<PathBuf>,
    removes: Vec<PathBuf>,
    runs: Vec<String>,
    fail_runs: bool,
    fail_writes_under: Option<PathBuf>,
}

impl Effects for Counting {
    fn write(&mut self, path: &Path, content: &[u8]) -> io::Result<()> {
        if let Some(p) = &self.fail_writes_under {
            if path.starts_with(p) {
                return Err(io::Error::other("injected write failure"));
            }
        }
        self.writes.push(path.to_path_buf());
        RealEffects.write(path, content)
    }
    fn remove(&mut self, path: &Path) -> io::Result<()> {
        self.removes.push(path.to_path_buf());
        RealEffects.remove(path)
    }
    fn run(&mut self, argv: &[&str]) -> Result<(), svc::syscfg::CommandError> {
        self.runs.push(argv.join(" "));
        if self.fail_runs {
            Err(svc::syscfg::CommandError::NotRun {
                argv: "injected".into(),
                why: "exit status 1".into(),
            })
        } else {
            Ok(())
        }
    }
}

struct Root {
    dir: PathBuf,
    paths: Paths,
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Root {
    fn empty(name: &str) -> Root {
        let dir = std::env::temp_dir().join(format!("svc-syscfg-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let paths = Paths::new(&dir);
        Root { dir, paths }
    }

    /// A Debian bookworm-like root: journald, apt-get, unattended-upgrades installed, the
    /// distribution's apt files, the upgrade timer enabled.
    fn debian(name: &str) -> Root {
        let r = Root::empty(name);
        r.put(
            "/etc/os-release",
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_CODENAME=bookworm\n",
        );
        r.put("/usr/lib/systemd/systemd-journald", "");
        r.put("/usr/bin/apt-get", "");
        r.put(
            "/var/lib/dpkg/status",
            "Package: apt\nStatus: install ok installed\n\nPackage: unattended-upgrades\nStatus: install ok installed\nVersion: 2.9\n",
        );
        r.put("/etc/apt/apt.conf.d/20auto-upgrades", DISTRO_AUTO);
        r.put("/etc/apt/apt.conf.d/50unattended-upgrades", DISTRO_UU);
        let wants = r.path("/etc/systemd/system/timers.target.wants");
        fs::create_dir_all(&wants).unwrap();
        symlink(
            "/lib/systemd/system/apt-daily-upgrade.timer",
            wants.join("apt-daily-upgrade.timer"),
        )
        .unwrap();
        r
    }

    fn path(&self, dev: &str) -> PathBuf {
        self.paths.device(dev)
    }
    fn put(&self, dev: &str, text: &str) {
        let p = self.path(dev);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    fn read(&self, dev: &str) -> Option<String> {
        fs::read_to_string(self.path(dev)).ok()
    }
    /// Facts as detected, but with restarts allowed so that they are counted.
    fn facts(&self) -> SystemFacts {
        let mut f = SystemFacts::detect(&self.paths);
        f.restarts = Restarts::Allowed;
        f
    }
    fn apply(&self, section: &SyscfgSection, fx: &mut Counting) -> SyscfgStatus {
        let facts = self.facts();
        apply(section, &self.paths, &facts, fx)
    }
    fn record(&self) -> record::WrittenFiles {
        record::WrittenFiles::load(&self.path(record::RECORD_PATH)).unwrap()
    }
}

fn section(agent_syscfg: &str) -> SyscfgSection {
    let text = format!(
        r#"{{"components": [], "modules": [], "agent": {{"agent-syscfg": {agent_syscfg}}}}}"#
    );
    match svc::config::parse_str(&text) {
        Ok((cfg, _)) => cfg.agent.syscfg,
        Err(r) => panic!("invalid test config: {r}"),
    }
}

fn logging(system: &str, runtime: &str) -> SyscfgSection {
    section(&format!(
        r#"{{"attributes": {{"logging": {{"system_max_use": "{system}", "runtime_max_use": "{runtime}"}}}}}}"#
    ))
}

fn upgrades_type(t: &str) -> SyscfgSection {
    section(&format!(
        r#"{{"attributes": {{"upgrades": {{"type": "{t}"}}}}}}"#
    ))
}

fn state(st: &SyscfgStatus, s: Setting) -> SettingState {
    st.get(s).unwrap().state.clone()
}

const JOURNALD_64_16: &str = "# Managed by svc-agent (agent-syscfg attributes.logging): the agent writes and removes\n# this file, and overwrites local edits. Put local settings in a file sorting after it.\n[Journal]\nSystemMaxUse=64M\nRuntimeMaxUse=16M\n";

#[test]
fn journald_dropin_exact_text_record_and_one_restart() {
    let r = Root::debian("jd-exact");
    let mut fx = Counting::default();
    let st = r.apply(&logging("64M", "16M"), &mut fx);
    assert_eq!(state(&st, Setting::Logging), SettingState::Applied);
    assert_eq!(r.read(journald::DROPIN).as_deref(), Some(JOURNALD_64_16));
    assert_eq!(fx.runs, ["systemctl restart systemd-journald.service"]);
    let rec = r.record();
    assert_eq!(rec.files.len(), 1);
    assert_eq!(rec.files[0].path, journald::DROPIN);
    assert_eq!(
        rec.files[0].sha256,
        record::sha256_hex(JOURNALD_64_16.as_bytes())
    );
    assert!(!rec.journald_restart_pending);
    // Upgrades were not asked for and nothing of theirs was touched.
    assert_eq!(state(&st, Setting::Upgrades), SettingState::Unchanged);
    assert_eq!(
        r.read("/etc/apt/apt.conf.d/20auto-upgrades").as_deref(),
        Some(DISTRO_AUTO)
    );
}

#[test]
fn journald_only_the_set_key_is_written() {
    let r = Root::debian("jd-one");
    let s = section(r#"{"attributes": {"logging": {"runtime_max_use": "8M"}}}"#);
    r.apply(&s, &mut Counting::default());
    let text = r.read(journald::DROPIN).unwrap();
    assert!(text.ends_with("[Journal]\nRuntimeMaxUse=8M\n"), "{text}");
    assert!(!text.contains("SystemMaxUse"));
}

#[test]
fn second_apply_writes_nothing_and_restarts_nothing() {
    let r = Root::debian("idem");
    let s = section(
        r#"{"attributes": {"logging": {"system_max_use": "64M", "runtime_max_use": "16M"}, "upgrades": {"type": "security"}}}"#,
    );
    let mut first = Counting::default();
    r.apply(&s, &mut first);
    // drop-in, two apt files, the record.
    assert_eq!(first.writes.len(), 4, "{:?}", first.writes);
    assert_eq!(first.runs.len(), 1);
    let before = fs::read(r.path(record::RECORD_PATH)).unwrap();

    let mut second = Counting::default();
    let st = r.apply(&s, &mut second);
    assert!(second.writes.is_empty(), "{:?}", second.writes);
    assert!(second.removes.is_empty());
    assert!(second.runs.is_empty(), "{:?}", second.runs);
    assert_eq!(state(&st, Setting::Logging), SettingState::Unchanged);
    assert_eq!(state(&st, Setting::Upgrades), SettingState::Unchanged);
    assert_eq!(fs::read(r.path(record::RECORD_PATH)).unwrap(), before);
}

#[test]
fn changing_a_limit_rewrites_and_restarts_once() {
    let r = Root::debian("jd-change");
    r.apply(&logging("64M", "16M"), &mut Counting::default());
    let mut fx = Counting::default();
    let st = r.apply(&logging("128M", "16M"), &mut fx);
    assert_eq!(state(&st, Setting::Logging), SettingState::Applied);
    assert_eq!(fx.runs.len(), 1);
    assert!(r
        .read(journald::DROPIN)
        .unwrap()
        .contains("SystemMaxUse=128M\n"));
}

#[test]
fn logging_disable_or_no_sizes_removes_the_dropin_and_restarts_once() {
    for off in [
        r#"{"attributes": {"logging": {"disable": true, "system_max_use": "64M"}}}"#,
        r#"{"attributes": {}}"#,
    ] {
        let r = Root::debian("jd-off");
        r.apply(&logging("64M", "16M"), &mut Counting::default());
        let mut fx = Counting::default();
        let st = r.apply(&section(off), &mut fx);
        assert_eq!(
            state(&st, Setting::Logging),
            SettingState::Reverted,
            "{off}"
        );
        assert_eq!(r.read(journald::DROPIN), None);
        assert_eq!(fx.runs, ["systemctl restart systemd-journald.service"]);
        assert!(r.record().files.is_empty());
        // And again: nothing left to do.
        let mut again = Counting::default();
        let st = r.apply(&section(off), &mut again);
        assert_eq!(state(&st, Setting::Logging), SettingState::Unchanged);
        assert!(again.runs.is_empty() && again.writes.is_empty());
    }
}

const AUTO_ON: &str =
    "APT::Periodic::Update-Package-Lists \"1\";\nAPT::Periodic::Unattended-Upgrade \"1\";\n";

fn header(t: &str) -> String {
    format!("// Managed by svc-agent (agent-syscfg attributes.upgrades.type \"{t}\"): the agent\n// writes and removes this file and overwrites local edits.\n")
}

#[test]
fn upgrades_files_exact_text_for_each_type() {
    let r = Root::debian("upg-text");
    let clear = "#clear Unattended-Upgrade::Allowed-Origins;\n#clear Unattended-Upgrade::Origins-Pattern;\nUnattended-Upgrade::Origins-Pattern {\n";

    let st = r.apply(&upgrades_type("all"), &mut Counting::default());
    assert_eq!(state(&st, Setting::Upgrades), SettingState::Applied);
    assert_eq!(r.read(upgrades::PERIODIC).unwrap(), header("all") + AUTO_ON);
    assert_eq!(
        r.read(upgrades::ORIGINS).unwrap(),
        header("all") + clear + "        \"origin=*\";\n};\n"
    );

    r.apply(&upgrades_type("security"), &mut Counting::default());
    assert_eq!(
        r.read(upgrades::PERIODIC).unwrap(),
        header("security") + AUTO_ON
    );
    assert_eq!(
        r.read(upgrades::ORIGINS).unwrap(),
        header("security")
            + clear
            + "        \"codename=${distro_codename}-security\";\n        \"archive=${distro_codename}-security\";\n        \"codename=${distro_codename},label=Debian-Security\";\n};\n"
    );

    let mut fx = Counting::default();
    r.apply(&upgrades_type("none"), &mut fx);
    assert_eq!(
        r.read(upgrades::PERIODIC).unwrap(),
        header("none") + "APT::Periodic::Unattended-Upgrade \"0\";\n"
    );
    assert_eq!(
        r.read(upgrades::ORIGINS),
        None,
        "none keeps no origins file"
    );
    assert!(fx.runs.is_empty(), "apt files need no restart");
    // The distribution's files are never touched.
    assert_eq!(
        r.read("/etc/apt/apt.conf.d/20auto-upgrades").as_deref(),
        Some(DISTRO_AUTO)
    );
    assert_eq!(
        r.read("/etc/apt/apt.conf.d/50unattended-upgrades")
            .as_deref(),
        Some(DISTRO_UU)
    );
    let paths: Vec<_> = r.record().files.into_iter().map(|f| f.path).collect();
    assert_eq!(paths, [upgrades::PERIODIC]);
}

#[test]
fn unsetting_the_type_reverts_the_apt_files() {
    let r = Root::debian("upg-unset");
    r.apply(&upgrades_type("all"), &mut Counting::default());
    let st = r.apply(&section(r#"{"attributes": {}}"#), &mut Counting::default());
    assert_eq!(state(&st, Setting::Upgrades), SettingState::Reverted);
    assert_eq!(r.read(upgrades::PERIODIC), None);
    assert_eq!(r.read(upgrades::ORIGINS), None);
    assert!(r.record().files.is_empty());
}

#[test]
fn disable_subsystem_reverts_exactly_what_was_written() {
    let r = Root::debian("revert");
    let s = section(
        r#"{"attributes": {"logging": {"system_max_use": "64M"}, "upgrades": {"type": "all"}}}"#,
    );
    r.apply(&s, &mut Counting::default());
    // Someone edits one of our files afterwards, and drops a file of their own next to ours.
    r.put(upgrades::ORIGINS, "// mine now\n");
    r.put(
        "/etc/apt/apt.conf.d/99local",
        "APT::Periodic::Unattended-Upgrade \"1\";\n",
    );

    let mut fx = Counting::default();
    let st = r.apply(&section(r#"{"disable_subsystem": true}"#), &mut fx);
    assert_eq!(state(&st, Setting::Logging), SettingState::Reverted);
    assert_eq!(state(&st, Setting::Upgrades), SettingState::Reverted);
    assert_eq!(r.read(journald::DROPIN), None);
    assert_eq!(r.read(upgrades::PERIODIC), None);
    assert_eq!(fx.runs.len(), 1, "journald restarted once: {:?}", fx.runs);
    // Left in place, with a warning saying so.
    assert_eq!(r.read(upgrades::ORIGINS).as_deref(), Some("// mine now\n"));
    let warnings = &st.get(Setting::Upgrades).unwrap().warnings;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(upgrades::ORIGINS) && w.contains("changed since")),
        "{warnings:?}"
    );
    // Foreign and distribution files untouched, the record empty.
    assert!(r.read("/etc/apt/apt.conf.d/99local").is_some());
    assert_eq!(
        r.read("/etc/apt/apt.conf.d/20auto-upgrades").as_deref(),
        Some(DISTRO_AUTO)
    );
    assert_eq!(r.record(), record::WrittenFiles::default());
    assert_eq!(fx.removes.len(), 2, "{:?}", fx.removes);

    // Disabled again: nothing to do at all.
    let mut again = Counting::default();
    let st = r.apply(&section(r#"{"disable_subsystem": true}"#), &mut again);
    assert!(again.writes.is_empty() && again.removes.is_empty() && again.runs.is_empty());
    assert_eq!(state(&st, Setting::Logging), SettingState::Unchanged);
}

#[test]
fn a_file_at_our_name_that_the_agent_did_not_write_is_never_removed() {
    let r = Root::debian("foreign");
    r.put(journald::DROPIN, "[Journal]\nSystemMaxUse=1G\n");
    let mut fx = Counting::default();
    let st = r.apply(&section(r#"{"disable_subsystem": true}"#), &mut fx);
    assert_eq!(
        r.read(journald::DROPIN).as_deref(),
        Some("[Journal]\nSystemMaxUse=1G\n")
    );
    assert!(fx.removes.is_empty() && fx.runs.is_empty() && fx.writes.is_empty());
    assert_eq!(state(&st, Setting::Logging), SettingState::Unchanged);
    assert!(st.get(Setting::Logging).unwrap().warnings[0].contains("not written by the agent"));
}

#[test]
fn a_file_someone_deleted_is_forgotten_and_journald_restarted() {
    let r = Root::debian("vanished");
    r.apply(&logging("64M", "16M"), &mut Counting::default());
    fs::remove_file(r.path(journald::DROPIN)).unwrap();
    let mut fx = Counting::default();
    let st = r.apply(&section(r#"{"disable_subsystem": true}"#), &mut fx);
    assert_eq!(state(&st, Setting::Logging), SettingState::Reverted);
    assert_eq!(fx.runs.len(), 1, "journald still ran with the old limits");
    assert!(r.record().files.is_empty());
}

#[test]
fn unattended_upgrades_missing_is_unsupported_and_nothing_is_written() {
    let r = Root::debian("no-uu");
    r.put(
        "/var/lib/dpkg/status",
        "Package: unattended-upgrades\nStatus: deinstall ok config-files\n",
    );
    let mut fx = Counting::default();
    let st = r.apply(&upgrades_type("all"), &mut fx);
    assert_eq!(
        state(&st, Setting::Upgrades).to_string(),
        "unsupported: package unattended-upgrades is not installed"
    );
    assert!(fx.writes.is_empty() && fx.runs.is_empty());
    // `none` only needs apt: switching runs off is meaningful without the package.
    let st = r.apply(&upgrades_type("none"), &mut Counting::default());
    assert_eq!(state(&st, Setting::Upgrades), SettingState::Applied);
}

#[test]
fn a_system_without_apt_or_journald_is_unsupported_not_an_error() {
    // A Buildroot-like image: os-release, no apt-get, no journald.
    let r = Root::empty("buildroot");
    r.put(
        "/etc/os-release",
        "NAME=Buildroot\nID=buildroot\nPRETTY_NAME=\"Buildroot 2024.02\"\n",
    );
    let s = section(
        r#"{"attributes": {"logging": {"system_max_use": "64M"}, "upgrades": {"type": "all"}}}"#,
    );
    for _ in 0..2 {
        let mut fx = Counting::default();
        let st = r.apply(&s, &mut fx);
        assert_eq!(
            state(&st, Setting::Upgrades).to_string(),
            "unsupported: not supported on this system: no apt-get (Buildroot 2024.02)"
        );
        assert_eq!(
            state(&st, Setting::Logging).to_string(),
            "unsupported: systemd-journald is not present on this system"
        );
        assert!(!st.any_failed());
        assert!(fx.writes.is_empty() && fx.runs.is_empty() && fx.removes.is_empty());
    }
    assert!(!r.path(record::RECORD_PATH).exists());

    // apt-get present but not a Debian-family OS.
    r.put("/usr/bin/apt-get", "");
    let st = r.apply(&upgrades_type("security"), &mut Counting::default());
    assert_eq!(
        state(&st, Setting::Upgrades).to_string(),
        "unsupported: not supported on this system: Buildroot 2024.02 is not of the Debian family"
    );
}

#[test]
fn a_failed_restart_is_reported_and_retried_on_the_next_apply() {
    let r = Root::debian("restart-fail");
    let mut fx = Counting {
        fail_runs: true,
        ..Default::default()
    };
    let st = r.apply(&logging("64M", "16M"), &mut fx);
    match state(&st, Setting::Logging) {
        SettingState::Failed(reason) => {
            assert!(reason.contains("journald restart failed"), "{reason}")
        }
        other => panic!("expected failed, got {other}"),
    }
    assert!(r.record().journald_restart_pending);
    assert_eq!(r.read(journald::DROPIN).as_deref(), Some(JOURNALD_64_16));

    let mut fx = Counting::default();
    let st = r.apply(&logging("64M", "16M"), &mut fx);
    assert_eq!(state(&st, Setting::Logging), SettingState::Applied);
    assert_eq!(fx.runs.len(), 1);
    assert_eq!(fx.writes.len(), 1, "only the record: {:?}", fx.writes);
    assert!(!r.record().journald_restart_pending);
}

#[test]
fn a_crash_before_the_record_was_written_is_recovered() {
    let r = Root::debian("crash");
    // The drop-in is on disk with the wanted content, but no record says so.
    r.put(journald::DROPIN, JOURNALD_64_16);
    let mut fx = Counting::default();
    let st = r.apply(&logging("64M", "16M"), &mut fx);
    assert_eq!(state(&st, Setting::Logging), SettingState::Applied);
    assert_eq!(fx.writes, [r.path(record::RECORD_PATH)]);
    assert_eq!(fx.runs.len(), 1, "journald may not have read it yet");
    assert_eq!(
        r.record().sha(journald::DROPIN),
        Some(record::sha256_hex(JOURNALD_64_16.as_bytes()).as_str())
    );
}

#[test]
fn a_record_that_cannot_be_written_fails_the_setting() {
    let r = Root::debian("rec-fail");
    let mut fx = Counting {
        fail_writes_under: Some(r.path("/opt/svc")),
        ..Default::default()
    };
    let st = r.apply(&upgrades_type("all"), &mut fx);
    match state(&st, Setting::Upgrades) {
        SettingState::Failed(reason) => assert!(reason.contains("record"), "{reason}"),
        other => panic!("expected failed, got {other}"),
    }
}

#[test]
fn a_corrupt_record_counts_as_empty() {
    let r = Root::debian("rec-corrupt");
    r.put(record::RECORD_PATH, "{not json");
    let facts = r.facts();
    assert!(facts.record_problem.is_some());
    let st = apply(
        &logging("64M", "16M"),
        &r.paths,
        &facts,
        &mut Counting::default(),
    );
    assert_eq!(state(&st, Setting::Logging), SettingState::Applied);
    assert_eq!(r.record().files.len(), 1);
}

#[test]
fn under_a_root_other_than_slash_nothing_is_restarted() {
    let r = Root::debian("no-restart");
    let facts = SystemFacts::detect(&r.paths);
    assert!(matches!(facts.restarts, Restarts::Skipped(_)));
    let mut fx = Counting::default();
    let st = apply(&logging("64M", "16M"), &r.paths, &facts, &mut fx);
    assert!(fx.runs.is_empty());
    assert_eq!(state(&st, Setting::Logging), SettingState::Applied);
    assert!(
        st.services[0].contains("not restarted under --root"),
        "{:?}",
        st.services
    );
}

#[test]
fn status_serializes_for_svc_agent_status() {
    let r = Root::debian("json");
    let r2 = Root::debian("json-nouu");
    r2.put("/var/lib/dpkg/status", "");
    let st = r.apply(&logging("64M", "16M"), &mut Counting::default());
    let v = serde_json::to_value(&st).unwrap();
    assert_eq!(v["settings"][0]["setting"], "logging");
    assert_eq!(v["settings"][0]["state"], "applied");
    assert_eq!(v["settings"][0]["changed"][0], journald::DROPIN);
    let st = r2.apply(&upgrades_type("all"), &mut Counting::default());
    let v = serde_json::to_value(&st).unwrap();
    assert_eq!(v["settings"][1]["state"], "unsupported");
    assert_eq!(
        v["settings"][1]["reason"],
        "package unattended-upgrades is not installed"
    );
}

// ---- the real readers of these files ----

/// `apt-config dump` reading `<root>/etc/apt/apt.conf.d` as apt would; only our keys.
fn apt_dump(r: &Root) -> String {
    let conf = r.dir.join("apt-config.conf");
    fs::write(
        &conf,
        format!(
            "Dir::Etc::Parts \"{}\";\n",
            r.path("/etc/apt/apt.conf.d").display()
        ),
    )
    .unwrap();
    let out = Command::new("apt-config")
        .arg("dump")
        .env("APT_CONFIG", &conf)
        .output()
        .expect("apt-config (package apt) is needed for this test");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("APT::Periodic::") || l.starts_with("Unattended-Upgrade::"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn apt_config_sees_the_effective_values_and_revert_restores_the_distribution() {
    let r = Root::debian("apt-config");
    let distro = apt_dump(&r);
    assert!(distro
        .contains("Origins-Pattern:: \"origin=Debian,codename=${distro_codename},label=Debian\""));

    r.apply(&upgrades_type("all"), &mut Counting::default());
    let all = apt_dump(&r);
    assert!(
        all.contains("APT::Periodic::Unattended-Upgrade \"1\""),
        "{all}"
    );
    let patterns: Vec<_> = all
        .lines()
        .filter(|l| l.contains("Origins-Pattern::"))
        .collect();
    assert_eq!(
        patterns,
        ["Unattended-Upgrade::Origins-Pattern:: \"origin=*\";"]
    );

    r.apply(&upgrades_type("security"), &mut Counting::default());
    let sec = apt_dump(&r);
    let patterns: Vec<_> = sec
        .lines()
        .filter(|l| l.contains("Origins-Pattern::"))
        .collect();
    assert_eq!(
        patterns,
        [
            "Unattended-Upgrade::Origins-Pattern:: \"codename=${distro_codename}-security\";",
            "Unattended-Upgrade::Origins-Pattern:: \"archive=${distro_codename}-security\";",
            "Unattended-Upgrade::Origins-Pattern:: \"codename=${distro_codename},label=Debian-Security\";",
        ],
        "the distribution's list is replaced, not appended to"
    );

    r.apply(&upgrades_type("none"), &mut Counting::default());
    let none = apt_dump(&r);
    assert!(
        none.contains("APT::Periodic::Unattended-Upgrade \"0\""),
        "{none}"
    );
    assert!(
        none.contains("APT::Periodic::Update-Package-Lists \"1\""),
        "{none}"
    );

    r.apply(
        &section(r#"{"disable_subsystem": true}"#),
        &mut Counting::default(),
    );
    assert_eq!(apt_dump(&r), distro);
}

#[test]
fn systemd_analyze_cat_config_reads_the_dropin() {
    let r = Root::debian("cat-config");
    r.apply(&logging("64M", "16M"), &mut Counting::default());
    let run = || {
        let out = Command::new("systemd-analyze")
            .args(["cat-config", "--no-pager"])
            .arg(format!("--root={}", r.dir.display()))
            .arg("systemd/journald.conf")
            .output()
            .expect("systemd-analyze (package systemd) is needed for this test");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = run();
    assert!(
        text.contains("60-svc-agent.conf\n")
            && text.contains("SystemMaxUse=64M\nRuntimeMaxUse=16M\n"),
        "{text}"
    );
    r.apply(
        &section(r#"{"disable_subsystem": true}"#),
        &mut Counting::default(),
    );
    let text = run();
    assert!(!text.contains("SystemMaxUse=64M"), "{text}");
}

#[test]
fn syscfg_apply_command_applies_reports_json_and_exit_codes() {
    let r = Root::debian("cli");
    let cfg = r.dir.join("machine.json");
    fs::write(
        &cfg,
        r#"{"components": [], "modules": [], "agent": {"agent-syscfg": {"attributes": {"logging": {"system_max_use": "64M", "runtime_max_use": "16M"}, "upgrades": {"type": "all"}}}}}"#,
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_svc-agent"))
            .arg("syscfg-apply")
            .args(args)
            .output()
            .unwrap()
    };
    let root = r.dir.to_str().unwrap();
    let out = run(&["--root", root, "--json", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["settings"][0]["state"], "applied");
    assert_eq!(v["settings"][1]["state"], "applied");
    assert!(v["services"][0]
        .as_str()
        .unwrap()
        .contains("not restarted under --root"));
    assert_eq!(r.read(journald::DROPIN).as_deref(), Some(JOURNALD_64_16));

    let out = run(&["--root", root, "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("logging: unchanged"), "{text}");

    fs::write(
        &cfg,
        r#"{"agent": {"agent-syscfg": {"attributes": {"logging": {"system_max_use": "lots"}}}}}"#,
    )
    .unwrap();
    assert_eq!(
        run(&["--root", root, "--config", cfg.to_str().unwrap()])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(run(&["--root", root]).status.code(), Some(2));
}
