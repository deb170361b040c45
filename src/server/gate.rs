//! The restart gate (docs/server.md): `$SVC_HOME/state/busy` holds svc-server's pid while it
//! processes a config change or a module upgrade. The agent reads it before restarting
//! svc-server for an update; a file whose pid is dead does not count.
use std::path::{Path, PathBuf};

/// The busy file of a `SVC_HOME`.
pub(crate) fn busy_path(svc_home: &Path) -> PathBuf {
    svc_home.join("state").join("busy")
}

/// Whether the busy file at `path` is held by a live process.
pub(crate) fn is_busy(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    match text.trim().parse::<i32>() {
        Ok(pid) if pid > 0 => crate::process::alive(pid),
        // A torn or foreign file: treat as busy rather than restart mid-change.
        _ => true,
    }
}

/// Holds the busy file for as long as it lives (nested holds share one file).
pub(crate) struct Gate {
    path: PathBuf,
    depth: u32,
}

impl Gate {
    /// A gate for `svc_home`; a stale file of an earlier, dead svc-server is removed.
    pub(crate) fn new(svc_home: &Path) -> Gate {
        let path = busy_path(svc_home);
        if path.exists() {
            let _ = std::fs::remove_file(&path);
        }
        Gate { path, depth: 0 }
    }

    /// Marks svc-server busy (before a change is applied).
    pub(crate) fn enter(&mut self) {
        self.depth += 1;
        if self.depth == 1 {
            let pid = format!("{}\n", std::process::id());
            if let Err(e) = crate::fsutil::atomic_write(&self.path, pid.as_bytes(), 0o644) {
                crate::warn!(
                    "svc-server",
                    "cannot write the busy file {}: {e}",
                    self.path.display()
                );
            }
        }
    }

    /// Marks the end of one change; the file goes when the last one ends.
    pub(crate) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            if let Err(e) = std::fs::remove_file(&self.path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    crate::warn!(
                        "svc-server",
                        "cannot remove the busy file {}: {e}",
                        self.path.display()
                    );
                }
            }
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        if self.depth > 0 {
            self.depth = 1;
            self.leave();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_while_entered_and_stale_when_dead() {
        let home = std::env::temp_dir().join(format!("svc-gate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let mut g = Gate::new(&home);
        assert!(!is_busy(g.path.as_path()));
        g.enter();
        g.enter();
        assert!(is_busy(g.path.as_path()));
        g.leave();
        assert!(is_busy(g.path.as_path()), "nested hold released early");
        g.leave();
        assert!(!g.path.as_path().exists());
        // A file left by a process that is gone does not count.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        std::fs::create_dir_all(g.path.as_path().parent().unwrap()).unwrap();
        std::fs::write(g.path.as_path(), format!("{dead}\n")).unwrap();
        assert!(!is_busy(g.path.as_path()));
        let _ = std::fs::remove_dir_all(&home);
    }
}
