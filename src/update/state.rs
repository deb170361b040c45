//! The engine's state as the daemon reads it: every kind's whole state from one load of the
//! version records, under the state lock, once per loop pass.
use super::activate::linked_version;
use super::download::PinState;
use super::record::{StateLock, VersionRecords};
use super::{Kind, SUB};
use crate::paths::Paths;

/// One kind's whole state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BinaryState {
    /// The active version: the link's target (the truth about what runs), else the record's.
    pub(crate) current: Option<String>,
    /// For a `pin_url` install that is still the active version: the URL it came from.
    pub(crate) pinned_url: Option<String>,
    pub(crate) previous: Option<String>,
    pub(crate) target: Option<String>,
    /// Versions rolled back: not retried until the app offers another.
    pub(crate) bad: Vec<String>,
    /// The version on probation, when it is the linked one (svc-server's, which an agent
    /// restart during the probation resumes).
    pub(crate) probation: Option<String>,
}

/// Every kind's state and the records they were read from (the status report shows them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) agent: BinaryState,
    pub(crate) server: BinaryState,
    pub(crate) records: VersionRecords,
}

/// Reads every kind's state: one load of the version records under [`StateLock`], the links
/// and the pin states. A probation whose activation a power cut interrupted between the link
/// swap and the record's save has its record completed here, in the same turn (found by the
/// power-cut campaign). Never fails: an unreadable record or a lock that cannot be taken
/// leaves what the links say (the record is set aside by its loader), as the daemon had it.
pub(crate) fn read_state(paths: &Paths) -> Snapshot {
    let held = StateLock::acquire(paths)
        .map_err(|e| crate::debug!(SUB, "reading the state without the lock: {e}"))
        .ok();
    let mut records = VersionRecords::load(paths).unwrap_or_else(|e| {
        crate::debug!(SUB, "{e}");
        VersionRecords::default()
    });
    let state = |kind: Kind, records: &mut VersionRecords| {
        let name = kind.name();
        let linked = linked_version(paths, name);
        let rec = records.get(name).cloned().unwrap_or_default();
        let probation = rec
            .probation
            .clone()
            .filter(|p| kind == Kind::Server && linked.as_deref() == Some(p.as_str()));
        if let (Some(p), Some(held)) = (&probation, &held) {
            if let Err(e) = super::rollback::complete_server_record(paths, records, p, held) {
                crate::warn!(SUB, "svc-server {p}: completing its record: {e}");
            }
        }
        let rec = records.get(name).cloned().unwrap_or_default();
        let current = linked.or(rec.current);
        // The pinned URL counts only while the version it installed is the active one.
        let pinned_url = PinState::load(paths, name)
            .filter(|p| current.as_deref() == Some(p.version.as_str()))
            .map(|p| p.url);
        BinaryState {
            current,
            pinned_url,
            previous: rec.previous,
            target: rec.target,
            bad: rec.bad,
            probation,
        }
    };
    let agent = state(Kind::Agent, &mut records);
    let server = state(Kind::Server, &mut records);
    Snapshot {
        agent,
        server,
        records,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_read_gives_every_kind_and_completes_an_interrupted_probation_record() {
        let dir = std::env::temp_dir().join(format!("svc-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let paths = Paths::new(&dir);
        assert_eq!(read_state(&paths), Snapshot::default());
        // svc-server 2 linked and on probation, but the record still says 1 (a power cut
        // between the link swap and the record's save).
        std::fs::create_dir_all(paths.cache_dir()).unwrap();
        std::fs::write(paths.cache_dir().join("svc-server-2"), b"x").unwrap();
        super::super::activate::swap_link(
            &paths,
            "svc-server",
            &paths.cache_dir().join("svc-server-2"),
        )
        .unwrap();
        let mut r = VersionRecords::default();
        let rec = r.entry("svc-server");
        rec.current = Some("1".into());
        rec.probation = Some("2".into());
        rec.bad = vec!["0".into()];
        r.save(&paths, &StateLock::acquire(&paths).unwrap())
            .unwrap();
        let s = read_state(&paths);
        assert_eq!(s.server.current.as_deref(), Some("2"));
        assert_eq!(s.server.previous.as_deref(), Some("1"));
        assert_eq!(s.server.probation.as_deref(), Some("2"));
        assert_eq!(s.server.bad, vec!["0".to_string()]);
        assert_eq!(s.agent, BinaryState::default());
        let on_disk = VersionRecords::load(&paths).unwrap();
        assert_eq!(on_disk, s.records, "the completed record is the one shown");
        assert_eq!(
            on_disk.get("svc-server").unwrap().current.as_deref(),
            Some("2")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
