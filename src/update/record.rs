//! `/opt/svc/versions.json`: current, previous and known-bad versions of each binary,
//! written atomically.
use crate::paths::Paths;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub current: Option<String>,
    pub previous: Option<String>,
    /// The `pin_url` the current version came from, if it did.
    #[serde(default)]
    pub current_url: Option<String>,
    /// Rolled back: not installed again until the app offers another version.
    #[serde(default)]
    pub bad: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub binaries: BTreeMap<String, Entry>,
}

impl Record {
    fn path(paths: &Paths) -> std::path::PathBuf {
        paths.state_dir().join("versions.json")
    }

    pub fn load(paths: &Paths) -> Record {
        std::fs::read(Self::path(paths))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub fn save(&self, paths: &Paths) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(self).unwrap_or_default();
        crate::fsutil::atomic_write(&Self::path(paths), &text, 0o644)
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.binaries.get(name)
    }

    pub fn entry(&mut self, name: &str) -> &mut Entry {
        self.binaries.entry(name.to_string()).or_default()
    }
}
