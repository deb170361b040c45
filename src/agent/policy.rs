//! Pure decisions of the agent: which svc-server to run, when a restart for an update is
//! allowed, whether to fast-start. No effects here; the loop feeds facts in.
use crate::config::model::{MaintenanceWindow, VersionChoice, VersionControl};
use crate::protocol::Target;

/// What should be installed for one binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Desired {
    /// Keep what runs: nothing is offered, or the offer is the running version.
    Keep,
    /// Install this target (from the app's resolution of channel or pin_version).
    Install(Target),
    /// `pin_url`: this URL, with no server sha256 (checked by ELF and version instead).
    InstallUrl(String),
    /// The offer is older than what runs and no `pin_version` names it: a replayed answer
    /// (an old poll answer, an old release medium). Nothing is downloaded.
    RefuseOlder { offered: String, current: String },
}

/// Applies spec §2.4's precedence: `pin_url` beats `pin_version` beats the channel. The app
/// resolves channel and `pin_version` into `offered`; a `pin_url` is fetched as is.
/// `bad` lists versions rolled back before: they are not retried until another is offered.
pub(crate) fn desired(
    vc: &VersionControl,
    offered: Option<&Target>,
    current_version: Option<&str>,
    current_url: Option<&str>,
    bad: &[String],
) -> Desired {
    match vc.choice() {
        VersionChoice::Url(url) => {
            if current_url == Some(url) {
                Desired::Keep
            } else {
                Desired::InstallUrl(url.to_string())
            }
        }
        choice @ (VersionChoice::Version(_) | VersionChoice::Channel(_)) => match offered {
            Some(t) if Some(t.version.as_str()) != current_version && !bad.contains(&t.version) => {
                let pinned =
                    matches!(choice, VersionChoice::Version(p) if same_version(p, &t.version));
                match current_version {
                    Some(cur) if !pinned && older(&t.version, cur) => Desired::RefuseOlder {
                        offered: t.version.clone(),
                        current: cur.to_string(),
                    },
                    _ => Desired::Install(t.clone()),
                }
            }
            _ => Desired::Keep,
        },
    }
}

/// Whether `desired` is what the config pinned: a `pin_url`, or the offer of the version
/// `pin_version` names. The byte budget never holds a pin.
pub(crate) fn pinned(vc: &VersionControl, desired: &Desired) -> bool {
    match (vc.choice(), desired) {
        (VersionChoice::Url(_), Desired::InstallUrl(_)) => true,
        (VersionChoice::Version(p), Desired::Install(t)) => same_version(p, &t.version),
        _ => false,
    }
}

fn parse_version(v: &str) -> Option<semver::Version> {
    semver::Version::parse(v.trim().trim_start_matches('v')).ok()
}

fn same_version(a: &str, b: &str) -> bool {
    a.trim().trim_start_matches('v') == b.trim().trim_start_matches('v')
}

/// `offered` is a lower semver than `current`. Versions that are not semver (a pinned
/// URL's `<version>+<sha12>` parses; free-form names do not) are not compared.
fn older(offered: &str, current: &str) -> bool {
    match (parse_version(offered), parse_version(current)) {
        // Build metadata (`+<sha12>` of a pinned URL's install) does not order releases.
        (Some(o), Some(c)) => {
            (o.major, o.minor, o.patch, &o.pre) < (c.major, c.minor, c.patch, &c.pre)
        }
        _ => false,
    }
}

/// Local wall-clock facts for the maintenance window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalTime {
    /// 0 = Monday .. 6 = Sunday.
    pub weekday: u8,
    pub minute_of_day: u16,
}

/// Why an svc-server restart for an update waits, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RestartGate {
    Now,
    OutsideWindow,
    ServerBusy,
    /// The update server asks to wait (hawkBit: `update: skip`, a download-only action, or
    /// `maintenanceWindow: unavailable`).
    UpdateServerHold,
}

