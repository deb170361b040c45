//! Provisioning as a running thing: the driver (state machine + NetworkManager) ticking,
//! the captive portal up exactly while the hotspot is, and the networks a phone submits
//! saved and joined. Beside it: the network facts it reads (`netfacts`), the saved user
//! networks (`user_networks`), the portal's adapter (`portal_actions`), the DPP thread
//! (`dpp_thread`). `svc-agent provision` (cli) runs it in the foreground.
use super::defaults::Settings;
use super::dpp_thread::DppThread;
use super::driver::Provisioning;
use super::netfacts::{online_probe, scan, Probe};
use super::nm::{Nmcli, WifiProfile};
use super::portal::NetworkInput;
use super::portal_actions::{Actions, Activity, ACTIVITY_QUEUE};
use super::portal_http::{Portal, Visible};
use super::state::Mode;
use super::user_networks::{saved_user_networks, USER_PRIORITY};
use crate::paths::Paths;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_secs(2);

/// The known networks whose last activation failed, each with why in words (profile id,
/// reason): shared with whoever reports the status (the daemon's `networks`).
pub(crate) type NetworkFailures = Arc<Mutex<Vec<(String, String)>>>;
const PORTAL_PORT: u16 = 80;

/// The running service.
pub(crate) struct Service {
    paths: Paths,
    driver: Provisioning<Nmcli>,
    portal: Option<Portal>,
    tx: SyncSender<Activity>,
    rx: Receiver<Activity>,
    pending: Arc<Mutex<Option<NetworkInput>>>,
    visible: Arc<Mutex<Vec<Visible>>>,
    steps: Arc<Mutex<Vec<(String, String)>>>,
    /// The state machine's `forced`, for the portal.
    forced: Arc<AtomicBool>,
    started: Instant,
    last_mode: Option<Mode>,
    /// The DPP enrollee's thread, when `dpp_enabled`.
    dpp: Option<DppThread>,
    /// The Improv BLE thread, when `ble_enabled`.
    ble: Option<super::ble::BleThread>,
    /// A network handed over (portal or DPP) was tried in this run.
    user_network_joined: bool,
    /// What stood in the hotspot's way at the last look (`conflicts::check`), and when.
    conflicts: Vec<String>,
    conflicts_checked: Option<Instant>,
    /// Where the failures are shown (`with_failures`); the driver's are copied there each tick.
    failures: NetworkFailures,
}

/// While the hotspot is up, the ports it needs are looked at this often (a DNS or DHCP
/// server can start at any time; NetworkManager's dnsmasq can die).
const CONFLICTS_EVERY: Duration = Duration::from_secs(10);

impl Service {
    /// `app_reachable`: the daemon's last poll reached the management app, one sign of being
    /// online among others (`online_probe`); its absence alone is never "offline".
    pub(crate) fn new(
        paths: Paths,
        settings: Settings,
        app_reachable: Option<Arc<AtomicBool>>,
    ) -> Service {
        let backend = Nmcli::new(
            paths.device("/etc/NetworkManager/system-connections"),
            super::eap::dir(&paths),
        );
        let probe = online_probe(app_reachable, backend.program.clone());
        Service::with_backend(paths, settings, backend, Some(probe))
    }

    /// The service over a given `nmcli` (a stand-in in tests) and connectivity probe.
    pub(crate) fn with_backend(
        paths: Paths,
        settings: Settings,
        backend: Nmcli,
        probe: Option<Probe>,
    ) -> Service {
        let saved = saved_user_networks(&backend.connections_dir);
        let dpp_enabled = settings.dpp_enabled;
        let ble_enabled = settings.ble_enabled;
        let button = settings.improv_button.clone();
        let mut driver = Provisioning::new(paths.clone(), backend, settings, 0);
        if let Some(p) = probe {
            driver = driver.with_probe(p);
        }
        driver.adopt_user_networks(saved.0, saved.1);
        driver.save_settings_networks();
        let (tx, rx) = sync_channel(ACTIVITY_QUEUE);
        let pending = Arc::new(Mutex::new(None));
        let dpp = dpp_enabled.then(|| DppThread::spawn(paths.clone(), Arc::clone(&pending)));
        let visible = Arc::new(Mutex::new(Vec::new()));
        let ble = ble_enabled.then(|| {
            super::ble::BleThread::spawn(
                super::ble::dir(&paths).join("label-secret"),
                Arc::clone(&pending),
                Arc::clone(&visible),
                button,
            )
        });
        Service {
            paths,
            driver,
            portal: None,
            tx,
            rx,
            pending,
            visible,
            steps: Arc::new(Mutex::new(Vec::new())),
            forced: Arc::new(AtomicBool::new(false)),
            started: Instant::now(),
            last_mode: None,
            dpp,
            ble,
            user_network_joined: false,
            conflicts: Vec::new(),
            conflicts_checked: None,
            failures: NetworkFailures::default(),
        }
    }

