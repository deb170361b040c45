//! The update engine: streamed, verified downloads into `/opt/svc/cache`, activation by an
//! atomic link swap, a version record, rollback and cache hygiene. At every instant
//! `/opt/svc/bin/<name>` points at a complete, verified binary.
pub mod download;
pub mod record;
pub mod verify;

use crate::agent::policy::Desired;
use crate::agent::updates::{Staged, Updater};
use crate::paths::Paths;
use record::Record;
use std::path::{Path, PathBuf};

/// The engine on a device (or a sandbox root).
#[derive(Clone)]
pub struct Engine {
    pub paths: Paths,
    /// Resolves relative artifact URLs (relative to the management app).
    pub base_url: Option<String>,
}

impl Engine {
    pub fn new(paths: Paths, base_url: Option<String>) -> Engine {
        Engine { paths, base_url }
    }

    fn resolve(&self, url: &str) -> String {
        match (&self.base_url, url.contains("://")) {
            (Some(base), false) => {
                if let Some(dir) = base.strip_prefix("file://") {
                    format!(
                        "file://{}",
                        Path::new(dir).join(url.trim_start_matches('/')).display()
                    )
                } else {
                    format!(
                        "{}/{}",
                        base.trim_end_matches('/'),
                        url.trim_start_matches('/')
                    )
                }
            }
            _ => url.to_string(),
        }
    }

    fn cache_file(&self, name: &str, version: &str) -> PathBuf {
        self.paths.cache_dir().join(format!("{name}-{version}"))
    }
}

/// A version label for a `pin_url` artifact: its URL's hash, stable for the same URL.
fn url_version(url: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(url.as_bytes());
    format!("url-{}", crate::protocol::file::hex(&d[..6]))
}

impl Updater for Engine {
    fn stage(&mut self, name: &str, desired: &Desired) -> Result<Staged, String> {
        let (version, url, sha256, size, pinned) = match desired {
            Desired::Install(t) => (
                t.version.clone(),
                self.resolve(&t.url),
                t.sha256.clone(),
                t.size,
                None,
            ),
            Desired::InstallUrl(u) => (url_version(u), u.clone(), None, None, Some(u.clone())),
            Desired::Keep => return Err("nothing to install".into()),
        };
        if sha256.is_none() {
            crate::warn!(
                "update",
                "{name} {version} from {url} has no sha256 from the app (a pin_url): checking it as an executable for this machine only"
            );
        }
        let part = self
            .paths
            .cache_dir()
            .join(format!(".{name}-{version}.part"));
        let got =
            download::fetch(&url, &part, size, sha256.as_deref()).map_err(|e| e.to_string())?;
        let checked =
            verify::executable(&part, name).and_then(|_| verify::reports_itself(&part, name));
        let reported = match checked {
            Ok(v) => v,
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                return Err(e);
            }
        };
        if pinned.is_none() && reported != version {
            let _ = std::fs::remove_file(&part);
            return Err(format!(
                "the artifact says it is {name} {reported}, the app offered {version}"
            ));
        }
        let version = if pinned.is_some() {
            reported.clone()
        } else {
            version
        };
        let dest = self.cache_file(name, &version);
        crate::fsutil::durable_rename(&part, &dest)
            .map_err(|e| format!("keeping {}: {e}", dest.display()))?;
        crate::info!(
            "update",
            "{name} {version} verified ({} bytes, sha256 {})",
            got.size,
            &got.sha256[..16]
        );
        Ok(Staged {
            name: name.into(),
            version,
            path: dest,
            url: pinned,
        })
    }

    fn activate(&mut self, staged: &Staged) -> Result<(), String> {
        let link = self.paths.bin_link(&staged.name);
        let target = PathBuf::from(format!("../cache/{}-{}", staged.name, staged.version));
        let mut rec = Record::load(&self.paths);
        let entry = rec.entry(&staged.name);
        let previous = entry.current.clone();
        crate::systemd::swap_link(&link, &target)
            .map_err(|e| format!("switching {}: {e}", link.display()))?;
        if previous.as_deref() != Some(staged.version.as_str()) {
            entry.previous = previous;
        }
        entry.current = Some(staged.version.clone());
        entry.current_url = staged.url.clone();
        rec.save(&self.paths)
            .map_err(|e| format!("saving the version record: {e}"))?;
        self.clean_cache(&rec);
        Ok(())
    }

    fn rollback(&mut self, name: &str) -> Result<String, String> {
        let mut rec = Record::load(&self.paths);
        let entry = rec.entry(name);
        let prev = entry
            .previous
            .clone()
            .ok_or_else(|| format!("{name} has no previous version"))?;
        if !self.cache_file(name, &prev).exists() {
            return Err(format!("{name} {prev} is no longer in the cache"));
        }
        let link = self.paths.bin_link(name);
        crate::systemd::swap_link(&link, Path::new(&format!("../cache/{name}-{prev}")))
            .map_err(|e| e.to_string())?;
        if let Some(bad) = entry.current.replace(prev.clone()) {
            if !entry.bad.contains(&bad) {
                entry.bad.push(bad);
            }
        }
        entry.previous = None;
        entry.current_url = None;
        rec.save(&self.paths).map_err(|e| e.to_string())?;
        Ok(prev)
    }

    fn current(&self, name: &str) -> (Option<String>, Option<String>) {
        let rec = Record::load(&self.paths);
        let from_link = std::fs::read_link(self.paths.bin_link(name))
            .ok()
            .and_then(|t| {
                t.file_name()?
                    .to_str()?
                    .strip_prefix(&format!("{name}-"))?
                    .to_string()
                    .into()
            });
        match rec.get(name) {
            Some(e) if e.current.is_some() => (e.current.clone(), e.current_url.clone()),
            _ => (from_link, None),
        }
    }

    fn bad_versions(&self, name: &str) -> Vec<String> {
        Record::load(&self.paths)
            .get(name)
            .map(|e| e.bad.clone())
            .unwrap_or_default()
    }

    fn boxed_clone(&self) -> Box<dyn Updater> {
        Box::new(self.clone())
    }
}

impl Engine {
    /// Keeps current and previous of each binary (and anything a link points at); removes
    /// other versions and leftover partial downloads older than a day.
    fn clean_cache(&self, rec: &Record) {
        let Ok(dir) = std::fs::read_dir(self.paths.cache_dir()) else {
            return;
        };
        let mut keep: Vec<String> = Vec::new();
        for (name, e) in &rec.binaries {
            for v in [&e.current, &e.previous].into_iter().flatten() {
                keep.push(format!("{name}-{v}"));
            }
        }
        for name in ["svc-agent", "svc-server"] {
            if let Ok(t) = std::fs::read_link(self.paths.bin_link(name)) {
                if let Some(f) = t.file_name().and_then(|f| f.to_str()) {
                    keep.push(f.to_string());
                }
            }
        }
        for entry in dir.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let managed = file.starts_with("svc-agent-") || file.starts_with("svc-server-");
            if managed && !keep.contains(&file) {
                crate::info!("update", "removing {file} from the cache");
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}