/// Spec §3: no window: at once; a window: only inside it and only while svc-server is not
/// processing config changes. An update server's own hold (hawkBit's `update: skip` or
/// `maintenanceWindow: unavailable`) only adds a wait: it never opens what the machine's
/// window keeps shut, so there is one rule for both (docs/hawkbit.md).
pub(crate) fn restart_gate(
    window: Option<&MaintenanceWindow>,
    now: LocalTime,
    server_busy: bool,
    update_server_hold: bool,
) -> RestartGate {
    if update_server_hold {
        return RestartGate::UpdateServerHold;
    }
    match window {
        None => RestartGate::Now,
        Some(w) if !w.allows(now.weekday, now.minute_of_day) => RestartGate::OutsideWindow,
        Some(_) if server_busy => RestartGate::ServerBusy,
        Some(_) => RestartGate::Now,
    }
}

/// Fast start (spec §3): the cached config's `fast_start`, or `SVC_AGENT_FAST_START=1`.
pub(crate) fn fast_start(cached_fast_start: bool, env_value: Option<&str>) -> bool {
    cached_fast_start || matches!(env_value.map(str::trim), Some("1" | "true"))
}

/// The first-contact wait (no fast start): how long to sleep before the next try, or `None`
/// when the wait is over because the next try would come after the deadline. The next try
/// is whatever the one retry rule (`backoff::wait_after`) scheduled; this wait
/// never shortens it, so a 401 is not polled again for an hour and a `Retry-After` holds
/// here as in every other state.
pub(crate) fn first_contact_wait(
    now: std::time::Instant,
    next_try: std::time::Instant,
    deadline: std::time::Instant,
) -> Option<std::time::Duration> {
    (now < deadline && next_try < deadline).then(|| next_try.saturating_duration_since(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(v: &str) -> Target {
        Target {
            version: v.into(),
            url: format!("https://r/{v}"),
            sha256: None,
            size: None,
            signature: None,
            deltas: Vec::new(),
        }
    }

    fn vc(pin_version: &str, pin_url: &str) -> VersionControl {
        VersionControl {
            release_channel: "stable".into(),
            pin_version: pin_version.into(),
            pin_url: pin_url.into(),
        }
    }

    #[test]
    fn precedence_and_bad_versions() {
        let t = target("1.1.0");
        assert_eq!(
            desired(&vc("", ""), Some(&t), Some("1.0.0"), None, &[]),
            Desired::Install(t.clone())
        );
        assert_eq!(
            desired(&vc("", ""), Some(&t), Some("1.1.0"), None, &[]),
            Desired::Keep
        );
        assert_eq!(
            desired(&vc("", ""), None, Some("1.0.0"), None, &[]),
            Desired::Keep
        );
        assert_eq!(
            desired(
                &vc("", ""),
                Some(&t),
                Some("1.0.0"),
                None,
                &["1.1.0".into()]
            ),
            Desired::Keep
        );
        // pin_url wins over pin_version and over what the app offers.
        assert_eq!(
            desired(
                &vc("1.1.0", "https://x/build"),
                Some(&t),
                Some("1.0.0"),
                None,
                &[]
            ),
            Desired::InstallUrl("https://x/build".into())
        );
        assert_eq!(
            desired(
                &vc("", "https://x/build"),
                Some(&t),
                Some("9"),
                Some("https://x/build"),
                &[]
            ),
            Desired::Keep
        );
    }

    /// A replayed answer (an old poll answer, an old release medium) offering an older
    /// release than the running one is refused; a `pin_version` naming it is the one
    /// explicit downgrade.
    #[test]
    fn older_offers_are_refused_unless_pinned() {
        let old = target("1.0.0");
        assert_eq!(
            desired(&vc("", ""), Some(&old), Some("1.1.0"), None, &[]),
            Desired::RefuseOlder {
                offered: "1.0.0".into(),
                current: "1.1.0".into()
            }
        );
        assert_eq!(
            desired(
                &vc("", ""),
                Some(&target("1.1.0-rc.1")),
                Some("v1.1.0"),
                None,
                &[]
            ),
            Desired::RefuseOlder {
                offered: "1.1.0-rc.1".into(),
                current: "v1.1.0".into()
            }
        );
        // pin_version names the older release: an explicit downgrade from the config.
        assert_eq!(
            desired(&vc("1.0.0", ""), Some(&old), Some("1.1.0"), None, &[]),
            Desired::Install(old.clone())
        );
        // A pin to another version does not open the door to this one.
        assert!(matches!(
            desired(&vc("0.9.0", ""), Some(&old), Some("1.1.0"), None, &[]),
            Desired::RefuseOlder { .. }
        ));
        // Back from a pinned URL's build (`1.0.0+<sha12>`) to the same release: not older.
        assert_eq!(
            desired(
                &vc("", ""),
                Some(&old),
                Some("1.0.0+0123456789ab"),
                None,
                &[]
            ),
            Desired::Install(old.clone())
        );
        // Versions that are not semver are not compared.
        assert_eq!(
            desired(
                &vc("", ""),
                Some(&target("build-7")),
                Some("build-9"),
                None,
                &[]
            ),
            Desired::Install(target("build-7"))
        );
    }

    #[test]
    fn restart_gate_follows_spec_table() {
        let w = MaintenanceWindow {
            days: vec![5, 6],
            start: 120,
            end: 240,
        };
        let sat_3am = LocalTime {
            weekday: 5,
            minute_of_day: 180,
        };
        let mon_3am = LocalTime {
            weekday: 0,
            minute_of_day: 180,
        };
        assert_eq!(restart_gate(None, mon_3am, true, false), RestartGate::Now);
        assert_eq!(
            restart_gate(Some(&w), mon_3am, false, false),
            RestartGate::OutsideWindow
        );
        assert_eq!(
            restart_gate(Some(&w), sat_3am, true, false),
            RestartGate::ServerBusy
        );
        assert_eq!(
            restart_gate(Some(&w), sat_3am, false, false),
            RestartGate::Now
        );
        // The update server's hold adds a wait, with or without a window of the machine's.
        assert_eq!(
            restart_gate(None, mon_3am, false, true),
            RestartGate::UpdateServerHold
        );
        assert_eq!(
            restart_gate(Some(&w), sat_3am, false, true),
            RestartGate::UpdateServerHold
        );
    }

    #[test]
    fn fast_start_sources() {
        assert!(fast_start(true, None));
        assert!(fast_start(false, Some("1")));
        assert!(!fast_start(false, Some("0")));
        assert!(!fast_start(false, None));
    }

    #[test]
    fn the_first_contact_wait_never_shortens_the_retry_rule() {
        use std::time::{Duration, Instant};
        let now = Instant::now();
        let s = Duration::from_secs;
        // A backoff of 30 s inside a 60 s wait: the whole 30 s (the old loop cut it to 5 s).
        assert_eq!(
            first_contact_wait(now, now + s(30), now + s(60)),
            Some(s(30))
        );
        // A 401's hour, a Retry-After or a backoff past the deadline: the wait is over.
        assert_eq!(first_contact_wait(now, now + s(3600), now + s(60)), None);
        assert_eq!(first_contact_wait(now, now + s(61), now + s(60)), None);
        // Due now: try at once; past the deadline: over.
        assert_eq!(
            first_contact_wait(now, now, now + s(60)),
            Some(Duration::ZERO)
        );
        assert_eq!(
            first_contact_wait(now + s(60), now + s(60), now + s(60)),
            None
        );
    }

    #[test]
    fn a_pin_is_the_pinned_url_or_the_offer_of_the_pinned_version() {
        let pinned_version = VersionControl {
            pin_version: "2.0.0".into(),
            ..Default::default()
        };
        assert!(pinned(&pinned_version, &Desired::Install(target("2.0.0"))));
        assert!(pinned(&pinned_version, &Desired::Install(target("v2.0.0"))));
        assert!(!pinned(&pinned_version, &Desired::Install(target("2.1.0"))));
        let channel = VersionControl::default();
        assert!(!pinned(&channel, &Desired::Install(target("2.0.0"))));
        let url = VersionControl {
            pin_url: "https://cdn.example/x".into(),
            ..Default::default()
        };
        assert!(pinned(
            &url,
            &Desired::InstallUrl("https://cdn.example/x".into())
        ));
        assert!(!pinned(&url, &Desired::Keep));
    }
}
