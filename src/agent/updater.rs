//! The engine as the daemon sees it: `agent::updates::Updater` over [`Engine`]. The daemon
//! decides what and when (policy, maintenance window, busy gate, probation); this turns its
//! decisions into artifacts, stages them on a worker thread and activates them on the loop.
use super::policy::Desired;
use super::updates::{StageResult, Staged, Updater};
use crate::http::{origin_of, Identity};
use crate::paths::Paths;
use crate::update::activate::linked_version;
use crate::update::download::PinState;
use crate::update::{Artifact, Engine, Staging, UpdateOptions, VersionRecords};
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc::{channel, Receiver};

/// [`Engine`] plus the base that relative artifact URLs resolve against (the app address).
#[derive(Debug, Clone)]
pub(crate) struct DaemonUpdater {
    pub engine: Engine,
    pub base_url: Option<String>,
    /// The machine's identity for requests to the app's own origin (relative targets).
    identity: Option<Identity>,
}

impl DaemonUpdater {
    pub(crate) fn new(paths: Paths, base_url: Option<String>) -> DaemonUpdater {
        let mut opts = UpdateOptions::default();
        // A file:// app's artifacts are opened beneath its directory, no link followed.
        opts.download.file_root = base_url
            .as_deref()
            .and_then(|b| b.strip_prefix("file://"))
            .map(PathBuf::from);
        DaemonUpdater {
            engine: Engine::new(paths, opts),
            base_url,
            identity: None,
        }
    }

    /// Sends `creds`' identity headers with downloads from the app's own origin.
    pub(crate) fn with_identity(
        mut self,
        creds: &crate::credentials::Credentials,
    ) -> DaemonUpdater {
        if creds.app_address.starts_with("https://") || creds.app_address.starts_with("http://") {
            self.identity = Some(Identity {
                origin: origin_of(&creds.app_address).to_string(),
                headers: creds.identity_headers(),
            });
        }
        self
    }

    /// Sends `identity` (its headers, to its origin only) with downloads: the hawkBit
    /// backend's token, which hawkBit asks for on artifacts as on every DDI resource.
    pub(crate) fn with_origin_identity(mut self, identity: Identity) -> DaemonUpdater {
        self.identity = Some(identity);
        self
    }

    /// An artifact URL as the app wrote it, made absolute against the app address.
    fn resolve(&self, url: &str) -> String {
        match (&self.base_url, url.contains("://")) {
            (Some(base), false) => match base.strip_prefix("file://") {
                Some(dir) => format!(
                    "file://{}",
                    Path::new(dir).join(url.trim_start_matches('/')).display()
                ),
                None => format!(
                    "{}/{}",
                    base.trim_end_matches('/'),
                    url.trim_start_matches('/')
                ),
            },
            _ => url.to_string(),
        }
    }

    /// An app reached over https hands out https artifacts only: a `file://` target would
    /// install whatever local file matches the hash it names, and `http://` would give the
    /// download away to anyone on the path. A `file://` app (a local directory) may use any.
    fn check_scheme(&self, url: &str) -> Result<(), String> {
        // The files the engine itself took out of a verified SWUpdate image (the hawkBit
        // backend's `.swu` chunks): local, and verified again when staged.
        if url
            .strip_prefix("file://")
            .is_some_and(|p| crate::update::swu::is_unpacked(&self.engine.paths, Path::new(p)))
        {
            return Ok(());
        }
        match &self.base_url {
            // A file:// app names files in its own directory only: anything else would be
            // read and hashed, and its size and sha256 would reach the directory's
            // logs.jsonl (an oracle on every file root can read). Refused before any read.
            Some(base) if base.starts_with("file://") => match url.strip_prefix("file://") {
                Some(p) if !beneath(Path::new(p), Path::new(&base["file://".len()..])) => {
                    Err(format!(
                        "artifact URL {url:?} refused: outside the management directory {}",
                        &base["file://".len()..]
                    ))
                }
                _ => Ok(()),
            },
            Some(base) if base.starts_with("https://") && !url.starts_with("https://") => {
                Err(format!(
                    "artifact URL {url:?} refused: the management app is https, so its artifacts must be https too"
                ))
            }
            _ => Ok(()),
        }
    }

    fn artifact(&self, name: &str, desired: &Desired) -> Option<Artifact> {
        match desired {
            Desired::Install(t) => Some(Artifact {
                name: name.to_string(),
                version: t.version.clone(),
                url: self.resolve(&t.url),
                sha256: t.sha256.clone(),
                size: t.size,
                signature: t.signature.clone(),
                identity: self.identity.clone(),
            }),
            Desired::InstallUrl(u) => Some(Artifact {
                name: name.to_string(),
                version: String::new(),
                url: u.clone(),
                sha256: None,
                size: None,
                signature: None,
                identity: self.identity.clone(),
            }),
            Desired::Keep | Desired::RefuseOlder { .. } => None,
        }
    }
}

/// `path` is inside `dir` by its words alone: below it, and no `..` on the way.
fn beneath(path: &Path, dir: &Path) -> bool {
    path.strip_prefix(dir).is_ok_and(|rest| {
        rest.components().next().is_some()
            && rest
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    })
}

