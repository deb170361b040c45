//! Provisioning as a running thing: the driver (state machine + NetworkManager) ticking,
//! the captive portal up exactly while the hotspot is, and the networks a phone submits
//! saved and joined. `svc-agent provision` runs it in the foreground.
use super::defaults::{self, Settings};
use super::driver::Provisioning;
use super::nm::{self, Nmcli, WifiProfile};
use super::portal::NetworkInput;
use super::portal_http::{Portal, PortalActions, Visible};
use super::state::{Mode, NmConnectivity, Observed};
use crate::config::model::ProvisioningAttributes;
use crate::paths::Paths;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Probe = Box<dyn FnMut(&Settings) -> bool>;

/// Priority of a network entered in the portal: above configured networks (-999..999 are
/// the config's range), since the person at the machine chose it just now.
pub(crate) const USER_PRIORITY: i32 = 999;
const TICK: Duration = Duration::from_secs(2);
const PORTAL_PORT: u16 = 80;

/// The manufacturer defaults file (`/etc/svc-defaults.json`), checked by the same rules as
/// the config's `agent-provisioning.attributes` (errors name the key as a JSON pointer in
/// the file); missing means built-ins.
pub fn load_defaults(paths: &Paths) -> Result<ProvisioningAttributes, String> {
    let p = paths.defaults();
    let bytes = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(format!("{}: {e}", p.display())),
    };
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", p.display()))?;
    let wrapped = serde_json::json!({"agent": {"agent-provisioning": {"attributes": v}}});
    const PREFIX: &str = "/agent/agent-provisioning/attributes";
    match crate::config::parse_value(&wrapped) {
        Ok((cfg, report)) => {
            // For example a well-known default hotspot password: the rest of the file
            // applies, the hotspot stays off (`defaults::hotspot_password_problem`).
            for w in &report.warnings {
                let at = w.path.strip_prefix(PREFIX).unwrap_or(&w.path);
                crate::warn!("provisioning", "{}: {at}: {}", p.display(), w.message);
            }
            Ok(cfg.agent.provisioning.attributes)
        }
        Err(report) => Err(report
            .errors
            .iter()
            .map(|d| {
                let at = d.path.strip_prefix(PREFIX).unwrap_or(&d.path);
                format!(
                    "{}: {}: {}",
                    p.display(),
                    if at.is_empty() { "/" } else { at },
                    d.message
                )
            })
            .collect::<Vec<_>>()
            .join("; ")),
    }
}

/// Whether the machine is online, for the state machine (`state::is_online` decides; this
/// gathers what it needs): the check URL if one is configured, NetworkManager's connectivity,
/// a default route, and whether the daemon's last poll reached the app.
pub(crate) fn online_probe(
    app_reachable: Option<Arc<AtomicBool>>,
    nmcli: std::path::PathBuf,
) -> Probe {
    Box::new(move |s: &Settings| {
        let check_url = (!s.check_url.is_empty())
            .then(|| super::check::online(&s.check_url, Duration::from_secs(10)));
        let app = app_reachable
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst));
        if check_url.is_none() && app {
            // Online whatever NetworkManager says (`is_online`): no nmcli every tick while
            // the app answers, which is nearly always.
            return true;
        }
        let nm = nm::nmcli(
            &nmcli,
            &["-t", "networking", "connectivity"],
            nm::NMCLI_QUERY,
        )
        .ok()
        .filter(|o| o.success())
        .map(|o| NmConnectivity::parse(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or(NmConnectivity::Unknown);
        super::state::is_online(&Observed {
            check_url,
            nm,
            default_route: has_default_route(),
            app_reachable: app,
        })
    })
}

/// A default route in the kernel's tables (`/proc/net/route`, `/proc/net/ipv6_route`).
fn has_default_route() -> bool {
    let v4 = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    let v6 = std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default();
    default_route_in(&v4, &v6)
}

/// IPv4: destination and mask 00000000; IPv6: destination ::/0 (not the loopback
/// interface, which carries the unreachable default of an empty table).
fn default_route_in(v4: &str, v6: &str) -> bool {
    let four = v4.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 7 && f[1] == "00000000" && f[7] == "00000000"
    });
    let six = v6.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 9 && f[0].bytes().all(|b| b == b'0') && f[1] == "00" && f[9] != "lo"
    });
    four || six
}

