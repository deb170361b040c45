//! OS package upgrades on the Debian family: apt configuration drop-ins for the
//! `unattended-upgrades` package.
//!
//! apt reads `/etc/apt/apt.conf.d/` in ascending byte order of the file names (only names of
//! letters, digits, `-`, `_` and `.`, with no extension or `.conf`); for a plain option the
//! last file read wins, but list entries (`Origins-Pattern { ... }`) from every file are
//! concatenated, so a later file can only replace a list after `#clear`-ing it. Our names sort
//! right after the files they override (`20auto-upgrades` < `20svc-auto-upgrades`,
//! `50unattended-upgrades` < `52svc-unattended-upgrades`); the distribution's files are never
//! written.
use crate::config::model::UpgradeType;
use std::io::BufRead;
use std::path::Path;

/// `APT::Periodic` switches (what `apt.systemd.daily` reads).
pub const PERIODIC: &str = "/etc/apt/apt.conf.d/20svc-auto-upgrades";
/// The origins `unattended-upgrade` may upgrade from.
pub const ORIGINS: &str = "/etc/apt/apt.conf.d/52svc-unattended-upgrades";

/// Every file this module may write.
pub(crate) const FILES: [&str; 2] = [PERIODIC, ORIGINS];

fn header(t: UpgradeType) -> String {
    let name = match t {
        UpgradeType::All => "all",
        UpgradeType::Security => "security",
        UpgradeType::None => "none",
    };
    format!(
        "// Managed by svc-agent (agent-syscfg attributes.upgrades.type \"{name}\"): the agent\n\
         // writes and removes this file and overwrites local edits.\n"
    )
}

/// The files (device path, text) for an upgrade type; paths not listed are not wanted.
pub(crate) fn render(t: UpgradeType) -> Vec<(&'static str, String)> {
    let periodic = |on: bool| {
        let mut s = header(t);
        if on {
            s.push_str("APT::Periodic::Update-Package-Lists \"1\";\n");
            s.push_str("APT::Periodic::Unattended-Upgrade \"1\";\n");
        } else {
            s.push_str("APT::Periodic::Unattended-Upgrade \"0\";\n");
        }
        s
    };
    let origins = |patterns: &[&str]| {
        let mut s = header(t);
        // Without #clear our list would be appended to the distribution's (Debian's default
        // already includes the point-release origin, Ubuntu's uses Allowed-Origins).
        s.push_str("#clear Unattended-Upgrade::Allowed-Origins;\n");
        s.push_str("#clear Unattended-Upgrade::Origins-Pattern;\n");
        s.push_str("Unattended-Upgrade::Origins-Pattern {\n");
        for p in patterns {
            s.push_str(&format!("        \"{p}\";\n"));
        }
        s.push_str("};\n");
        s
    };
    match t {
        // Values are fnmatch patterns: `*` is every origin apt is configured with.
        UpgradeType::All => vec![
            (PERIODIC, periodic(true)),
            (ORIGINS, origins(&["origin=*"])),
        ],
        UpgradeType::Security => vec![
            (PERIODIC, periodic(true)),
            (
                ORIGINS,
                origins(&[
                    // Debian: Codename bookworm-security (Suite stable-security).
                    "codename=${distro_codename}-security",
                    // Ubuntu: Suite jammy-security (Codename jammy).
                    "archive=${distro_codename}-security",
                    // Debian up to buster: Codename buster, Label Debian-Security.
                    "codename=${distro_codename},label=Debian-Security",
                ]),
            ),
        ],
        // Only switch the runs off; which origins would be allowed no longer matters.
        UpgradeType::None => vec![(PERIODIC, periodic(false))],
    }
}

/// `/etc/os-release` (or `/usr/lib/os-release`) fields that matter here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OsRelease {
    pub id: String,
    pub id_like: Vec<String>,
    pub pretty_name: String,
}

impl OsRelease {
    pub(crate) fn parse(text: &str) -> OsRelease {
        let mut o = OsRelease::default();
        for line in text.lines() {
            let Some((k, v)) = line.trim().split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
            match k {
                "ID" => o.id = v,
                "ID_LIKE" => o.id_like = v.split_whitespace().map(str::to_string).collect(),
                "PRETTY_NAME" => o.pretty_name = v,
                _ => {}
            }
        }
        o
    }

    pub(crate) fn read(root: &Path) -> OsRelease {
        ["etc/os-release", "usr/lib/os-release"]
            .iter()
            .find_map(|p| std::fs::read_to_string(root.join(p)).ok())
            .map(|t| OsRelease::parse(&t))
            .unwrap_or_default()
    }

    pub(crate) fn is_debian_family(&self) -> bool {
        std::iter::once(&self.id)
            .chain(self.id_like.iter())
            .any(|i| i == "debian" || i == "ubuntu")
    }

    /// A name for messages: PRETTY_NAME, else ID, else "unknown OS".
    pub(crate) fn name(&self) -> &str {
        if !self.pretty_name.is_empty() {
            &self.pretty_name
        } else if !self.id.is_empty() {
            &self.id
        } else {
            "unknown OS (no os-release)"
        }
    }
}

/// Whether dpkg's database under `root` says `package` is installed (`Status: install ok
/// installed`; a removed package with its conffiles left is not). Read line by line: the
/// status file is megabytes on a full system.
pub(crate) fn dpkg_installed(root: &Path, package: &str) -> bool {
    let Ok(f) = std::fs::File::open(root.join("var/lib/dpkg/status")) else {
        return false;
    };
    let mut in_pkg = false;
    for line in std::io::BufReader::new(f).lines() {
        let Ok(line) = line else { return false };
        if line.is_empty() {
            in_pkg = false;
        } else if let Some(name) = line.strip_prefix("Package:") {
            in_pkg = name.trim() == package;
        } else if in_pkg {
            if let Some(status) = line.strip_prefix("Status:") {
                return status.split_whitespace().nth(2) == Some("installed");
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_family() {
        let deb = OsRelease::parse("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n");
        assert!(deb.is_debian_family());
        assert_eq!(deb.name(), "Debian GNU/Linux 12 (bookworm)");
        let rpi = OsRelease::parse("ID=raspbian\nID_LIKE=debian\n");
        assert!(rpi.is_debian_family());
        let mint = OsRelease::parse("ID=linuxmint\nID_LIKE=\"ubuntu debian\"\n");
        assert!(mint.is_debian_family());
        let poky = OsRelease::parse("ID=poky\nNAME=\"Poky (Yocto Project Reference Distro)\"\n");
        assert!(!poky.is_debian_family());
        assert_eq!(OsRelease::default().name(), "unknown OS (no os-release)");
    }

    #[test]
    fn dpkg_status_installed_vs_config_files() {
        let dir = std::env::temp_dir().join(format!("svc-syscfg-dpkg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("var/lib/dpkg")).unwrap();
        std::fs::write(
            dir.join("var/lib/dpkg/status"),
            "Package: apt\nStatus: install ok installed\n\n\
             Package: unattended-upgrades\nStatus: deinstall ok config-files\n\n\
             Package: curl\nStatus: install ok installed\n",
        )
        .unwrap();
        assert!(dpkg_installed(&dir, "apt"));
        assert!(dpkg_installed(&dir, "curl"));
        assert!(!dpkg_installed(&dir, "unattended-upgrades"));
        assert!(!dpkg_installed(&dir, "nope"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