impl DaemonUpdater {
    /// Downloads and verifies on the calling thread (a worker's).
    fn stage(&self, name: &str, desired: &Desired) -> StageResult {
        let a = self
            .artifact(name, desired)
            .ok_or_else(|| "nothing to install".to_string())?;
        self.check_scheme(&a.url)?;
        let pinned = a.is_pin().then(|| a.url.clone());
        match self.engine.stage(&a).map_err(|e| e.to_string())? {
            Staging::Ready { version } => Ok(Some(Staged {
                name: name.to_string(),
                path: self.engine.cached_file(name, &version),
                version,
                url: pinned,
            })),
            Staging::AlreadyCurrent { .. } | Staging::NotModified { .. } => Ok(None),
        }
    }
}

impl Updater for DaemonUpdater {
    /// A worker thread per download; it wakes the loop when done.
    fn start_stage(&self, name: &str, desired: &Desired) -> Result<Receiver<StageResult>, String> {
        let (tx, rx) = channel();
        let worker = self.clone();
        let (name, desired) = (name.to_string(), desired.clone());
        std::thread::Builder::new()
            .name(format!("update-{name}"))
            .spawn(move || {
                let _ = tx.send(worker.stage(&name, &desired));
                super::signals::wake();
            })
            .map_err(|e| e.to_string())?;
        Ok(rx)
    }

    fn activate(&mut self, staged: &Staged) -> Result<(), String> {
        self.engine
            .activate(&staged.name, &staged.version)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn rollback(&mut self, name: &str) -> Result<String, String> {
        crate::update::rollback(&self.engine.paths, name)
            .map(|(_, to)| to)
            .map_err(|e| e.to_string())
    }

    fn current(&self, name: &str) -> (Option<String>, Option<String>) {
        let paths = &self.engine.paths;
        let version = linked_version(paths, name).or_else(|| {
            VersionRecords::load(paths)
                .ok()
                .and_then(|r| r.get(name).and_then(|e| e.current.clone()))
        });
        // The pinned URL counts only while the version it installed is the active one.
        let url = PinState::load(paths, name)
            .filter(|p| version.as_deref() == Some(p.version.as_str()))
            .map(|p| p.url);
        (version, url)
    }

    fn bad_versions(&self, name: &str) -> Vec<String> {
        VersionRecords::load(&self.engine.paths)
            .ok()
            .and_then(|r| r.get(name).map(|e| e.bad.clone()))
            .unwrap_or_default()
    }

    fn server_probation(&self) -> Option<String> {
        crate::update::server_probation(&self.engine.paths)
    }

    fn end_server_probation(&mut self, version: &str) {
        if let Err(e) = crate::update::end_server_probation(&self.engine.paths, version) {
            crate::warn!("update", "svc-server {version}: ending the probation: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_https_app_cannot_send_file_or_http_targets() {
        let p = Paths::new(Path::new("/tmp/svc-scheme-test"));
        let u = DaemonUpdater::new(p.clone(), Some("https://app.example".into()));
        for bad in [
            "file:///etc/passwd",
            "http://cdn.example/svc-server",
            "ftp://x/y",
        ] {
            let e = u.check_scheme(bad).unwrap_err();
            assert!(e.contains("must be https"), "{bad}: {e}");
        }
        assert!(u.check_scheme(&u.resolve("artifacts/svc-server")).is_ok());
        assert!(u.check_scheme("https://cdn.example/svc-server").is_ok());
        let local = DaemonUpdater::new(p, Some("file:///srv/mgmt".into()));
        assert!(local.check_scheme("file:///srv/mgmt/bin/x").is_ok());
        assert!(local.check_scheme("https://cdn.example/svc-server").is_ok());
    }

    #[test]
    fn a_file_app_names_files_in_its_own_directory_only() {
        let p = Paths::new(Path::new("/tmp/svc-scheme-test"));
        let local = DaemonUpdater::new(p, Some("file:///srv/mgmt".into()));
        assert_eq!(
            local.engine.opts.download.file_root.as_deref(),
            Some(Path::new("/srv/mgmt"))
        );
        for bad in [
            "file:///etc/shadow",
            "file:///srv/mgmt",
            "file:///srv/mgmtx/a",
            "file:///srv/mgmt/../../etc/shadow",
            "file:///srv/mgmt/a/../../x",
        ] {
            let e = local.check_scheme(bad).unwrap_err();
            assert!(e.contains("outside the management directory"), "{bad}: {e}");
        }
        let e = local
            .check_scheme(&local.resolve("../etc/shadow"))
            .unwrap_err();
        assert!(e.contains("outside"), "{e}");
        assert!(local.check_scheme(&local.resolve("artifacts/x")).is_ok());
    }

    #[test]
    fn relative_urls_resolve_against_the_app() {
        let p = Paths::new(Path::new("/tmp/x"));
        let u = DaemonUpdater::new(p.clone(), Some("https://app.example/v1/".into()));
        assert_eq!(u.resolve("/a/b"), "https://app.example/v1/a/b");
        assert_eq!(u.resolve("https://cdn/x"), "https://cdn/x");
        let f = DaemonUpdater::new(p, Some("file:///srv/mgmt".into()));
        assert_eq!(f.resolve("bin/x"), "file:///srv/mgmt/bin/x");
    }
}
