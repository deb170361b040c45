//! The pure provisioning state machine: `step(state, event, now) -> (state, actions)`.
//! Times are seconds on a monotonic clock supplied by the caller.

/// Timings taken from the effective settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    pub offline_timeout: u64,
    pub user_idle_timeout: u64,
    pub retry_networks: u64,
    /// The hotspot password is fit for a hotspot (`defaults::hotspot_password_problem`):
    /// without one the machine never enters hotspot mode.
    pub hotspot_allowed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Connected (and online when checked); `since` is when it last was.
    Online,
    /// Offline since `since`; hotspot not up yet.
    Offline { since: u64 },
    /// Hotspot up since `since`; `last_retry` is the last attempt at known networks.
    Hotspot { since: u64, last_retry: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct State {
    pub mode: Mode,
    /// Last portal request (a phone mid-setup).
    pub last_user: Option<u64>,
    pub configured: bool,
    /// Provisioning was forced on the device (root): only then may the portal replace
    /// existing credentials. Ends with the hotspot session.
    pub forced: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    Tick,
    /// Result of a connectivity check: a known network connected and the check URL reached.
    Connectivity {
        online: bool,
    },
    /// A portal request arrived.
    UserActivity,
    /// The phone submitted a network; the hotspot must give way to it.
    UserNetwork,
    /// `/opt/svc/force-provisioning` found (or the command).
    ForceProvisioning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    StartHotspot,
    StopHotspot,
    /// Try the configured networks (by priority when roaming).
    TryNetworks,
}

impl State {
    pub(crate) fn new(now: u64, configured: bool) -> State {
        State {
            mode: Mode::Offline { since: now },
            last_user: None,
            configured,
            forced: false,
        }
    }
}

fn phone_active(s: &State, now: u64, t: &Timing) -> bool {
    s.last_user
        .is_some_and(|u| now.saturating_sub(u) < t.user_idle_timeout)
}

/// Whether the next `Tick` starts the hotspot: offline for `offline_timeout` (at once on a
/// machine without credentials) and a hotspot allowed. The driver asks first, so that the
/// scan before it and the check that NetworkManager is not still connecting happen only then.
pub(crate) fn hotspot_due(s: &State, now: u64, t: &Timing) -> bool {
    match s.mode {
        Mode::Offline { since } => {
            t.hotspot_allowed && (!s.configured || now.saturating_sub(since) >= t.offline_timeout)
        }
        Mode::Online | Mode::Hotspot { .. } => false,
    }
}

pub(crate) fn step(mut s: State, ev: Event, now: u64, t: &Timing) -> (State, Vec<Action>) {
    let mut acts = Vec::new();
    match ev {
        Event::UserActivity => s.last_user = Some(now),
        Event::ForceProvisioning => {
            s.forced = true;
            if !matches!(s.mode, Mode::Hotspot { .. }) && t.hotspot_allowed {
                s.mode = Mode::Hotspot {
                    since: now,
                    last_retry: now,
                };
                acts.push(Action::StartHotspot);
            }
        }
        Event::UserNetwork => {
            if matches!(s.mode, Mode::Hotspot { .. }) {
                acts.push(Action::StopHotspot);
            }
            acts.push(Action::TryNetworks);
            s.last_user = None;
            s.mode = Mode::Offline { since: now };
        }
        Event::Connectivity { online } => match (&s.mode, online) {
            (Mode::Hotspot { .. }, true) => {
                acts.push(Action::StopHotspot);
                s.mode = Mode::Online;
                s.forced = false;
            }
            (Mode::Hotspot { .. }, false) => {}
            (_, true) => s.mode = Mode::Online,
            (Mode::Online, false) => s.mode = Mode::Offline { since: now },
            (Mode::Offline { .. }, false) => {}
        },
        Event::Tick => match s.mode {
            Mode::Offline { .. } => {
                if hotspot_due(&s, now, t) {
                    s.mode = Mode::Hotspot {
                        since: now,
                        last_retry: now,
                    };
                    acts.push(Action::StartHotspot);
                }
            }
            Mode::Hotspot { since, last_retry } => {
                if now.saturating_sub(last_retry) >= t.retry_networks && !phone_active(&s, now, t) {
                    // Single radio: the hotspot yields while known networks are tried; the
                    // daemon reports Connectivity, and a failed attempt brings it back.
                    acts.push(Action::StopHotspot);
                    acts.push(Action::TryNetworks);
                    s.mode = Mode::Hotspot {
                        since,
                        last_retry: now,
                    };
                    acts.push(Action::StartHotspot);
                }
            }
            Mode::Online => {}
        },
    }
    (s, acts)
}

/// NetworkManager's own connectivity state (`nmcli networking connectivity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NmConnectivity {
    Full,
    Limited,
    Portal,
    None,
    /// Checks disabled or not run yet (or nmcli missing).
    Unknown,
}

