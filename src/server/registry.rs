//! The module registry (docs/registry.md): one `index.json` per module listing its versions
//! and, per platform, a tar artifact with its sha256, size and entry point. Artifacts are
//! downloaded through `crate::update::download` (size and sha256 checked) and unpacked
//! atomically into `$SVC_HOME/packages/<module-name>/<version>/`.
use crate::config::env::registry_module_root;
use semver::Version;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component as PathPart, Path, PathBuf};
use std::process::Command;

/// The largest index accepted; an index lists versions, not artifacts.
const MAX_INDEX_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RegistryError {
    /// No registry configured (`--registry` / `SVC_REGISTRY`).
    NotConfigured,
    /// The index could not be read (network, missing file, HTTP error).
    Unreachable(String),
    /// The index was read but is not a valid index.
    BadIndex(String),
    /// Download, checksum or size failure.
    Download(String),
    /// The archive could not be unpacked or lacks its entry point.
    BadPackage(String),
    /// Local filesystem trouble under `SVC_HOME`.
    Io(String),
    /// svc-server was asked to stop before the work finished.
    Interrupted,
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::NotConfigured => {
                f.write_str("no module registry configured (--registry or SVC_REGISTRY)")
            }
            RegistryError::Unreachable(e) => write!(f, "registry unreachable: {e}"),
            RegistryError::BadIndex(e) => write!(f, "bad registry index: {e}"),
            RegistryError::Download(e) => write!(f, "download failed: {e}"),
            RegistryError::BadPackage(e) => write!(f, "bad package: {e}"),
            RegistryError::Io(e) => f.write_str(e),
            RegistryError::Interrupted => f.write_str("interrupted: svc-server is stopping"),
        }
    }
}

impl std::error::Error for RegistryError {}

/// One platform's artifact of a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ModuleArtifact {
    /// Absolute (`https://`, `http://`, `file://`) or relative to the index's folder.
    pub url: String,
    pub sha256: String,
    pub size: u64,
    /// The program to run, relative to the unpacked version folder.
    pub entrypoint: String,
}

#[derive(Debug, Deserialize)]
struct IndexVersion {
    version: String,
    #[serde(default)]
    platforms: BTreeMap<String, ModuleArtifact>,
}

#[derive(Debug, Deserialize)]
struct Index {
    versions: Vec<IndexVersion>,
}

/// The versions of one module available for this machine's platform, URLs made absolute.
#[derive(Debug, Clone, Default)]
pub(crate) struct Available {
    pub versions: Vec<(Version, ModuleArtifact)>,
}

impl Available {
    pub(crate) fn list(&self) -> Vec<Version> {
        self.versions.iter().map(|(v, _)| v.clone()).collect()
    }
    pub(crate) fn artifact(&self, v: &Version) -> Option<&ModuleArtifact> {
        self.versions.iter().find(|(x, _)| x == v).map(|(_, a)| a)
    }
}

/// `linux/amd64` or `linux/arm64` (the registry's platform keys).
pub(crate) fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

/// A registry base: `file://DIR`, `https://host/path` or `http://...` (loopback tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Registry {
    base: String,
}

