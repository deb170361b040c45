//! The effectful driver around the pure state machine: `Provisioning::new` + `tick(now)` +
//! `status()`. The daemon loop calls `tick` with a monotonic seconds clock.
use super::defaults::Settings;
use super::nm::{NetworkBackend, WifiProfile};
use super::state::{step, Action, Event, Mode, State, Timing};
use crate::paths::Paths;

pub(crate) const HOTSPOT_ID: &str = "svc-hotspot";

pub(crate) struct Provisioning<B: NetworkBackend> {
    paths: Paths,
    backend: B,
    settings: Settings,
    state: State,
    /// Connectivity probe (the real one is `check::online` on the check URL).
    probe: Box<dyn FnMut(&Settings) -> bool>,
    hostname: String,
    /// Known network profiles (priority, NetworkManager id), tried highest first.
    known: Vec<(i32, String)>,
    /// When roaming last went through the known networks.
    last_roam: Option<u64>,
    /// Profiles of networks from the portal that worked, oldest first.
    user_nets: Vec<String>,
    /// The last network from the portal that did not work: kept (so that what was entered
    /// can be looked at) but never autoconnected nor retried; the next failure replaces it.
    failed_net: Option<String>,
    /// When the hotspot, due, began waiting for NetworkManager to finish connecting (in
    /// this offline period); `None` while it does not wait.
    held_since: Option<u64>,
    /// When NetworkManager was last seen activating a connection in this offline period.
    nm_seen_connecting: Option<u64>,
    /// Per profile, NetworkManager's words for its last failed activation; removed when it
    /// comes up or is forgotten (so at most one entry per known network).
    failures: Vec<(String, String)>,
}

/// How long a due hotspot waits, per offline period, for a connection NetworkManager is
/// still activating (association, authentication, DHCP: NetworkManager's own limits end an
/// activation in well under this); then it starts anyway, so that a NetworkManager retrying
/// for ever cannot keep the machine unreachable.
pub(crate) const NM_CONNECTING_HOLD: u64 = 120;

/// After an activation failed NetworkManager retries the profile a few seconds later
/// (`autoconnect-retries`); the hotspot raised in that gap cuts the retry short (seen in the
/// lab: DHCP timed out, the hotspot came up 5 s later, just as the retry began). So the hold
/// lasts this long past the last time NetworkManager was seen connecting.
pub(crate) const NM_RETRY_GRACE: u64 = 15;

/// Networks from the portal kept as profiles (autoconnect at the top priority); a newer one
/// replaces the oldest, so a flood of submissions cannot pile up profiles.
pub(crate) const MAX_USER_NETWORKS: usize = 4;

/// How often roaming goes through the known networks again while offline.
const ROAM_EVERY: u64 = 30;

impl<B: NetworkBackend> Provisioning<B> {
    pub(crate) fn new(paths: Paths, backend: B, settings: Settings, now: u64) -> Self {
        let configured = paths.credentials().exists();
        Provisioning {
            paths,
            backend,
            settings,
            state: State::new(now, configured),
            probe: Box::new(|s: &Settings| {
                super::check::online(&s.check_url, std::time::Duration::from_secs(10))
            }),
            hostname: hostname(),
            known: Vec::new(),
            last_roam: None,
            user_nets: Vec::new(),
            failed_net: None,
            held_since: None,
            nm_seen_connecting: None,
            failures: Vec::new(),
        }
        .with_known_from_settings()
    }

    /// The settings' networks (profiles `net-<ssid>`, as the daemon saves them).
    fn with_known_from_settings(mut self) -> Self {
        let nets: Vec<(i32, String)> = self
            .settings
            .networks
            .iter()
            .filter(|n| n.net_type == "wifi")
            .map(|n| (n.priority, super::nm::config_id(&n.ssid)))
            .collect();
        for (p, id) in nets {
            self.add_known(p, &id);
        }
        self
    }

    fn add_known(&mut self, priority: i32, id: &str) {
        self.known.retain(|(_, k)| k != id);
        self.known.push((priority, id.to_string()));
    }