impl NmConnectivity {
    pub(crate) fn parse(s: &str) -> NmConnectivity {
        match s.trim() {
            "full" => NmConnectivity::Full,
            "limited" => NmConnectivity::Limited,
            "portal" => NmConnectivity::Portal,
            "none" => NmConnectivity::None,
            _ => NmConnectivity::Unknown,
        }
    }
}

/// What the connectivity check saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Observed {
    /// The configured check URL answered 2xx (`None`: no check URL).
    pub check_url: Option<bool>,
    pub nm: NmConnectivity,
    /// The machine has a default route (IPv4 or IPv6).
    pub default_route: bool,
    /// The daemon's last poll reached the management app.
    pub app_reachable: bool,
}

/// Online, judged by the network, not by the management app: a configured check URL decides;
/// without one, NetworkManager's "full", or (its checks disabled) a default route, is online,
/// and so is an app that answered. An app outage alone never makes the machine offline (it
/// would raise the hotspot fleet-wide and take single-radio devices off their uplink).
pub(crate) fn is_online(o: &Observed) -> bool {
    if let Some(ok) = o.check_url {
        return ok;
    }
    o.app_reachable
        || match o.nm {
            NmConnectivity::Full => true,
            NmConnectivity::Unknown => o.default_route,
            NmConnectivity::Limited | NmConnectivity::Portal | NmConnectivity::None => false,
        }
}