fn safe_part(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

impl Registry {
    pub(crate) fn new(base: &str) -> Result<Registry, RegistryError> {
        let ok = ["file://", "https://", "http://"]
            .iter()
            .any(|p| base.starts_with(p));
        if !ok {
            return Err(RegistryError::Unreachable(format!(
                "{base:?}: the registry must be a file://, https:// or http:// URL"
            )));
        }
        Ok(Registry {
            base: base.trim_end_matches('/').to_string(),
        })
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// `<registry>/modules/<namespace>/<name>/index.json` for `module_id` = `namespace:name`.
    pub(crate) fn index_url(&self, module_id: &str) -> Result<String, RegistryError> {
        let (ns, name) = module_id
            .split_once(':')
            .filter(|(ns, name)| safe_part(ns) && safe_part(name))
            .ok_or_else(|| {
                RegistryError::BadIndex(format!(
                    "module_id {module_id:?} cannot name a registry path"
                ))
            })?;
        Ok(format!("{}/modules/{ns}/{name}/index.json", self.base))
    }

    fn get(url: &str) -> Result<Vec<u8>, RegistryError> {
        if let Some(path) = url.strip_prefix("file://") {
            let meta = std::fs::metadata(path)
                .map_err(|e| RegistryError::Unreachable(format!("{url}: {e}")))?;
            if meta.len() > MAX_INDEX_BYTES as u64 {
                return Err(RegistryError::BadIndex(format!("{url} is too large")));
            }
            return std::fs::read(path)
                .map_err(|e| RegistryError::Unreachable(format!("{url}: {e}")));
        }
        let unreachable = |e: crate::http::HttpError| match e {
            crate::http::HttpError::TooLarge(_) => {
                RegistryError::BadIndex(format!("{url} is too large"))
            }
            e => RegistryError::Unreachable(format!("{url}: {e}")),
        };
        let resp = crate::http::get(url, 30)
            .follow_redirects()
            .send()
            .map_err(unreachable)?;
        if resp.status() != 200 {
            return Err(RegistryError::Unreachable(format!(
                "{url}: HTTP {}",
                resp.status()
            )));
        }
        let body = resp
            .read_body(MAX_INDEX_BYTES as u64)
            .map_err(unreachable)?;
        Ok(body)
    }

    /// The module's versions for this platform, newest last. A version that does not
    /// parse is skipped with a warning (one bad entry must not hide the others).
    pub(crate) fn available(&self, module_id: &str) -> Result<Available, RegistryError> {
        let url = self.index_url(module_id)?;
        let bytes = Self::get(&url)?;
        let index: Index = serde_json::from_slice(&bytes)
            .map_err(|e| RegistryError::BadIndex(format!("{url}: {e}")))?;
        let folder = &url[..url.rfind('/').unwrap_or(url.len())];
        let plat = platform();
        let mut out = Available::default();
        for v in index.versions {
            let version = match Version::parse(&v.version) {
                Ok(x) => x,
                Err(e) => {
                    crate::warn!("svc-server", "{url}: skipping version {:?}: {e}", v.version);
                    continue;
                }
            };
            if let Some(mut a) = v.platforms.get(&plat).cloned() {
                if !a.url.contains("://") {
                    a.url = format!("{folder}/{}", a.url.trim_start_matches('/'));
                }
                out.versions.push((version, a));
            }
        }
        out.versions.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// An unpacked version of a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Installed {
    pub version: Version,
    /// `$SVC_HOME/packages/<name>/<version>` (the module's `SVC_MODULE_ROOT`).
    pub root: PathBuf,
    pub program: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    version: String,
    entrypoint: String,
    sha256: String,
    url: String,
}

fn meta_path(svc_home: &Path, name: &str, version: &Version) -> PathBuf {
    svc_home
        .join("packages")
        .join(name)
        .join(format!("{version}.json"))
}

/// A relative path that stays inside its folder.
fn safe_relative(p: &str) -> bool {
    let path = Path::new(p);
    !p.is_empty() && path.components().all(|c| matches!(c, PathPart::Normal(_)))
}

/// The installed version `version` of module `name`, if complete.
pub(crate) fn installed(svc_home: &Path, name: &str, version: &Version) -> Option<Installed> {
    let root = registry_module_root(svc_home, name, &version.to_string());
    let meta: Meta =
        serde_json::from_slice(&std::fs::read(meta_path(svc_home, name, version)).ok()?).ok()?;
    if !safe_relative(&meta.entrypoint) || !root.is_dir() {
        return None;
    }
    Some(Installed {
        version: version.clone(),
        program: root.join(&meta.entrypoint),
        root,
    })
}

/// Every complete installed version of module `name`.
pub(crate) fn installed_versions(svc_home: &Path, name: &str) -> Vec<Version> {
    let dir = svc_home.join("packages").join(name);
    let mut out: Vec<Version> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Version::parse(e.file_name().to_str()?).ok())
        .filter(|v| installed(svc_home, name, v).is_some())
        .collect();
    out.sort();
    out
}

fn io(what: &str, p: &Path, e: std::io::Error) -> RegistryError {
    RegistryError::Io(format!("{what} {}: {e}", p.display()))
}

/// fsyncs every file and folder under `dir` (the unpacked tree, before its rename).
fn sync_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ft = entry.file_type()?;
        if ft.is_dir() {
            sync_tree(&entry.path())?;
        } else if ft.is_file() {
            std::fs::File::open(entry.path())?.sync_all()?;
        }
    }
    crate::fsutil::fsync_dir(dir)
}

