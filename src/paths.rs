//! Device paths of `../shared/conventions.md`, all re-rooted under `--root DIR`.
//!
//! Two of them can move, for read-only root file systems (docs/packaging.md "Read-only root
//! file systems"): the state directory (`/opt/svc`: binaries, cache, queues, records, cached
//! config) and the directory of the credentials file `svc.json` (`/etc`). Chosen at build
//! time (`SVC_STATE_DIR`, `SVC_CREDENTIALS_DIR` in the build's environment, build.rs) and
//! overridable at run time by the same variables in the process environment (the unit's
//! drop-in sets them).
use std::path::{Path, PathBuf};

/// The state directory this build was made for (`/opt/svc` unless the image build chose).
pub(crate) const BUILT_STATE_DIR: &str = env!("SVC_BUILT_STATE_DIR");
/// The credentials directory this build was made for (`/etc` unless the image build chose).
pub(crate) const BUILT_CREDENTIALS_DIR: &str = env!("SVC_BUILT_CREDENTIALS_DIR");
/// The conventions' defaults.
pub(crate) const DEFAULT_STATE_DIR: &str = "/opt/svc";
pub(crate) const DEFAULT_CREDENTIALS_DIR: &str = "/etc";
/// The credentials file's name (shared/conventions.md), in the credentials directory.
pub(crate) const CREDENTIALS_FILE_NAME: &str = "svc.json";
/// Run-time overrides (environment variables).
pub(crate) const STATE_DIR_ENV: &str = "SVC_STATE_DIR";
pub(crate) const CREDENTIALS_DIR_ENV: &str = "SVC_CREDENTIALS_DIR";

/// Every path the agent touches, relative to a root (`/` on a device, a sandbox in tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    root: PathBuf,
    /// Device path of the state directory (absolute, before re-rooting).
    state: String,
    /// Device path of the credentials directory (absolute, before re-rooting).
    credentials: String,
}

/// A device path for the state or the credentials directory: absolute, not `/`, no `.`/`..`
/// components, no white space or control characters (it ends up in a unit file).
pub fn check_device_path(p: &str) -> Result<(), BadPath> {
    if !p.starts_with('/') || p.trim_end_matches('/').is_empty() {
        return Err(BadPath::NotAbsolute(p.to_string()));
    }
    if p.split('/').any(|c| c == "." || c == "..")
        || p.chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '%')
    {
        return Err(BadPath::Characters(p.to_string()));
    }
    Ok(())
}

/// A device path `check_device_path` refuses (the path as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadPath {
    NotAbsolute(String),
    Characters(String),
}

impl std::fmt::Display for BadPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadPath::NotAbsolute(p) => write!(f, "{p:?} must be an absolute path other than /"),
            BadPath::Characters(p) => write!(
                f,
                "{p:?} must not hold . or .. components, white space, % or control characters"
            ),
        }
    }
}

/// Why the state and credentials directories asked for cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationError {
    State(BadPath),
    Credentials(BadPath),
    /// The credentials directory inside the state directory (device paths).
    Nested {
        credentials: String,
        state: String,
    },
    /// One of the above, asked for through the environment.
    FromEnv(Box<LocationError>),
}

impl std::fmt::Display for LocationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LocationError::State(e) => write!(f, "state directory {e}"),
            LocationError::Credentials(e) => write!(f, "credentials directory {e}"),
            LocationError::Nested { credentials, state } => write!(
                f,
                "credentials directory {credentials} is inside the state directory {state}: keep them apart \
                 (uninstall removes the state directory; the credentials outlive it)"
            ),
            LocationError::FromEnv(e) => {
                write!(f, "{e} (from {STATE_DIR_ENV} / {CREDENTIALS_DIR_ENV})")
            }
        }
    }
}

impl std::error::Error for LocationError {}

fn normalise(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for c in p.split('/').filter(|c| !c.is_empty()) {
        out.push('/');
        out.push_str(c);
    }
    out
}

impl Default for Paths {
    fn default() -> Self {
        Paths::new("/")
    }
}