    /// Saves the settings' networks (the manufacturer's defaults) as profiles.
    pub(crate) fn save_settings_networks(&mut self) {
        for n in self
            .settings
            .networks
            .clone()
            .iter()
            .filter(|n| n.net_type == "wifi")
        {
            if let Err(e) = self.backend.save_wifi(&super::client_profile(n)) {
                crate::warn!("provisioning", "network {:?} not saved: {e}", n.ssid);
            }
        }
    }

    pub(crate) fn with_probe(mut self, p: Box<dyn FnMut(&Settings) -> bool>) -> Self {
        self.probe = p;
        self
    }

    fn timing(&self) -> Timing {
        Timing {
            offline_timeout: self.settings.offline_timeout_secs,
            user_idle_timeout: self.settings.user_idle_timeout_secs,
            retry_networks: self.settings.retry_networks_secs,
            hotspot_allowed: self.settings.hotspot_enabled
                && super::defaults::hotspot_password_problem(&self.settings.hotspot_password)
                    .is_none(),
        }
    }

    /// Hotspot SSID `<prefix>-<hostname>`, truncated to 32 bytes on a char boundary.
    pub(crate) fn hotspot_ssid(&self) -> String {
        let mut s = format!("{}-{}", self.settings.hotspot_prefix, self.hostname);
        while s.len() > 32 {
            s.pop();
        }
        s
    }

    pub(crate) fn event(&mut self, ev: Event, now: u64) {
        let t = self.timing();
        let (s, acts) = step(self.state.clone(), ev, now, &t);
        self.state = s;
        for a in acts {
            self.act(a);
        }
    }

    pub(crate) fn tick(&mut self, now: u64) {
        let force = self.paths.state_dir().join("force-provisioning");
        if force.exists() && std::fs::remove_file(&force).is_ok() {
            crate::info!("provisioning", "forced provisioning requested");
            self.event(Event::ForceProvisioning, now);
        }
        self.state.configured = self.paths.credentials().exists();
        if !matches!(self.state.mode, Mode::Hotspot { .. }) {
            let online = (self.probe)(&self.settings);
            self.event(Event::Connectivity { online }, now);
            // Roaming: while offline, go through the known networks by priority.
            let due = self
                .last_roam
                .is_none_or(|t| now.saturating_sub(t) >= ROAM_EVERY);
            if !online && self.settings.roaming_mode && due && !self.known.is_empty() {
                self.last_roam = Some(now);
                self.act(Action::TryNetworks);
            }
        }
        if super::state::hotspot_due(&self.state, now, &self.timing()) && self.nm_connecting(now) {
            return;
        }
        if !matches!(self.state.mode, Mode::Offline { .. }) {
            self.held_since = None;
            self.nm_seen_connecting = None;
        }
        self.event(Event::Tick, now);
    }

    /// Whether the hotspot is due now (the next tick starts it).
    pub(crate) fn hotspot_due(&self, now: u64) -> bool {
        super::state::hotspot_due(&self.state, now, &self.timing())
    }

    /// The hotspot is due: whether it must wait because NetworkManager is still activating
    /// a connection (comitup #74/#46: a hotspot raised then cuts the join short, at every
    /// boot). At most `NM_CONNECTING_HOLD` seconds per offline period.
    fn nm_connecting(&mut self, now: u64) -> bool {
        let id = match self.backend.connecting().filter(|id| id != HOTSPOT_ID) {
            Some(id) => {
                self.nm_seen_connecting = Some(now);
                id
            }
            // Between a failed activation and NetworkManager's retry of it.
            None if self
                .nm_seen_connecting
                .is_some_and(|t| now.saturating_sub(t) < NM_RETRY_GRACE) =>
            {
                "(between attempts)".to_string()
            }
            None => return false,
        };
        let since = match self.held_since {
            Some(s) => s,
            None => {
                crate::info!(
                    "provisioning",
                    "NetworkManager is connecting {id:?}: the hotspot waits (at most {NM_CONNECTING_HOLD} s)"
                );
                self.held_since = Some(now);
                now
            }
        };
        if now.saturating_sub(since) < NM_CONNECTING_HOLD {
            return true;
        }
        crate::warn!(
            "provisioning",
            "NetworkManager is still connecting {id:?} after {NM_CONNECTING_HOLD} s: the hotspot starts"
        );
        false
    }