/// Profiles of networks from the portal already on disk (`svc-user-*`), oldest first: those
/// that worked, and the disabled ones (`autoconnect=false`: networks that did not work).
fn saved_user_networks(dir: &std::path::Path) -> (Vec<(i32, String)>, Vec<String>) {
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

/// Visible networks, from `nmcli -t -f SSID,SIGNAL dev wifi list` (terse: `:` separates,
/// `\:` and `\\` escape). Strongest first, one entry per SSID, hidden networks left out.
pub(crate) fn parse_scan(out: &str) -> Vec<Visible> {
    let mut v: Vec<Visible> = Vec::new();
    for line in out.lines() {
        let mut fields = vec![String::new()];
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            let ch = match c {
                '\\' => chars.next(),
                ':' => {
                    fields.push(String::new());
                    None
                }
                c => Some(c),
            };
            if let (Some(ch), Some(f)) = (ch, fields.last_mut()) {
                f.push(ch);
            }
        }
        if fields.len() != 2 || fields[0].is_empty() {
            continue;
        }
        let signal = fields[1].trim().parse::<u8>().unwrap_or(0).min(100);
        match v.iter_mut().find(|n| n.ssid == fields[0]) {
            Some(n) => n.signal = n.signal.max(signal),
            None => v.push(Visible {
                ssid: fields[0].clone(),
                signal,
            }),
        }
    }
    v.sort_by_key(|n| std::cmp::Reverse(n.signal));
    v
}

/// `rescan`: `yes` forces a scan now; `no` takes NetworkManager's list as it is.
fn scan(rescan: &str) -> Vec<Visible> {
    let out = nm::nmcli(
        std::path::Path::new("nmcli"),
        &[
            "-t",
            "-f",
            "SSID,SIGNAL",
            "dev",
            "wifi",
            "list",
            "--rescan",
            rescan,
        ],
        nm::NMCLI_SCAN,
    );
    match out {
        Ok(o) if o.success() => parse_scan(&String::from_utf8_lossy(&o.stdout)),
        _ => Vec::new(),
    }
}

/// A phone is using the portal (the hotspot must not be cycled under it). Bounded: a flood
/// of requests drops activity marks, which are all alike.
struct Activity;
const ACTIVITY_QUEUE: usize = 16;

/// What the portal sees of the service.
struct Actions {
    tx: SyncSender<Activity>,
    /// The one network waiting to be joined: a second submission is refused until the
    /// first was tried (each try takes the hotspot down and runs nmcli).
    pending: Arc<Mutex<Option<NetworkInput>>>,
    visible: Arc<Mutex<Vec<Visible>>>,
    steps: Arc<Mutex<Vec<(String, String)>>>,
    forced: Arc<AtomicBool>,
}

impl PortalActions for Actions {
    fn networks(&mut self) -> Vec<Visible> {
        let _ = self.tx.try_send(Activity);
        self.visible.lock().map(|v| v.clone()).unwrap_or_default()
    }
    fn connect(&mut self, net: NetworkInput) -> Result<(), String> {
        let mut p = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if p.is_some() {
            return Err("a network is already being tried: wait for the result".into());
        }
        *p = Some(net);
        Ok(())
    }
    fn status(&mut self) -> Vec<(String, String)> {
        let _ = self.tx.try_send(Activity);
        self.steps.lock().map(|v| v.clone()).unwrap_or_default()
    }
    fn may_replace_credentials(&mut self) -> bool {
        self.forced.load(Ordering::SeqCst)
    }
}

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
        }
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

/// wpa_supplicant's per-interface control sockets (Debian's `wpa_supplicant.service`, the one
/// NetworkManager uses: `-O DIR=/run/wpa_supplicant`).
const WPA_CTRL_DIR: &str = "/run/wpa_supplicant";
/// How long one look at the enrollee's events lasts; the thread checks `want`/`stop` between.
const DPP_POLL: Duration = Duration::from_secs(2);
/// A failed start is retried this often (wpa_supplicant not up yet, the radio an AP...).
const DPP_RETRY: Duration = Duration::from_secs(30);