impl Paths {
    /// The paths this build was made for (the conventions' unless the image build chose).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Paths {
            root: root.into(),
            state: normalise(BUILT_STATE_DIR),
            credentials: normalise(BUILT_CREDENTIALS_DIR),
        }
    }

    /// Another state directory and/or credentials directory (device paths, checked). The
    /// credentials may not live in the state directory: `uninstall` removes that one.
    pub fn with_locations(
        mut self,
        state_dir: Option<&str>,
        credentials_dir: Option<&str>,
    ) -> Result<Self, LocationError> {
        if let Some(s) = state_dir {
            check_device_path(s).map_err(LocationError::State)?;
            self.state = normalise(s);
        }
        if let Some(c) = credentials_dir {
            check_device_path(c).map_err(LocationError::Credentials)?;
            self.credentials = normalise(c);
        }
        if Path::new(&self.credentials).starts_with(&self.state) {
            return Err(LocationError::Nested {
                credentials: self.credentials.clone(),
                state: self.state.clone(),
            });
        }
        Ok(self)
    }

    /// The build's paths with the run-time overrides of the environment (`SVC_STATE_DIR`,
    /// `SVC_CREDENTIALS_DIR`; empty means unset). What every command of the binary uses.
    pub(crate) fn from_env(root: impl Into<PathBuf>) -> Result<Self, LocationError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let (s, c) = (var(STATE_DIR_ENV), var(CREDENTIALS_DIR_ENV));
        Paths::new(root)
            .with_locations(s.as_deref(), c.as_deref())
            .map_err(|e| LocationError::FromEnv(Box::new(e)))
    }

    /// Device path (not re-rooted) of the state directory, e.g. `/opt/svc`.
    pub(crate) fn state_device_path(&self) -> &str {
        &self.state
    }

    /// Device path (not re-rooted) of the credentials directory, e.g. `/etc`.
    pub(crate) fn credentials_dir_device_path(&self) -> &str {
        &self.credentials
    }

    /// True when both are the conventions' defaults (no unit drop-in needed).
    pub(crate) fn is_default_layout(&self) -> bool {
        self.state == DEFAULT_STATE_DIR && self.credentials == DEFAULT_CREDENTIALS_DIR
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
        self.device(&self.credentials).join(CREDENTIALS_FILE_NAME)
    }
    /// The hawkBit DDI token (docs/hawkbit.md), mode 0600, beside the credentials.
    pub(crate) fn hawkbit_token(&self) -> PathBuf {
        self.device(&self.credentials).join("svc-hawkbit.token")
    }
    /// Manufacturer provisioning defaults.
    pub(crate) fn defaults(&self) -> PathBuf {
        self.device("/etc/svc-defaults.json")
    }
    /// Vendor update-signing public key (raw 32-byte ed25519 key, hex or binary).
    pub fn signing_key(&self) -> PathBuf {
        self.device("/etc/svc-signing.pub")
    }
    /// `/opt/svc` (or the chosen state directory): the agent's state.
    pub fn state_dir(&self) -> PathBuf {
        self.device(&self.state)
    }
    /// `/opt/svc/bin`: links to the active versions.
    pub fn bin_dir(&self) -> PathBuf {
        self.state_dir().join("bin")
    }
    /// `/opt/svc/bin/<name>`.
    pub fn bin_link(&self, name: &str) -> PathBuf {
        self.bin_dir().join(name)
    }
    /// `/opt/svc/cache`: downloaded versions.
    pub fn cache_dir(&self) -> PathBuf {
        self.state_dir().join("cache")
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
        assert!(p.is_default_layout());
    }

    #[test]
    fn the_state_directory_and_credentials_can_move_to_a_data_partition() {
        let p = Paths::new("/tmp/sandbox")
            .with_locations(Some("/data/svc/"), Some("/data//etc"))
            .unwrap();
        assert_eq!(p.state_dir(), PathBuf::from("/tmp/sandbox/data/svc"));
        assert_eq!(
            p.bin_link("svc-agent"),
            PathBuf::from("/tmp/sandbox/data/svc/bin/svc-agent")
        );
        assert_eq!(p.cache_dir(), PathBuf::from("/tmp/sandbox/data/svc/cache"));
        assert_eq!(
            p.credentials(),
            PathBuf::from("/tmp/sandbox/data/etc/svc.json")
        );
        assert_eq!(p.credentials_dir_device_path(), "/data/etc");
        assert_eq!(p.state_device_path(), "/data/svc");
        assert!(!p.is_default_layout());
        // Read-only things stay in the image.
        assert_eq!(
            p.defaults(),
            PathBuf::from("/tmp/sandbox/etc/svc-defaults.json")
        );
    }

    #[test]
    fn a_bad_location_is_refused_with_its_name() {
        for bad in [
            "data/svc",
            "/",
            "//",
            "/data/../etc",
            "/data/./svc",
            "/da\nta",
            "/a b",
        ] {
            let e = Paths::new("/")
                .with_locations(Some(bad), None)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("state directory"), "{bad:?}: {e}");
        }
        let e = Paths::new("/")
            .with_locations(None, Some("data"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("credentials directory"), "{e}");
        // uninstall removes the state directory: the credentials may not be in it.
        for inside in ["/data/svc", "/data/svc/etc"] {
            let e = Paths::new("/")
                .with_locations(Some("/data/svc"), Some(inside))
                .unwrap_err()
                .to_string();
            assert!(e.contains("inside the state directory"), "{e}");
        }
        assert!(Paths::new("/")
            .with_locations(Some("/data/svc"), Some("/data/svc-etc"))
            .is_ok());
    }
}
