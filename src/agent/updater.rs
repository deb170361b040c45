//! The engine as the daemon sees it: `agent::updates::Updater` over [`Engine`]. The daemon
//! decides what and when (policy, maintenance window, busy gate, probation); this turns its
//! decisions into artifacts, stages them on a worker thread and activates them on the loop.
use super::policy::Desired;
use super::updates::{StageResult, Staged, Updater};
use crate::http::Identity;
use crate::paths::Paths;
use crate::update::{Artifact, Engine, Kind, Staging, UpdateError, UpdateOptions};
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
        self.identity = creds.download_identity();
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

    /// The offer's deltas with their URLs resolved; one whose URL the app may not hand out
    /// (the artifacts' rule) is left out, with a warning.
    fn deltas(&self, desired: &Desired) -> Vec<crate::protocol::Delta> {
        let Desired::Install(t) = desired else {
            return Vec::new();
        };
        t.deltas
            .iter()
            .filter_map(|d| {
                let url = self.resolve(&d.url);
                match self.check_scheme(&url) {
                    Ok(()) => Some(crate::protocol::Delta { url, ..d.clone() }),
                    Err(e) => {
                        crate::warn!(crate::update::SUB, "delta from {} left out: {e}", d.from);
                        None
                    }
                }
            })
            .collect()
    }

    fn check_scheme(&self, url: &str) -> Result<(), UpdateError> {
        check_artifact_url(&self.engine.paths, self.base_url.as_deref(), url)
    }

    fn artifact(&self, kind: Kind, desired: &Desired) -> Option<Artifact> {
        match desired {
            Desired::Install(t) => Some(Artifact {
                name: kind.name().to_string(),
                version: t.version.clone(),
                url: self.resolve(&t.url),
                sha256: t.sha256.clone(),
                size: t.size,
                signature: t.signature.clone(),
                identity: self.identity.clone(),
            }),
            Desired::InstallUrl(u) => Some(Artifact {
                name: kind.name().to_string(),
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

/// An artifact URL the app at `base_url` may hand out (for binaries and OS images alike).
/// An app reached over https hands out https artifacts only: a `file://` target would
/// install whatever local file matches the hash it names, and `http://` would give the
/// download away to anyone on the path. A `file://` app (a local directory) may use any.
pub(crate) fn check_artifact_url(
    paths: &Paths,
    base_url: Option<&str>,
    url: &str,
) -> Result<(), UpdateError> {
    // The files the engine itself took out of a verified SWUpdate image (the hawkBit
    // backend's `.swu` chunks): local, and verified again when staged.
    if url
        .strip_prefix("file://")
        .is_some_and(|p| crate::update::swu::is_unpacked(paths, Path::new(p)))
    {
        return Ok(());
    }
    match base_url {
        // A file:// app names files in its own directory only: anything else would be
        // read and hashed, and its size and sha256 would reach the directory's
        // logs.jsonl (an oracle on every file root can read). Refused before any read.
        Some(base) if base.starts_with("file://") => match url.strip_prefix("file://") {
            Some(p) if !beneath(Path::new(p), Path::new(&base["file://".len()..])) => {
                Err(UpdateError::UrlRefused(format!(
                    "artifact URL {url:?} refused: outside the management directory {}",
                    &base["file://".len()..]
                )))
            }
            _ => Ok(()),
        },
        Some(base) if base.starts_with("https://") && !url.starts_with("https://") => {
            Err(UpdateError::UrlRefused(format!(
                "artifact URL {url:?} refused: the management app is https, so its artifacts must be https too"
            )))
        }
        _ => Ok(()),
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
    fn stage(&self, kind: Kind, desired: &Desired) -> StageResult {
        let a = self
            .artifact(kind, desired)
            .ok_or_else(|| UpdateError::BadArtifact("nothing to install".into()))?;
        self.check_scheme(&a.url)?;
        let pinned = a.is_pin().then(|| a.url.clone());
        match self.engine.stage_offer(&a, &self.deltas(desired))? {
            Staging::Ready { version } => Ok(Some(Staged {
                kind,
                path: self.engine.cached_file(kind.name(), &version),
                version,
                url: pinned,
            })),
            Staging::AlreadyCurrent { .. } | Staging::NotModified { .. } => Ok(None),
        }
    }
}

impl Updater for DaemonUpdater {
    fn set_delta_fallback(&mut self, rule: crate::update::DeltaFallback) {
        self.engine.opts.delta_fallback = rule;
    }

    fn set_budget(&mut self, gate: Option<crate::update::budget::Gate>) {
        self.engine.opts.download.budget = gate;
    }

    /// A worker thread per download; it wakes the loop when done.
    fn start_stage(
        &self,
        kind: Kind,
        desired: &Desired,
        pinned: bool,
    ) -> Result<Receiver<StageResult>, UpdateError> {
        let (tx, rx) = channel();
        let mut worker = self.clone();
        if let Some(gate) = worker.engine.opts.download.budget.as_mut() {
            gate.exempt = pinned;
        }
        let desired = desired.clone();
        crate::sys::thread(format!("update-{kind}"))
            .spawn(move || {
                let _ = tx.send(worker.stage(kind, &desired));
                crate::signals::wake();
            })
            .map_err(crate::update::io_err("starting the download worker"))?;
        Ok(rx)
    }

    fn activate(&mut self, staged: &Staged) -> Result<(), UpdateError> {
        self.engine
            .activate(staged.kind, &staged.version)
            .map(|_| ())
    }

    fn rollback(&mut self, kind: Kind) -> Result<String, UpdateError> {
        crate::update::rollback(&self.engine.paths, kind).map(|(_, to)| to)
    }

    fn end_probation(&mut self, kind: Kind, version: &str) -> Result<(), UpdateError> {
        match kind {
            Kind::Server => crate::update::end_server_probation(&self.engine.paths, version),
            // The agent's probation is the boot guard's, ended by its first healthy loop.
            Kind::Agent => Ok(()),
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
            assert!(e.is_refusal(), "{bad}: {e}");
            assert!(e.to_string().contains("must be https"), "{bad}: {e}");
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
            assert!(matches!(e, UpdateError::UrlRefused(_)), "{bad}: {e}");
            assert!(
                e.to_string().contains("outside the management directory"),
                "{bad}: {e}"
            );
        }
        let e = local
            .check_scheme(&local.resolve("../etc/shadow"))
            .unwrap_err()
            .to_string();
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