    /// Brings up the known networks highest priority first and stops at the first with
    /// internet (a network that is absent or has no internet is passed over).
    fn try_known(&mut self) -> bool {
        let order = super::state::roaming_order(
            &self
                .known
                .iter()
                .map(|(p, id)| (*p, id.clone()))
                .collect::<Vec<_>>(),
        );
        for id in order {
            match self.backend.up(&id) {
                Ok(()) => {
                    self.failures.retain(|(f, _)| *f != id);
                    if (self.probe)(&self.settings) {
                        crate::info!("provisioning", "state: online through {id:?}");
                        return true;
                    }
                    crate::info!(
                        "provisioning",
                        "{id:?} is up but has no internet; trying the next"
                    );
                }
                Err(e) => {
                    crate::info!("provisioning", "{id:?} not available: {e}");
                    self.failures.retain(|(f, _)| *f != id);
                    self.failures.push((id.clone(), e.to_string()));
                }
            }
        }
        (self.probe)(&self.settings)
    }

    fn act(&mut self, a: Action) {
        let r = match a {
            // A retry that found a network moved the state to Online: the hotspot stays down.
            Action::StartHotspot if !matches!(self.state.mode, Mode::Hotspot { .. }) => Ok(()),
            Action::StartHotspot => {
                if let Some(why) =
                    super::defaults::hotspot_password_problem(&self.settings.hotspot_password)
                {
                    crate::error!("provisioning", "hotspot not started: {why}");
                    return;
                }
                let p = WifiProfile {
                    id: HOTSPOT_ID.into(),
                    ssid: self.hotspot_ssid(),
                    psk: self.settings.hotspot_password.clone(),
                    priority: 0,
                    hotspot: true,
                    hidden: false,
                    eap: None,
                    ifname: None,
                };
                self.backend
                    .save_wifi(&p)
                    .and_then(|_| self.backend.up(HOTSPOT_ID))
            }
            Action::StopHotspot => self.backend.down(HOTSPOT_ID),
            Action::TryNetworks => {
                let online = self.try_known();
                let now = match self.state.mode {
                    Mode::Hotspot { last_retry, .. } => last_retry,
                    Mode::Offline { since } => since,
                    Mode::Online => 0,
                };
                let t = self.timing();
                let (s, acts) = step(self.state.clone(), Event::Connectivity { online }, now, &t);
                self.state = s;
                for a in acts {
                    if a == Action::StopHotspot {
                        let _ = self.backend.down(HOTSPOT_ID);
                    }
                }
                Ok(())
            }
        };
        if let Err(e) = r {
            crate::warn!("provisioning", "{:?}: {}", a, e);
        }
    }

    /// Forced provisioning (support): the hotspot comes up even while online.
    pub(crate) fn force(&mut self, now: u64) {
        crate::info!("provisioning", "forced provisioning requested");
        self.event(Event::ForceProvisioning, now);
    }

    /// A network entered in the portal: saved, the hotspot gives way, the network is
    /// brought up and checked for internet. Whether the machine is online afterwards.
    pub(crate) fn join(&mut self, profile: &WifiProfile, now: u64) -> bool {
        if let Err(e) = self.backend.save_wifi(profile) {
            crate::error!("provisioning", "saving network {:?}: {e}", profile.ssid);
            return false;
        }
        // First among equals: the known networks are tried now (the state machine's
        // TryNetworks), and the one just entered is tried first.
        self.known.retain(|(_, k)| k != &profile.id);
        self.known.insert(0, (profile.priority, profile.id.clone()));
        self.event(Event::UserNetwork, now);
        if self.state.mode != Mode::Online {
            // NetworkManager fails a 4-way handshake that timed out (a slow AP, a loaded
            // machine) as it fails a wrong key ("Secrets were required"): one more try
            // before the network is taken for one that does not work (seen in the lab).
            crate::info!(
                "provisioning",
                "{:?} did not come up: trying it once more",
                profile.id
            );
            self.event(Event::UserNetwork, now);
        }
        let online = self.state.mode == Mode::Online;
        self.user_nets.retain(|id| id != &profile.id);
        if online {
            self.user_nets.push(profile.id.clone());
            while self.user_nets.len() > MAX_USER_NETWORKS {
                let oldest = self.user_nets.remove(0);
                self.forget(&oldest);
            }
            if self.failed_net.as_deref() == Some(profile.id.as_str()) {
                self.failed_net = None;
            }
        } else {
            // A network that did not work (a wrong key, out of range) must not autoconnect
            // at the top priority and be retried for ever, nor push out networks that work:
            // it is disabled, and only the last one is kept. The phone can try again.
            self.known.retain(|(_, k)| k != &profile.id);
            if let Some(prev) = self.failed_net.replace(profile.id.clone()) {
                if prev != profile.id {
                    self.forget(&prev);
                }
            }
            if let Err(e) = self.backend.disable(&profile.id) {
                crate::warn!("provisioning", "disabling network {:?}: {e}", profile.id);
                self.forget(&profile.id);
                self.failed_net = None;
            }
        }
        online
    }