/// Roaming order: highest priority first; ties keep config order.
pub(crate) fn roaming_order<T: Clone>(nets: &[(i32, T)]) -> Vec<T> {
    let mut v: Vec<(usize, &(i32, T))> = nets.iter().enumerate().collect();
    v.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    v.into_iter().map(|(_, n)| n.1.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    const T: Timing = Timing {
        offline_timeout: 120,
        user_idle_timeout: 300,
        retry_networks: 60,
        hotspot_allowed: true,
    };

    #[test]
    fn hotspot_after_offline_timeout_only() {
        let s = State::new(0, true);
        let (s, a) = step(s, Event::Tick, 119, &T);
        assert!(a.is_empty());
        let (s, a) = step(s, Event::Tick, 120, &T);
        assert_eq!(a, vec![Action::StartHotspot]);
        assert!(matches!(s.mode, Mode::Hotspot { .. }));
    }

    #[test]
    fn no_hotspot_mode_without_a_fit_password() {
        let t = Timing {
            hotspot_allowed: false,
            ..T
        };
        let (s, a) = step(State::new(0, false), Event::Tick, 500, &t);
        assert!(a.is_empty());
        let (s, a) = step(s, Event::ForceProvisioning, 501, &t);
        assert!(a.is_empty());
        assert!(matches!(s.mode, Mode::Offline { .. }));
    }

    #[test]
    fn unconfigured_machine_opens_hotspot_at_once() {
        let (_, a) = step(State::new(0, false), Event::Tick, 1, &T);
        assert_eq!(a, vec![Action::StartHotspot]);
    }

    #[test]
    fn retries_while_up_but_not_while_phone_active() {
        let (s, _) = step(State::new(0, true), Event::Tick, 120, &T);
        let (s, a) = step(s, Event::Tick, 179, &T);
        assert!(a.is_empty());
        let (s, a) = step(s, Event::Tick, 180, &T);
        assert!(a.contains(&Action::TryNetworks));
        let (s, _) = step(s, Event::UserActivity, 200, &T);
        let (s, a) = step(s, Event::Tick, 260, &T);
        assert!(a.is_empty(), "phone mid-setup: no retry");
        let (_, a) = step(s, Event::Tick, 500, &T);
        assert!(a.contains(&Action::TryNetworks), "phone idle again");
    }

    #[test]
    fn restored_network_takes_hotspot_down() {
        let (s, _) = step(State::new(0, true), Event::Tick, 120, &T);
        let (s, a) = step(s, Event::Connectivity { online: true }, 190, &T);
        assert_eq!(a, vec![Action::StopHotspot]);
        assert_eq!(s.mode, Mode::Online);
    }

    #[test]
    fn forced_provisioning_starts_hotspot_while_online() {
        let (s, _) = step(
            State::new(0, true),
            Event::Connectivity { online: true },
            1,
            &T,
        );
        let (s, a) = step(s, Event::ForceProvisioning, 2, &T);
        assert_eq!(a, vec![Action::StartHotspot]);
        assert!(matches!(s.mode, Mode::Hotspot { .. }));
    }

    #[test]
    fn only_a_forced_session_may_replace_credentials_and_it_ends_online() {
        let (s, _) = step(State::new(0, true), Event::Tick, 120, &T);
        assert!(matches!(s.mode, Mode::Hotspot { .. }));
        assert!(!s.forced, "a lost network is not a local request");
        let (s, _) = step(s, Event::ForceProvisioning, 130, &T);
        assert!(s.forced);
        let (s, _) = step(s, Event::Connectivity { online: true }, 140, &T);
        assert!(!s.forced, "the permission ends with the session");
    }

    #[test]
    fn an_app_outage_with_the_network_up_does_not_raise_the_hotspot() {
        let app_down = |nm, default_route| Observed {
            check_url: None,
            nm,
            default_route,
            app_reachable: false,
        };
        for up in [
            app_down(NmConnectivity::Full, true),
            app_down(NmConnectivity::Unknown, true),
        ] {
            let mut s = State::new(0, true);
            for now in (0..2000).step_by(2) {
                let (s2, a) = step(
                    s,
                    Event::Connectivity {
                        online: is_online(&up),
                    },
                    now,
                    &T,
                );
                assert!(a.is_empty());
                let (s2, a) = step(s2, Event::Tick, now, &T);
                assert!(!a.contains(&Action::StartHotspot), "{up:?} at {now}");
                s = s2;
            }
            assert_eq!(s.mode, Mode::Online);
        }
        // The network itself down: offline, whatever the app did last.
        for down in [
            app_down(NmConnectivity::None, false),
            app_down(NmConnectivity::Limited, true),
            app_down(NmConnectivity::Unknown, false),
        ] {
            assert!(!is_online(&down), "{down:?}");
        }
        // A check URL, when configured, decides.
        let checked = Observed {
            check_url: Some(false),
            ..app_down(NmConnectivity::Full, true)
        };
        assert!(!is_online(&checked));
        assert_eq!(NmConnectivity::parse("full\n"), NmConnectivity::Full);
        assert_eq!(NmConnectivity::parse(""), NmConnectivity::Unknown);
    }

    #[test]
    fn roaming_by_priority_skips_no_internet() {
        let nets = vec![(1, "c"), (10, "a"), (5, "b")];
        assert_eq!(roaming_order(&nets), vec!["a", "b", "c"]);
    }
}