/// The DPP enrollee on a thread of its own: listening while `want` (the machine is not
/// online), a received network put in the one `pending` slot the portal uses too.
struct DppThread {
    want: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl DppThread {
    fn spawn(paths: Paths, pending: Arc<Mutex<Option<NetworkInput>>>) -> DppThread {
        let want = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (w, st) = (Arc::clone(&want), Arc::clone(&stop));
        let handle = std::thread::Builder::new()
            .name("provisioning-dpp".into())
            .spawn(move || dpp_loop(&mut || dpp_start(&paths), &w, &st, &pending))
            .map_err(|e| crate::error!("provisioning", "DPP: no thread: {e}"))
            .ok();
        DppThread { want, stop, handle }
    }
}

/// Stopping the thread stops the enrollee (wpa_supplicant's listen, bootstrap and log level
/// restored), however the service ends.
impl Drop for DppThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// `start` makes a listening enrollee (`dpp_start`; a stand-in wpa_supplicant in tests).
fn dpp_loop(
    start: &mut dyn FnMut() -> Result<super::dpp::Enrollee, String>,
    want: &AtomicBool,
    stop: &AtomicBool,
    pending: &Mutex<Option<NetworkInput>>,
) {
    use super::dpp;
    let mut enrollee: Option<dpp::Enrollee> = None;
    let mut last_error = String::new();
    let mut next_try = Instant::now();
    let mut next_listen = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if !want.load(Ordering::SeqCst) {
            if let Some(e) = enrollee.take() {
                e.stop();
                crate::info!("provisioning", "DPP: stopped listening");
            }
            // Wanted again (a join that failed): listening again at once.
            next_try = Instant::now();
            std::thread::sleep(DPP_POLL);
            continue;
        }
        let Some(e) = enrollee.as_mut() else {
            if Instant::now() < next_try {
                std::thread::sleep(DPP_POLL);
                continue;
            }
            next_try = Instant::now() + DPP_RETRY;
            match start() {
                Ok(e) => {
                    crate::info!(
                        "provisioning",
                        "DPP: listening on channel 1; bootstrap URI {}",
                        e.uri
                    );
                    last_error.clear();
                    next_listen = Instant::now() + DPP_RETRY;
                    enrollee = Some(e);
                }
                Err(err) if err != last_error => {
                    crate::warn!("provisioning", "DPP enrollee not started: {err}");
                    last_error = err;
                }
                Err(_) => {}
            }
            continue;
        };
        // wpa_supplicant stops listening after an exchange (or a failed one): listening
        // again is harmless when it still does.
        if Instant::now() >= next_listen {
            if let Err(err) = e.listen() {
                crate::warn!("provisioning", "DPP: {err}; restarting the enrollee");
                if let Some(e) = enrollee.take() {
                    e.stop();
                }
                continue;
            }
            next_listen = Instant::now() + DPP_RETRY;
        }
        match e.poll(DPP_POLL) {
            Some(Ok(net)) => {
                let mut p = pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if p.is_some() {
                    crate::warn!(
                        "provisioning",
                        "DPP: network {:?} received while another is being tried: dropped",
                        net.ssid
                    );
                    next_listen = Instant::now();
                } else {
                    crate::info!("provisioning", "DPP: network {:?} received", net.ssid);
                    *p = Some(net);
                    drop(p);
                    // The join needs the radio: listening on channel 1 meanwhile takes it off
                    // the network's channel and can make the join fail. The service stops
                    // wanting DPP while it joins; until it does, no new start either.
                    if let Some(e) = enrollee.take() {
                        e.stop();
                    }
                    next_try = Instant::now() + DPP_RETRY;
                }
            }
            Some(Err(why)) => {
                crate::warn!("provisioning", "DPP: network refused: {why}");
                next_listen = Instant::now();
            }
            None if e.take_ended() => next_listen = Instant::now(),
            None => {}
        }
    }
    if let Some(e) = enrollee.take() {
        e.stop();
    }
}

/// Key, interface, enrollee, and the URI with its QR codes published in `/opt/svc/dpp/`.
fn dpp_start(paths: &Paths) -> Result<super::dpp::Enrollee, String> {
    use super::dpp;
    let ctrl_dir = paths.device(WPA_CTRL_DIR);
    let sys_net = std::path::Path::new("/sys/class/net");
    let ifname = dpp::find_interface(&ctrl_dir, sys_net).ok_or_else(|| {
        format!(
            "no wpa_supplicant control socket for a Wi-Fi interface in {}",
            ctrl_dir.display()
        )
    })?;
    let dir = dpp::dir(paths);
    let key = dpp::load_or_create_key(&dir.join("bootstrap.key"))?;
    let e = dpp::Enrollee::start(&ctrl_dir.join(&ifname), &key)?;
    if let Err(err) = dpp::publish(&dir, &e.uri) {
        crate::warn!("provisioning", "DPP: QR code not written: {err}");
    }
    Ok(e)
}

