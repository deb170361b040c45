//! The inventory of networks handed over at the machine (portal, DPP, BLE) that are already
//! saved as NetworkManager keyfiles (`svc-user-*`), read back at the service's start.
/// Priority of a network entered in the portal: above configured networks (-999..999 are
/// the config's range), since the person at the machine chose it just now.
pub(crate) const USER_PRIORITY: i32 = 999;

/// Profiles of networks from the portal already on disk (`svc-user-*`), oldest first: those
/// that worked, and the disabled ones (`autoconnect=false`: networks that did not work).
pub(super) fn saved_user_networks(dir: &std::path::Path) -> (Vec<(i32, String)>, Vec<String>) {
    let mut v: Vec<(std::time::SystemTime, String, bool)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let id = super::nm::id_from_keyfile_name(&e.file_name().to_string_lossy())?;
                    let modified = e.metadata().and_then(|m| m.modified()).ok()?;
                    let text = std::fs::read_to_string(e.path()).ok()?;
                    let disabled = text.lines().any(|l| l.trim() == "autoconnect=false");
                    id.starts_with("user-").then_some((modified, id, disabled))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    let (failed, good): (Vec<_>, Vec<_>) = v.into_iter().partition(|(_, _, d)| *d);
    (
        good.into_iter()
            .map(|(_, id, _)| (USER_PRIORITY, id))
            .collect(),
        failed.into_iter().map(|(_, id, _)| id).collect(),
    )
}