    /// Networks from the portal saved before a restart (oldest first): they count toward
    /// `MAX_USER_NETWORKS` and are tried like the others.
    /// `failed`: disabled ones (networks that did not work), oldest first; the last is kept.
    pub(crate) fn adopt_user_networks(&mut self, ids: Vec<(i32, String)>, failed: Vec<String>) {
        for id in failed {
            if let Some(prev) = self.failed_net.replace(id) {
                self.forget(&prev);
            }
        }
        for (priority, id) in ids {
            self.user_nets.retain(|u| u != &id);
            self.user_nets.push(id.clone());
            self.add_known(priority, &id);
        }
        while self.user_nets.len() > MAX_USER_NETWORKS {
            let oldest = self.user_nets.remove(0);
            self.forget(&oldest);
        }
    }

    /// Removes a profile from NetworkManager and from the networks tried.
    fn forget(&mut self, id: &str) {
        self.known.retain(|(_, k)| k != id);
        self.failures.retain(|(f, _)| f != id);
        if let Err(e) = self.backend.delete(id) {
            crate::warn!("provisioning", "removing network {id:?}: {e}");
        }
    }

    /// Why the profile `id` last failed to come up, in words for the status (`None`: it
    /// came up, without internet, or was never tried).
    pub(crate) fn failure(&self, id: &str) -> Option<&'static str> {
        self.failures
            .iter()
            .find(|(f, _)| f == id)
            .map(|(_, e)| super::nm::failure_reason(e))
    }

    /// Every profile whose last activation failed, with the reason in words (the status's
    /// `networks`), in the order they failed.
    pub(crate) fn failures(&self) -> Vec<(String, &'static str)> {
        self.failures
            .iter()
            .map(|(id, e)| (id.clone(), super::nm::failure_reason(e)))
            .collect()
    }

    pub(crate) fn status(&self) -> &State {
        &self.state
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "device".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provisioning::nm::NmError;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[derive(Default, Clone)]
    struct FakeNetwork(Rc<RefCell<Vec<String>>>);
    impl NetworkBackend for FakeNetwork {
        fn save_wifi(&mut self, p: &WifiProfile) -> Result<(), NmError> {
            self.0.borrow_mut().push(format!("save {}", p.id));
            Ok(())
        }
        fn up(&mut self, id: &str) -> Result<(), NmError> {
            self.0.borrow_mut().push(format!("up {id}"));
            Ok(())
        }
        fn down(&mut self, id: &str) -> Result<(), NmError> {
            self.0.borrow_mut().push(format!("down {id}"));
            Ok(())
        }
        fn delete(&mut self, id: &str) -> Result<(), NmError> {
            self.0.borrow_mut().push(format!("delete {id}"));
            Ok(())
        }
        fn disable(&mut self, id: &str) -> Result<(), NmError> {
            self.0.borrow_mut().push(format!("disable {id}"));
            Ok(())
        }
        fn connecting(&mut self) -> Option<String> {
            let c = self
                .0
                .borrow()
                .iter()
                .rev()
                .find_map(|l| l.strip_prefix("nm-connecting ").map(str::to_string));
            c.filter(|c| !c.is_empty())
        }
    }

    /// A fresh folder, settings with a good hotspot password, and a network that logs calls.
    fn fixture(name: &str) -> (std::path::PathBuf, Settings, FakeNetwork) {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let settings = Settings {
            hotspot_password: "per-device-9f3k".into(),
            ..Default::default()
        };
        (dir, settings, FakeNetwork::default())
    }

    /// A network whose activations of the listed profiles fail with NetworkManager's words
    /// (the rest come up); the list may change while a test runs.
    struct Refusing(Rc<RefCell<Vec<(String, String)>>>);
    impl Refusing {
        fn new(refused: &[(&str, &str)]) -> Refusing {
            let list = refused
                .iter()
                .map(|(id, e)| (id.to_string(), e.to_string()));
            Refusing(Rc::new(RefCell::new(list.collect())))
        }
    }
    impl NetworkBackend for Refusing {
        fn save_wifi(&mut self, _p: &WifiProfile) -> Result<(), NmError> {
            Ok(())
        }
        fn up(&mut self, id: &str) -> Result<(), NmError> {
            match self.0.borrow().iter().find(|(f, _)| f == id) {
                Some((_, err)) => Err(NmError::Nmcli {
                    args: format!("-w 60 connection up id {id}"),
                    stderr: err.clone(),
                }),
                None => Ok(()),
            }
        }
        fn down(&mut self, _id: &str) -> Result<(), NmError> {
            Ok(())
        }
        fn delete(&mut self, _id: &str) -> Result<(), NmError> {
            Ok(())
        }
        fn disable(&mut self, _id: &str) -> Result<(), NmError> {
            Ok(())
        }
    }

    /// comitup #74/#46: a hotspot raised while NetworkManager still joins a known network
    /// cuts the join short. The hotspot waits while it connects, and only up to a bound.
    #[test]
    fn the_hotspot_waits_while_networkmanager_is_connecting() {
        let (dir, settings, log) = fixture("svc-prov-hold");
        log.0.borrow_mut().push("nm-connecting net-home".into());
        let mut p = Provisioning::new(Paths::new(&dir), log.clone(), settings.clone(), 0)
            .with_probe(Box::new(|_| false));
        let hotspot = |l: &FakeNetwork| l.0.borrow().iter().any(|c| c == "up svc-hotspot");
        // Unconfigured, so due at once; NetworkManager is connecting: it waits.
        for t in [1, 10, 60, NM_CONNECTING_HOLD] {
            p.tick(t);
            assert!(!hotspot(&log), "hotspot at {t} s while connecting");
        }
        // Still connecting past the bound: the hotspot starts anyway.
        p.tick(NM_CONNECTING_HOLD + 1);
        assert!(hotspot(&log), "never held for ever");

        // The connection finishes (or fails): nothing holds the hotspot any more.
        let log = FakeNetwork::default();
        log.0.borrow_mut().push("nm-connecting net-home".into());
        let mut p = Provisioning::new(Paths::new(&dir), log.clone(), settings, 0)
            .with_probe(Box::new(|_| false));
        p.tick(1);
        assert!(!hotspot(&log));
        log.0.borrow_mut().push("nm-connecting ".into());
        // It may retry the profile a few seconds after a failed attempt: a grace period.
        p.tick(3);
        assert!(!hotspot(&log), "the hotspot waits for a retry");
        p.tick(1 + NM_RETRY_GRACE);
        assert!(
            hotspot(&log),
            "hotspot once NetworkManager stopped connecting"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hotspot_then_rejoin_when_network_returns() {
        let dir = std::env::temp_dir().join(format!("svc-prov-drv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let settings = Settings {
            hotspot_password: "password1".into(),
            ..Default::default()
        };
        let log = FakeNetwork::default();
        let net_up = Rc::new(RefCell::new(false));
        let n2 = net_up.clone();
        let mut p = Provisioning::new(Paths::new(&dir), log.clone(), settings, 0)
            .with_probe(Box::new(move |_| *n2.borrow()));
        p.tick(1);
        assert!(
            log.0.borrow().contains(&"up svc-hotspot".to_string()),
            "unconfigured: hotspot"
        );
        *net_up.borrow_mut() = true;
        p.tick(100);
        assert_eq!(p.status().mode, Mode::Online);
        assert_eq!(log.0.borrow().last().unwrap(), "down svc-hotspot");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A join that fails once (NetworkManager's handshake timed out) is tried again before
    /// the network is disabled as one that does not work.
    #[test]
    fn a_network_that_fails_its_first_join_is_tried_once_more() {
        let (dir, settings, log) = fixture("svc-prov-again");
        let l2 = log.clone();
        // Internet from the second `up` of the network on.
        let mut p = Provisioning::new(Paths::new(&dir), log.clone(), settings, 0).with_probe(
            Box::new(move |_| {
                l2.0.borrow()
                    .iter()
                    .filter(|l| l.as_str() == "up svc-user-slow")
                    .count()
                    >= 2
            }),
        );
        let profile = WifiProfile {
            id: "svc-user-slow".into(),
            ssid: "slow".into(),
            psk: "password1".into(),
            priority: 999,
            hotspot: false,
            hidden: false,
            eap: None,
            ifname: None,
        };
        assert!(p.join(&profile, 10), "{:?}", log.0.borrow());
        assert!(!log.0.borrow().iter().any(|c| c.starts_with("disable ")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn networks_that_fail_never_push_out_networks_that_work() {
        let (dir, settings, log) = fixture("svc-prov-fail");
        let works = Rc::new(RefCell::new(true));
        let w2 = works.clone();
        let mut p = Provisioning::new(Paths::new(&dir), log.clone(), settings, 0)
            .with_probe(Box::new(move |_| *w2.borrow()));
        let profile = |ssid: &str| WifiProfile {
            id: crate::provisioning::nm::user_id(ssid),
            ssid: ssid.into(),
            psk: "password1".into(),
            priority: 999,
            hotspot: false,
            hidden: false,
            eap: None,
            ifname: None,
        };
        for i in 0..MAX_USER_NETWORKS {
            assert!(p.join(&profile(&format!("good-{i}")), 10));
        }
        *works.borrow_mut() = false;
        for i in 0..10 {
            assert!(!p.join(&profile(&format!("bad-{i}")), 20));
        }
        let calls = log.0.borrow().clone();
        assert!(
            !calls.iter().any(|c| c.starts_with("delete user-good")),
            "{calls:?}"
        );
        assert_eq!(
            calls.iter().filter(|c| c.starts_with("disable ")).count(),
            10
        );
        // Every failed one but the last is deleted again.
        assert_eq!(
            calls
                .iter()
                .filter(|c| c.starts_with("delete user-bad"))
                .count(),
            9
        );
        assert!(!p.known.iter().any(|(_, id)| id.starts_with("user-bad")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_well_known_hotspot_password_never_brings_a_hotspot_up() {
        let dir = std::env::temp_dir().join(format!("svc-prov-weak-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The shipped defaults' password, and one that differs only in case.
        for pw in ["change-me-per-device", "Change-Me-Per-Device", "password"] {
            let settings = Settings {
                hotspot_password: pw.into(),
                ..Default::default()
            };
            let log = FakeNetwork::default();
            let mut p = Provisioning::new(Paths::new(&dir), log.clone(), settings, 0)
                .with_probe(Box::new(|_| false));
            p.tick(1);
            p.force(2);
            p.tick(500);
            let calls = log.0.borrow().clone();
            assert!(
                !calls.iter().any(|c| c.contains("svc-hotspot")),
                "{pw}: {calls:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn roaming_tries_by_priority_and_passes_over_a_network_without_internet() {
        use crate::config::model::Network;
        let dir = std::env::temp_dir().join(format!("svc-prov-roam-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::write(dir.join("etc/svc.json"), "{}").unwrap(); // configured
        let net = |ssid: &str, priority| Network {
            net_type: "wifi".into(),
            ssid: ssid.into(),
            psk: Some("password1".into()),
            priority,
            hidden: false,
            eap: None,
            extra: Default::default(),
        };
        let settings = Settings {
            hotspot_password: "password1".into(),
            roaming_mode: true,
            networks: vec![net("low", 1), net("top", 10), net("mid", 5)],
            ..Default::default()
        };
        let log = FakeNetwork::default();
        let l2 = log.clone();
        // Internet only through "mid": the last network brought up decides.
        let mut p = Provisioning::new(Paths::new(&dir), log.clone(), settings, 0).with_probe(
            Box::new(move |_| {
                l2.0.borrow()
                    .iter()
                    .rev()
                    .find(|l| l.starts_with("up "))
                    .map(String::as_str)
                    == Some("up net-mid")
            }),
        );
        p.tick(1);
        let ups: Vec<String> = log
            .0
            .borrow()
            .iter()
            .filter(|l| l.starts_with("up "))
            .cloned()
            .collect();
        assert_eq!(
            ups,
            vec!["up net-top", "up net-mid"],
            "highest first, stop at internet"
        );
        p.tick(2);
        assert_eq!(p.status().mode, Mode::Online);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// #45: a join that fails says why in the status (an 802.1X password refused), in
    /// NetworkManager's terms mapped to words; no secret in them.
    #[test]
    fn a_failed_join_names_its_reason() {
        let (dir, settings, _) = fixture("svc-prov-why");
        let refusing = Refusing::new(&[(
            "user-corp",
            "Error: Connection activation failed: Secrets were required, but not provided",
        )]);
        let mut p = Provisioning::new(Paths::new(&dir), refusing, settings, 0)
            .with_probe(Box::new(|_| false));
        let profile = WifiProfile {
            id: "user-corp".into(),
            ssid: "corp".into(),
            psk: String::new(),
            priority: 999,
            hotspot: false,
            hidden: false,
            ifname: None,
            eap: None,
        };
        assert!(!p.join(&profile, 10));
        let why = p.failure("user-corp").expect("a reason");
        assert!(why.contains("user name or password"), "{why}");
        assert_eq!(p.failure("user-other"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Roaming through a vendor's 802.1X networks: each that fails keeps its own reason
    /// (before, only the last failure was kept, so the status could name one network at
    /// most), in the order tried; one that comes up later drops out of the list.
    #[test]
    fn each_failed_network_keeps_its_own_reason_until_it_comes_up() {
        let (dir, mut settings, _) = fixture("svc-prov-each-why");
        // Configured (credentials present): roaming, no hotspot before the offline timeout.
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::write(dir.join("etc/svc.json"), "{}").unwrap();
        settings.roaming_mode = true;
        settings.offline_timeout_secs = 10_000;
        settings.networks = ["pw", "rogue", "gone"]
            .iter()
            .enumerate()
            .map(|(i, ssid)| crate::config::model::Network {
                net_type: "wifi".into(),
                ssid: (*ssid).into(),
                psk: None,
                priority: 30 - i as i32,
                hidden: false,
                eap: None,
                extra: Default::default(),
            })
            .collect();
        let refusing = Refusing::new(&[
            (
                "net-pw",
                "Error: Connection activation failed: Secrets were required, but not provided",
            ),
            (
                "net-rogue",
                "Error: Connection activation failed: 802.1X supplicant failed",
            ),
            (
                "net-gone",
                "Error: Connection activation failed: No network with SSID 'gone' found.",
            ),
        ]);
        let errors = Rc::clone(&refusing.0);
        let mut p = Provisioning::new(Paths::new(&dir), refusing, settings, 0)
            .with_probe(Box::new(|_| false));
        p.tick(2);
        let failed = p.failures();
        let ids: Vec<&str> = failed.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["net-pw", "net-rogue", "net-gone"]);
        assert!(failed[0].1.contains("user name or password"), "{failed:?}");
        assert!(failed[1].1.contains("certificate"), "{failed:?}");
        assert!(failed[2].1.contains("not in range"), "{failed:?}");
        // The rogue AP is gone and the real one answers: it comes up, its failure goes.
        errors.borrow_mut().retain(|(id, _)| id != "net-rogue");
        p.tick(2 + 30);
        let ids: Vec<String> = p.failures().into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, ["net-pw", "net-gone"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