/// `svc-agent provision [--root DIR] [--until-online] [--force]`.
pub(crate) fn cmd_provision(paths: Paths, until_online: bool, force: bool) -> i32 {
    let defaults = match load_defaults(&paths) {
        Ok(d) => d,
        Err(e) => {
            crate::error!("provisioning", "manufacturer defaults: {e}");
            return 1;
        }
    };
    if !super::nm::wifi_device_present() {
        crate::error!(
            "provisioning",
            "no Wi-Fi device managed by NetworkManager (nmcli -t -f TYPE dev): nothing to provision with"
        );
        return 1;
    }
    let settings = defaults::effective(&[&defaults]);
    if let Some(why) = defaults::startup_problem(&settings) {
        crate::error!("provisioning", "{why}");
        return 1;
    }
    if let Err(e) = super::dns::install(paths.root()) {
        crate::warn!("provisioning", "DNS redirect for the portal: {e}");
    }
    let mut svc = Service::new(paths, settings, None);
    if force {
        svc.driver.force(0);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    if svc.run(&stop, until_online) {
        0
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The join after a DPP handover needs the radio on the network's channel: the enrollee
    /// stops listening (and lets go of wpa_supplicant) at once, before the service has even
    /// taken the network, not listening again on channel 1 while the machine joins.
    #[test]
    fn the_dpp_enrollee_stops_listening_when_it_hands_over_a_network() {
        let d = std::env::temp_dir().join(format!("svc-dpp-loop-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let sock = d.join("wlan0");
        use super::super::dpp::tests::{handover_events, stand_in};
        let wpa = stand_in(&sock, handover_events());
        let (want, stop) = (
            Arc::new(AtomicBool::new(true)),
            Arc::new(AtomicBool::new(false)),
        );
        let pending = Arc::new(Mutex::new(None));
        let (w, st, p, s) = (
            Arc::clone(&want),
            Arc::clone(&stop),
            Arc::clone(&pending),
            sock.clone(),
        );
        let looping = std::thread::spawn(move || {
            let mut start = || super::super::dpp::Enrollee::start(&s, &[7u8; 32]);
            dpp_loop(&mut start, &w, &st, &p)
        });
        // The stand-in ends at DETACH; the old loop listened again instead and never let go.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(wpa.join().unwrap()));
        let seen = rx.recv_timeout(Duration::from_secs(60));
        stop.store(true, Ordering::SeqCst);
        let seen = seen.expect("the enrollee still holds wpa_supplicant after the handover");
        looping.join().unwrap();
        let got = pending
            .lock()
            .unwrap()
            .take()
            .expect("the network is handed over");
        assert_eq!(
            (got.ssid.as_str(), got.psk.as_str()),
            ("lab", "secret-pass-1")
        );
        let after: Vec<&str> = seen
            .iter()
            .skip_while(|c| !c.starts_with("DPP_LISTEN"))
            .skip(1)
            .map(|c| c.split(' ').next().unwrap_or(""))
            .collect();
        assert_eq!(
            after,
            [
                "DPP_STOP_LISTEN",
                "DPP_BOOTSTRAP_REMOVE",
                "LOG_LEVEL",
                "DETACH"
            ],
            "{seen:?}"
        );
        assert!(
            want.load(Ordering::SeqCst),
            "the service decides when DPP is wanted"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn default_routes_are_read_from_the_kernel_tables() {
        let v4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n\
                  wlan0\t00000000\t0100A8C0\t0003\t0\t0\t600\t00000000\n";
        assert!(default_route_in(v4, ""));
        let lan_only = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n\
                        wlan0\t0000A8C0\t00000000\t0001\t0\t0\t600\t00FFFFFF\n";
        assert!(!default_route_in(lan_only, ""));
        let lo6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert!(!default_route_in("", lo6));
        let wl6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003    wlan0\n";
        assert!(default_route_in("", wl6));
    }

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
    /// ran `nmcli connection up` for each (and for every one of them on each retry after).
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

    #[test]
    fn scan_output_is_parsed_with_escapes_and_deduplicated() {
        let out = "home\\:5G:80\ncafe:35\n:90\nhome\\:5G:60\nback\\\\slash:101\n";
        let v = parse_scan(out);
        assert_eq!(
            v,
            vec![
                Visible {
                    ssid: "back\\slash".into(),
                    signal: 100
                },
                Visible {
                    ssid: "home:5G".into(),
                    signal: 80
                },
                Visible {
                    ssid: "cafe".into(),
                    signal: 35
                },
            ]
        );
    }

    #[test]
    fn defaults_are_checked_like_config_attributes() {
        let dir = std::env::temp_dir().join(format!("svc-defaults-{}", std::process::id()));
        let p = Paths::new(&dir);
        assert_eq!(
            load_defaults(&p).unwrap(),
            ProvisioningAttributes::default()
        );
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::write(
            dir.join("etc/svc-defaults.json"),
            r#"{"hotspot_prefix": "acme", "hotspot_password": "long-enough-1", "offline_timeout_secs": 30}"#,
        )
        .unwrap();
        let d = load_defaults(&p).unwrap();
        assert_eq!(d.hotspot_prefix.as_deref(), Some("acme"));
        assert_eq!(d.offline_timeout_secs, Some(30));
        std::fs::write(
            dir.join("etc/svc-defaults.json"),
            r#"{"hotspot_password": "short"}"#,
        )
        .unwrap();
        let e = load_defaults(&p).unwrap_err();
        assert!(e.contains("/hotspot_password"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
