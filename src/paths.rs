//! Device paths of `../shared/conventions.md`, all re-rooted under `--root DIR`.
use std::path::{Path, PathBuf};

/// Every path the agent touches, relative to a root (`/` on a device, a sandbox in tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    root: PathBuf,
}

impl Default for Paths {
    fn default() -> Self {
        Paths::new("/")
    }
}

impl Paths {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Paths { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Joins an absolute device path (`/etc/svc.json`) under the root.
    pub fn device(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    /// Machine credentials file, mode 0600.
    pub(crate) fn credentials(&self) -> PathBuf {
        self.device("/etc/svc.json")
    }
    /// Manufacturer provisioning defaults.
    pub(crate) fn defaults(&self) -> PathBuf {
        self.device("/etc/svc-defaults.json")
    }
    /// Vendor update-signing public key (raw 32-byte ed25519 key, hex or binary).
    pub fn signing_key(&self) -> PathBuf {
        self.device("/etc/svc-signing.pub")
    }
    /// `/opt/svc`: the agent's state.
    pub fn state_dir(&self) -> PathBuf {
        self.device("/opt/svc")
    }
    /// `/opt/svc/bin`: links to the active versions.
    pub fn bin_dir(&self) -> PathBuf {
        self.device("/opt/svc/bin")
    }
    /// `/opt/svc/bin/<name>`.
    pub fn bin_link(&self, name: &str) -> PathBuf {
        self.bin_dir().join(name)
    }
    /// `/opt/svc/cache`: downloaded versions.
    pub fn cache_dir(&self) -> PathBuf {
        self.device("/opt/svc/cache")
    }
    /// The systemd unit directory.
    pub(crate) fn unit_dir(&self) -> PathBuf {
        self.device("/etc/systemd/system")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reroots_device_paths() {
        let p = Paths::new("/tmp/sandbox");
        assert_eq!(p.credentials(), PathBuf::from("/tmp/sandbox/etc/svc.json"));
        assert_eq!(
            p.bin_link("svc-server"),
            PathBuf::from("/tmp/sandbox/opt/svc/bin/svc-server")
        );
        assert_eq!(
            Paths::default().cache_dir(),
            PathBuf::from("/opt/svc/cache")
        );
    }
}