/// Downloads (size and sha256 checked) and unpacks `version` of module `name` into
/// `$SVC_HOME/packages/<name>/<version>/`: unpacked into a temp folder beside it, fsynced,
/// then renamed, so the folder is either complete or absent. Already installed: a no-op.
pub(crate) fn install(
    svc_home: &Path,
    name: &str,
    version: &Version,
    artifact: &ModuleArtifact,
) -> Result<Installed, RegistryError> {
    if let Some(i) = installed(svc_home, name, version) {
        return Ok(i);
    }
    if !safe_relative(&artifact.entrypoint) {
        return Err(RegistryError::BadIndex(format!(
            "entrypoint {:?} must be a relative path inside the package",
            artifact.entrypoint
        )));
    }
    let packages = svc_home.join("packages");
    let downloads = packages.join(".downloads");
    let part = downloads.join(format!("{name}-{version}.tar"));
    download_package(&artifact.url, &part, artifact.size, &artifact.sha256)?;

    let folder = packages.join(name);
    let root = registry_module_root(svc_home, name, &version.to_string());
    let tmp = folder.join(format!(".{version}.tmp-{}", std::process::id()));
    // Temp folders of interrupted earlier installs of this version (any pid).
    let prefix = format!(".{version}.tmp-");
    for e in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    std::fs::create_dir_all(&tmp).map_err(|e| io("creating", &tmp, e))?;
    let result = (|| {
        // The system tar, by argv: no shell. Owners are not restored (we may be root);
        // GNU tar refuses members that climb out with `..` or are absolute.
        let mut tar = Command::new("tar");
        tar.arg("-x")
            .arg("--no-same-owner")
            .arg("-f")
            .arg(&part)
            .arg("-C")
            .arg(&tmp);
        let out = crate::process::run(tar, std::time::Duration::from_secs(600))
            .map_err(|e| RegistryError::BadPackage(format!("tar on {}: {e}", artifact.url)))?;
        if !out.success() {
            return Err(RegistryError::BadPackage(format!(
                "tar failed on {}: {}",
                artifact.url,
                out.stderr_text()
            )));
        }
        let program = tmp.join(&artifact.entrypoint);
        let mode = std::fs::metadata(&program)
            .map_err(|_| {
                RegistryError::BadPackage(format!(
                    "{} has no entrypoint {:?}",
                    artifact.url, artifact.entrypoint
                ))
            })?
            .permissions()
            .mode();
        if mode & 0o111 == 0 {
            return Err(RegistryError::BadPackage(format!(
                "entrypoint {:?} of {} is not executable",
                artifact.entrypoint, artifact.url
            )));
        }
        sync_tree(&tmp).map_err(|e| io("syncing", &tmp, e))?;
        if root.exists() {
            // A folder without its record: an interrupted earlier install.
            std::fs::remove_dir_all(&root).map_err(|e| io("removing", &root, e))?;
        }
        crate::fsutil::durable_rename(&tmp, &root).map_err(|e| io("renaming into", &root, e))?;
        let meta = Meta {
            version: version.to_string(),
            entrypoint: artifact.entrypoint.clone(),
            sha256: artifact.sha256.clone(),
            url: artifact.url.clone(),
        };
        let text = serde_json::to_vec_pretty(&meta).unwrap_or_default();
        let mp = meta_path(svc_home, name, version);
        crate::fsutil::atomic_write(&mp, &text, 0o644).map_err(|e| io("writing", &mp, e))?;
        Ok(())
    })();
    let _ = std::fs::remove_file(&part);
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    installed(svc_home, name, version).ok_or_else(|| {
        RegistryError::Io(format!("{name} {version} vanished right after its install"))
    })
}

/// Streams a package into `part` with the agent's downloader (resumable, size-capped), then
/// checks its size and sha256; a bad file is removed.
fn download_package(url: &str, part: &Path, size: u64, sha256: &str) -> Result<(), RegistryError> {
    use crate::update::{download, verify, Artifact};
    let a = Artifact {
        name: "module-package".into(),
        version: String::new(),
        url: url.to_string(),
        sha256: Some(sha256.to_string()),
        size: Some(size),
        signature: None,
        identity: None,
    };
    let opts = download::DownloadOptions::default();
    download::fetch_into(part.to_path_buf(), &a, &opts, None)
        .map_err(|e| RegistryError::Download(e.to_string()))?;
    if let Err(e) = verify::check_file_hash(part, &a) {
        download::discard(part);
        return Err(RegistryError::Download(e.to_string()));
    }
    download::discard_sidecar(part);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_urls_and_safety() {
        let r = Registry::new("file:///srv/reg/").unwrap();
        assert_eq!(
            r.index_url("acme:sensors").unwrap(),
            "file:///srv/reg/modules/acme/sensors/index.json"
        );
        assert!(r.index_url("acme:../x").is_err());
        assert!(r.index_url("acme").is_err());
        assert!(Registry::new("/srv/reg").is_err());
        assert!(safe_relative("bin/module"));
        assert!(!safe_relative("../bin/module"));
        assert!(!safe_relative("/bin/sh"));
        assert!(!safe_relative("./bin"));
    }

    #[test]
    fn platform_key() {
        let p = platform();
        assert!(
            p == "linux/amd64" || p == "linux/arm64" || !cfg!(target_os = "linux"),
            "{p}"
        );
    }
}
