//! DNS redirect for the hotspot: NetworkManager's shared-mode dnsmasq reads
//! `/etc/NetworkManager/dnsmasq-shared.d/`; one `address=/#/10.42.0.1` line sends every name
//! to the portal, so phones open their captive-portal sign-in.
use std::path::{Path, PathBuf};

pub(crate) const HOTSPOT_ADDR: &str = "10.42.0.1";
pub(crate) const DROP_IN: &str = "etc/NetworkManager/dnsmasq-shared.d/80-svc.conf";

pub(crate) fn drop_in_text() -> String {
    format!("# written by svc-agent (agent-provisioning)\naddress=/#/{HOTSPOT_ADDR}\n")
}

/// Write the drop-in under `root`; returns its path.
pub(crate) fn install(root: &Path) -> std::io::Result<PathBuf> {
    let p = root.join(DROP_IN);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d)?;
    }
    crate::fsutil::atomic_write(&p, drop_in_text().as_bytes(), 0o644)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_wildcard_redirect() {
        let d = std::env::temp_dir().join(format!("svc-dns-{}", std::process::id()));
        let p = super::install(&d).unwrap();
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.lines().any(|l| l == "address=/#/10.42.0.1"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