    /// Shows the networks that failed, and why, in `view` (kept up to date each tick).
    pub(crate) fn with_failures(mut self, view: NetworkFailures) -> Self {
        self.failures = view;
        self
    }

    fn publish_failures(&self) {
        let now: Vec<(String, String)> = self
            .driver
            .failures()
            .into_iter()
            .map(|(id, why)| (id, why.to_string()))
            .collect();
        if let Ok(mut v) = self.failures.lock() {
            if *v != now {
                *v = now;
            }
        }
    }

    /// Provisioning from the start, whatever the network (`provision --force`).
    pub(crate) fn force(&mut self) {
        self.driver.force(0);
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn set_step(&self, step: &str, state: &str) {
        if let Ok(mut s) = self.steps.lock() {
            match s.iter_mut().find(|(k, _)| k == step) {
                Some(e) => e.1 = state.to_string(),
                None => s.push((step.to_string(), state.to_string())),
            }
        }
    }

    /// Runs until `stop`, or (with `until_online`) until the machine is online after a
    /// hotspot session or a network handed over (portal or DPP). Returns whether it ended
    /// online.
    pub(crate) fn run(&mut self, stop: &AtomicBool, until_online: bool) -> bool {
        let mut had_hotspot = false;
        while !stop.load(Ordering::SeqCst) {
            self.refresh_visible();
            self.driver.tick(self.now());
            self.handle_portal_messages();
            self.publish_failures();
            self.forced
                .store(self.driver.status().forced, Ordering::SeqCst);
            self.follow_mode();
            self.watch_conflicts();
            let mode = self.driver.status().mode.clone();
            if let Some(d) = &self.dpp {
                d.want.store(mode != Mode::Online, Ordering::SeqCst);
            }
            if let Some(b) = &self.ble {
                b.want.store(mode != Mode::Online, Ordering::SeqCst);
            }
            had_hotspot |= matches!(mode, Mode::Hotspot { .. }) || self.user_network_joined;
            if until_online && had_hotspot && mode == Mode::Online {
                return true;
            }
            std::thread::sleep(TICK);
        }
        self.stop_portal();
        drop(self.dpp.take());
        drop(self.ble.take());
        self.driver.status().mode == Mode::Online
    }

    /// The networks the portal lists, gathered while the radio is still a client (an AP
    /// cannot scan). While offline and the hotspot not due yet, a scan is forced each tick,
    /// but never while the DPP enrollee listens: a scan asked for then waits behind the
    /// listen and runs the moment an exchange has authenticated, and the enrollee asks for
    /// its configuration after the configurator has left the channel (`DPP-CONF-FAILED`,
    /// seen with `iw event` in the lab). When the hotspot is due, and while online,
    /// NetworkManager's own list is taken as it is (`--rescan no`: it scans by itself while
    /// disconnected and now and then while connected): a forced scan there held the hotspot
    /// back by several seconds. Only when that list is empty is a scan forced before the
    /// hotspot, so the portal never shows an empty list for want of a scan.
    fn refresh_visible(&mut self) {
        let now = self.now();
        let rescan = match self.driver.status().mode {
            Mode::Hotspot { .. } => return,
            Mode::Online => "no",
            Mode::Offline { .. } if self.driver.hotspot_due(now) || self.dpp.is_some() => "no",
            Mode::Offline { .. } => "yes",
        };
        let mut v = scan(rescan);
        if v.is_empty() && rescan == "no" && self.driver.hotspot_due(now) {
            v = scan("yes");
        }
        if !v.is_empty() {
            if let Ok(mut vis) = self.visible.lock() {
                *vis = v;
            }
        }
    }

    /// comitup #84: another DNS or DHCP server leaves the hotspot without names and
    /// addresses, and the portal looks dead. Looked at while the hotspot is up (first at
    /// once); each new finding is logged as an error naming the culprit and shown in the
    /// status (`hotspot` step), and its end is logged too.
    fn watch_conflicts(&mut self) {
        if !matches!(self.driver.status().mode, Mode::Hotspot { .. }) {
            self.conflicts_checked = None;
            return;
        }
        if self
            .conflicts_checked
            .is_some_and(|t| t.elapsed() < CONFLICTS_EVERY)
        {
            return;
        }
        self.conflicts_checked = Some(Instant::now());
        let found = super::conflicts::check(true);
        if found == self.conflicts {
            return;
        }
        for c in found.iter().filter(|c| !self.conflicts.contains(c)) {
            crate::error!("provisioning", "hotspot: {c}");
        }
        if found.is_empty() {
            crate::info!("provisioning", "hotspot: DNS and DHCP free again");
            self.set_step("hotspot", "up");
        } else {
            self.set_step("hotspot", &format!("up, but {}", found.join("; ")));
        }
        self.conflicts = found;
    }

    /// What the portal sent since the last tick.
    fn handle_portal_messages(&mut self) {
        if self.rx.try_recv().is_ok() {
            while self.rx.try_recv().is_ok() {}
            let now = self.now();
            self.driver.event(super::state::Event::UserActivity, now);
        }
        let net = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(net) = net {
            self.join_user_network(net);
        }
    }

    /// Portal up exactly while the hotspot is; one log line per state change.
    fn follow_mode(&mut self) {
        let mode = self.driver.status().mode.clone();
        let kind = |m: &Mode| std::mem::discriminant(m);
        if self.last_mode.as_ref().map(kind) == Some(kind(&mode)) {
            // A hotspot NetworkManager failed at first (another server held port 53) and
            // brought up on a retry: the portal that found no address then tries again each
            // tick, once, until it listens.
            if matches!(mode, Mode::Hotspot { .. })
                && self.portal.is_none()
                && self.listen_portal(1)
            {
                crate::info!(
                    "provisioning",
                    "portal: listening at last on http://{}/",
                    super::dns::HOTSPOT_ADDR
                );
            }
            return;
        }
        self.last_mode = Some(mode.clone());
        match mode {
            Mode::Hotspot { .. } => {
                crate::info!(
                    "provisioning",
                    "state: hotspot {:?} up; portal at http://{}/",
                    self.driver.hotspot_ssid(),
                    super::dns::HOTSPOT_ADDR
                );
                self.set_step("hotspot", "up");
                self.start_portal();
            }
            Mode::Online => {
                crate::info!("provisioning", "state: online");
                self.set_step("hotspot", "down");
                self.set_step("network", "online");
                self.stop_portal();
            }
            Mode::Offline { .. } => {
                crate::info!("provisioning", "state: offline");
                self.set_step("network", "offline");
            }
        }
    }

    fn start_portal(&mut self) {
        // The address appears when NetworkManager has the hotspot up: retry briefly.
        if !self.listen_portal(15) {
            crate::error!(
                "provisioning",
                "portal: cannot listen on {}:{PORTAL_PORT} (tried again while the hotspot is up)",
                super::dns::HOTSPOT_ADDR
            );
        }
    }

    /// Starts the portal unless it runs: up to `attempts` binds, a second apart. `true`
    /// when it runs now.
    fn listen_portal(&mut self, attempts: u32) -> bool {
        if self.portal.is_some() {
            return true;
        }
        let addr = format!("{}:{PORTAL_PORT}", super::dns::HOTSPOT_ADDR);
        let Ok(addr) = addr.parse() else { return false };
        for i in 0..attempts {
            if i > 0 {
                std::thread::sleep(Duration::from_secs(1));
            }
            if let Ok(p) = Portal::start(addr, self.paths.clone(), Box::new(self.actions())) {
                self.portal = Some(p);
                return true;
            }
        }
        false
    }

    fn actions(&self) -> Actions {
        Actions {
            tx: self.tx.clone(),
            pending: Arc::clone(&self.pending),
            visible: Arc::clone(&self.visible),
            steps: Arc::clone(&self.steps),
            forced: Arc::clone(&self.forced),
        }
    }

    fn stop_portal(&mut self) {
        if let Some(mut p) = self.portal.take() {
            p.stop();
            crate::info!("provisioning", "portal stopped");
        }
    }

    /// A network from the portal: saved (psk only in the 0600 keyfile), the hotspot gives
    /// way, the network is brought up and checked for internet.
    /// A network the machine did not see in its last scan (typed in by hand) is saved as
    /// hidden: if its access point does not broadcast its SSID, only a profile that probes
    /// for it by name ever joins or rejoins it (comitup #24).
    fn join_user_network(&mut self, net: NetworkInput) {
        let seen = self
            .visible
            .lock()
            .map(|v| v.iter().any(|n| n.ssid == net.ssid))
            .unwrap_or(false);
        let profile = WifiProfile {
            id: super::nm::user_id(&net.ssid),
            ssid: net.ssid.clone(),
            psk: net.psk,
            priority: USER_PRIORITY,
            hotspot: false,
            hidden: !seen,
            ifname: None,
            eap: net.eap.map(|e| *e),
        };
        self.set_step("network", &format!("joining {}", net.ssid));
        crate::info!(
            "provisioning",
            "state: joining {:?} (portal, DPP or BLE)",
            net.ssid
        );
        self.stop_portal();
        // No DPP listening while joining (`dpp_loop`); the next tick wants it again if the
        // machine is still offline.
        if let Some(d) = &self.dpp {
            d.want.store(false, Ordering::SeqCst);
        }
        let now = self.now();
        let joined = self.driver.join(&profile, now);
        if let Some(b) = &self.ble {
            b.joined(&profile.ssid, joined);
        }
        self.user_network_joined = true;
        let step = match (joined, self.driver.failure(&profile.id)) {
            (true, _) => "online".to_string(),
            (false, Some(why)) => format!("could not join: {why}; hotspot back"),
            (false, None) => "could not join; hotspot back".to_string(),
        };
        self.set_step("network", &step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provisioning::portal_http::PortalActions;

    /// The management app is down (its polls fail), the network is up: NetworkManager says
    /// "full". Before, without check_url, "online" was "the last poll reached the app", so an
    /// app outage raised the hotspot on every machine of the fleet.
    #[test]
    fn an_app_outage_with_the_network_up_is_online() {
        let dir = std::env::temp_dir().join(format!("svc-outage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::write(dir.join("etc/svc.json"), "{}").unwrap(); // configured
        let mut nm = stand_in_nmcli(&dir);
        std::fs::write(
            &nm.program,
            "#!/bin/sh\ncase \"$*\" in *connectivity*) echo full;; esac\n",
        )
        .unwrap();
        let app = Arc::new(AtomicBool::new(false));
        let probe = online_probe(Some(Arc::clone(&app)), nm.program.clone());
        nm.connections_dir = dir.join("system-connections");
        let settings = Settings {
            hotspot_password: "per-device-9f3k".into(),
            ..Default::default()
        };
        let log = std::cell::RefCell::new(Vec::<String>::new());
        let mut driver = Provisioning::new(Paths::new(&dir), nm, settings, 0).with_probe(probe);
        for now in (0..1000).step_by(2) {
            driver.tick(now);
            log.borrow_mut().push(format!("{:?}", driver.status().mode));
        }
        assert_eq!(
            driver.status().mode,
            Mode::Online,
            "{:?}",
            log.borrow().last()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A stand-in `nmcli` that logs each call (one line of arguments) and succeeds.
    fn stand_in_nmcli(dir: &std::path::Path) -> Nmcli {
        use std::os::unix::fs::PermissionsExt;
        let prog = dir.join("nmcli");
        let log = dir.join("nmcli.calls");
        std::fs::write(
            &prog,
            format!("#!/bin/sh\necho \"$*\" >> '{}'\n", log.display()),
        )
        .unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut nm = Nmcli::new(dir.join("system-connections"), dir.join("eap"));
        nm.program = prog;
        nm
    }

    fn calls(dir: &std::path::Path, what: &str) -> usize {
        std::fs::read_to_string(dir.join("nmcli.calls"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(what))
            .count()
    }

    fn user_keyfiles(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir.join("system-connections"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("svc-user-"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    fn flood_service(name: &str, online: bool) -> (std::path::PathBuf, Service) {
        let dir = std::env::temp_dir().join(format!("svc-flood-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        flood_service_in(&dir, online)
    }

    fn flood_service_in(dir: &std::path::Path, online: bool) -> (std::path::PathBuf, Service) {
        let dir = dir.to_path_buf();
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        let settings = Settings {
            hotspot_password: "per-device-9f3k".into(),
            ..Default::default()
        };
        let nm = stand_in_nmcli(&dir);
        let svc = Service::with_backend(
            Paths::new(&dir),
            settings,
            nm,
            Some(Box::new(move |_: &Settings| online)),
        );
        (dir, svc)
    }

    /// ~100 submissions in a few seconds wrote ~100 autoconnect keyfiles at priority 999 and

    #[test]
    fn a_flood_of_network_submissions_is_bounded_and_failed_networks_are_dropped() {
        let (dir, mut svc) = flood_service("fail", false);
        let mut portal_side = svc.actions();
        for round in 0..5 {
            let accepted = (0..100)
                .filter(|i| {
                    portal_side
                        .connect(NetworkInput {
                            ssid: format!("net-{round}-{i}"),
                            psk: "password1".into(),
                            eap: None,
                        })
                        .is_ok()
                })
                .count();
            assert!(accepted <= 1, "round {round}: {accepted} accepted at once");
            svc.handle_portal_messages();
        }
        // One accepted submission a round, tried at most twice (`Provisioning::join`).
        assert!(
            calls(&dir, "connection up") <= 2 * 5,
            "{}",
            calls(&dir, "connection up")
        );
        // None of them had internet: only the last is kept, and never autoconnects.
        assert_eq!(
            user_keyfiles(&dir),
            vec!["svc-user-net-4-0.nmconnection".to_string()]
        );
        assert_eq!(
            calls(
                &dir,
                "connection modify id user-net-4-0 connection.autoconnect no"
            ),
            1
        );
        assert_eq!(calls(&dir, "connection delete id user-net-3-0"), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn at_most_a_few_networks_from_the_portal_are_kept() {
        let (dir, mut svc) = flood_service("keep", true);
        let mut portal_side = svc.actions();
        for i in 0..10 {
            portal_side
                .connect(NetworkInput {
                    ssid: format!("home-{i}"),
                    psk: "password1".into(),
                    eap: None,
                })
                .unwrap();
            svc.handle_portal_messages();
        }
        // The same SSID again replaces its profile.
        portal_side
            .connect(NetworkInput {
                ssid: "home-9".into(),
                psk: "password2".into(),
                eap: None,
            })
            .unwrap();
        svc.handle_portal_messages();
        let kept = user_keyfiles(&dir);
        assert_eq!(
            kept.len(),
            crate::provisioning::driver::MAX_USER_NETWORKS,
            "{kept:?}"
        );
        assert!(
            kept.contains(&"svc-user-home-9.nmconnection".to_string()),
            "{kept:?}"
        );
        assert!(
            !kept.contains(&"svc-user-home-0.nmconnection".to_string()),
            "{kept:?}"
        );
        // After a restart the saved ones still count.
        drop(svc);
        let (_, mut svc) = flood_service_in(&dir, true);
        let mut portal_side = svc.actions();
        portal_side
            .connect(NetworkInput {
                ssid: "after-restart".into(),
                psk: "password1".into(),
                eap: None,
            })
            .unwrap();
        svc.handle_portal_messages();
        let kept = user_keyfiles(&dir);
        assert_eq!(
            kept.len(),
            crate::provisioning::driver::MAX_USER_NETWORKS,
            "{kept:?}"
        );
        assert!(kept.contains(&"svc-user-after-restart.nmconnection".to_string()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
