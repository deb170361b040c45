//! The flap campaign (#45): the provisioning driver against a simulated NetworkManager whose
//! known networks appear, vanish, lose internet and get it back at seeded random moments, on
//! a logical clock (the driver's `tick(now)`; no sleeping). It checks, at every tick, that
//! the machine never strands: whenever a known network with internet is visible and the
//! machine is not on one, it is back on one within `bound()`, and hotspot mode never lasts
//! longer than a retry while such a network is visible.
//!
//! `SVC_FLAPS=N` sets the number of flaps (default 1,000); the figures are printed.
use super::defaults::Settings;
use super::driver::{Provisioning, HOTSPOT_ID, NM_CONNECTING_HOLD, NM_RETRY_GRACE};
use super::nm::{NetworkBackend, NmError, WifiProfile};
use super::state::Mode;
use crate::config::model::Network;
use crate::paths::Paths;
use std::cell::RefCell;
use std::rc::Rc;

/// The daemon's tick (`service::TICK`).
const TICK: u64 = 2;
/// NetworkManager's autoconnect: a few seconds from seeing the network to having an address.
const NM_JOIN_MAX: u64 = 10;
/// NetworkManager's `autoconnect-retries` (4) and the time a profile stays blocked after.
const NM_RETRIES: u32 = 4;
const NM_BLOCKED_SECS: u64 = 300;
/// NetworkManager gives up on DHCP after this (`ipv4.dhcp-timeout`'s default).
const NM_DHCP_TIMEOUT: u64 = 45;

/// Seeded splitmix64: the same seed, the same campaign.
#[derive(Debug)]
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Dev {
    Idle,
    Connecting { id: String, done_at: u64 },
    Connected(String),
    Ap,
}

#[derive(Debug)]
struct Net {
    id: String,
    visible: bool,
    internet: bool,
    priority: i32,
    /// Without internet, the AP's DHCP server may be gone too (its router rebooting): an
    /// activation then hangs in "getting IP configuration" and fails.
    dhcp_dead: bool,
    failures: u32,
    blocked_until: u64,
}

/// The simulated NetworkManager and the world around it (one Wi-Fi device).
#[derive(Debug)]
struct World {
    now: u64,
    dev: Dev,
    nets: Vec<Net>,
    rng: Rng,
}

impl World {
    fn net(&self, id: &str) -> Option<&Net> {
        self.nets.iter().find(|n| n.id == id)
    }
    fn usable(&self, id: &str) -> bool {
        self.net(id).is_some_and(|n| n.visible && n.internet)
    }
    fn any_usable(&self) -> bool {
        self.nets.iter().any(|n| n.visible && n.internet)
    }
    fn online(&self) -> bool {
        matches!(&self.dev, Dev::Connected(id) if self.usable(id))
    }

    /// NetworkManager on its own, once a second: a connection whose network vanished drops;
    /// an activation finishes (or fails, counting toward the retries); an idle device
    /// autoconnects the highest-priority visible profile that is not blocked.
    fn nm_step(&mut self) {
        match self.dev.clone() {
            Dev::Connected(id) if !self.net(&id).is_some_and(|n| n.visible) => self.dev = Dev::Idle,
            Dev::Connecting { id, done_at } if self.now >= done_at => {
                let now = self.now;
                let n = self.nets.iter_mut().find(|n| n.id == id).expect("known");
                if n.visible && !n.dhcp_dead {
                    n.failures = 0;
                    self.dev = Dev::Connected(id);
                } else {
                    n.failures += 1;
                    if n.failures >= NM_RETRIES {
                        n.failures = 0;
                        n.blocked_until = now + NM_BLOCKED_SECS;
                    }
                    self.dev = Dev::Idle;
                }
            }
            Dev::Idle => {
                let now = self.now;
                let pick = self
                    .nets
                    .iter()
                    .filter(|n| n.visible && n.blocked_until <= now)
                    .max_by_key(|n| n.priority)
                    .map(|n| n.id.clone());
                if let Some(id) = pick {
                    let dead = self.net(&id).is_some_and(|n| n.dhcp_dead);
                    let done_at = now
                        + if dead {
                            NM_DHCP_TIMEOUT
                        } else {
                            self.rng.range(2, NM_JOIN_MAX)
                        };
                    self.dev = Dev::Connecting { id, done_at };
                }
            }
            _ => {}
        }
    }
}

#[derive(Clone)]
struct FakeNm(Rc<RefCell<World>>);
impl NetworkBackend for FakeNm {
    fn save_wifi(&mut self, _p: &WifiProfile) -> Result<(), NmError> {
        Ok(())
    }
    /// `nmcli connection up` waits for the activation: it ends connected or failed (an
    /// explicit activation is allowed while autoconnect is blocked, and resets it).
    fn up(&mut self, id: &str) -> Result<(), NmError> {
        let mut w = self.0.borrow_mut();
        if id == HOTSPOT_ID {
            w.dev = Dev::Ap;
            return Ok(());
        }
        let visible = w.net(id).is_some_and(|n| n.visible && !n.dhcp_dead);
        if let Some(n) = w.nets.iter_mut().find(|n| n.id == id) {
            n.blocked_until = 0;
            n.failures = 0;
        }
        if visible {
            w.dev = Dev::Connected(id.to_string());
            Ok(())
        } else {
            w.dev = Dev::Idle;
            Err(NmError::Nmcli {
                args: format!("connection up {id}"),
                stderr: "no network with SSID found".into(),
            })
        }
    }
    fn down(&mut self, id: &str) -> Result<(), NmError> {
        let mut w = self.0.borrow_mut();
        let on = match &w.dev {
            Dev::Ap => id == HOTSPOT_ID,
            Dev::Connected(c) | Dev::Connecting { id: c, .. } => c == id,
            Dev::Idle => false,
        };
        if on {
            w.dev = Dev::Idle;
        }
        Ok(())
    }
    fn delete(&mut self, _id: &str) -> Result<(), NmError> {
        Ok(())
    }
    fn disable(&mut self, _id: &str) -> Result<(), NmError> {
        Ok(())
    }
    fn connecting(&mut self) -> Option<String> {
        match &self.0.borrow().dev {
            Dev::Connecting { id, .. } => Some(id.clone()),
            _ => None,
        }
    }
}

/// The longest a known network with internet may be visible while the machine is not on
/// one, from the product's timing: the hotspot comes at most `offline_timeout` after the
/// offline period began, held at most `NM_CONNECTING_HOLD` (+ `NM_RETRY_GRACE`) while
/// NetworkManager activates something; the first retry is `retry_networks` after that; one
/// tick of lateness at each of the three steps.
fn bound(s: &Settings) -> u64 {
    s.offline_timeout_secs + NM_CONNECTING_HOLD + NM_RETRY_GRACE + s.retry_networks_secs + 3 * TICK
}

#[derive(Debug, Default)]
struct Figures {
    flaps: u64,
    returns: Vec<u64>,
    strandings: Vec<String>,
    max_hotspot_while_usable: u64,
}

/// One seeded campaign of `flaps` flaps; `roaming` and `configured` vary the machine.
fn campaign(
    seed: u64,
    flaps: u64,
    roaming: bool,
    configured: bool,
    broken: bool,
    figs: &mut Figures,
) {
    let dir = std::env::temp_dir().join(format!("svc-flaps-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    if configured {
        std::fs::write(dir.join("etc/svc.json"), "{}").unwrap();
    }
    let mut rng = Rng(seed);
    let count = rng.range(1, 3) as i32;
    let networks: Vec<Network> = (0..count)
        .map(|i| Network {
            net_type: "wifi".into(),
            ssid: format!("known-{i}"),
            psk: Some("password1".into()),
            priority: 10 * (i + 1),
            hidden: false,
            eap: None,
            extra: Default::default(),
        })
        .collect();
    let settings = Settings {
        hotspot_password: "per-device-9f3k".into(),
        roaming_mode: roaming,
        networks: networks.clone(),
        ..Default::default()
    };
    // The checker holds the product to its own timing; `broken` retries as if never.
    let product = Settings {
        retry_networks_secs: if broken {
            u64::MAX / 2
        } else {
            settings.retry_networks_secs
        },
        ..settings.clone()
    };
    let world = Rc::new(RefCell::new(World {
        now: 0,
        dev: Dev::Idle,
        nets: networks
            .iter()
            .map(|n| Net {
                id: super::nm::config_id(&n.ssid),
                visible: true,
                internet: true,
                priority: n.priority,
                dhcp_dead: false,
                failures: 0,
                blocked_until: 0,
            })
            .collect(),
        rng: Rng(seed ^ 0x5eed),
    }));
    let w2 = Rc::clone(&world);
    let mut p = Provisioning::new(Paths::new(&dir), FakeNm(Rc::clone(&world)), product, 0)
        .with_probe(Box::new(move |_| w2.borrow().online()));
    let bound = bound(&settings);
    // Per network: the next moment it changes. Short outages and long ones, both.
    let mut next: Vec<u64> = (0..count).map(|_| rng.range(1, 400)).collect();
    let mut owed_since: Option<u64> = None;
    let mut hotspot_usable_since: Option<u64> = None;
    let mut done = 0;
    let mut now = 0;
    while done < flaps {
        now += 1;
        world.borrow_mut().now = now;
        for (i, at) in next.iter_mut().enumerate() {
            if *at > now {
                continue;
            }
            let mut w = world.borrow_mut();
            let was = w.usable(&w.nets[i].id.clone());
            let n = &mut w.nets[i];
            match rng.range(0, 3) {
                0 => n.visible = !n.visible,
                1 => n.internet = !n.internet,
                // Both come back at once (the AP rebooted with its uplink).
                _ => {
                    let back = !(n.visible && n.internet);
                    n.visible = back;
                    n.internet = back;
                }
            }
            n.dhcp_dead = !n.internet && rng.range(0, 1) == 0;
            let id = n.id.clone();
            if !was && w.usable(&id) {
                done += 1;
            }
            // Outages from a blink to longer than every timeout of the product.
            *at = now
                + match rng.range(0, 2) {
                    0 => rng.range(1, 20),
                    1 => rng.range(20, 200),
                    _ => rng.range(200, 900),
                };
        }
        world.borrow_mut().nm_step();
        if now % TICK == 0 {
            p.tick(now);
        }
        let w = world.borrow();
        let mode = p.status().mode.clone();
        // Stranded: a usable network visible, the machine not on one.
        match (w.any_usable() && !w.online(), owed_since) {
            (true, None) => owed_since = Some(now),
            (true, Some(t)) if now - t > bound => {
                figs.strandings.push(format!(
                    "seed {seed}: {} s off a usable network at {now} s (mode {mode:?}, device {:?}, nets {:?})",
                    now - t,
                    w.dev,
                    w.nets
                ));
                owed_since = None;
            }
            (true, Some(_)) => {}
            (false, Some(t)) => {
                if w.online() {
                    figs.returns.push(now - t);
                }
                owed_since = None;
            }
            (false, None) => {}
        }
        let hotspot = matches!(mode, Mode::Hotspot { .. });
        match (hotspot && w.any_usable(), hotspot_usable_since) {
            (true, None) => hotspot_usable_since = Some(now),
            (true, Some(t)) => {
                figs.max_hotspot_while_usable = figs.max_hotspot_while_usable.max(now - t)
            }
            (false, _) => hotspot_usable_since = None,
        }
        // Hotspot mode lasts at most one retry while a usable network is visible.
        if hotspot_usable_since.is_some_and(|t| now - t > settings.retry_networks_secs + TICK) {
            figs.strandings.push(format!(
                "seed {seed}: hotspot mode for {} s beside a usable network at {now} s",
                now - hotspot_usable_since.unwrap_or(now)
            ));
            hotspot_usable_since = None;
        }
    }
    figs.flaps += done;
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_thousand_flaps_strand_nothing() {
    let total: u64 = std::env::var("SVC_FLAPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let per = 100;
    let mut figs = Figures::default();
    let mut seed = 0;
    while figs.flaps < total {
        seed += 1;
        let flaps = per.min(total - figs.flaps);
        campaign(seed, flaps, seed % 2 == 0, seed % 5 != 0, false, &mut figs);
    }
    let mut r = figs.returns.clone();
    r.sort_unstable();
    let pct = |q: usize| r.get((r.len() * q / 100).min(r.len().saturating_sub(1)));
    println!(
        "flaps {} over {seed} seeds; returns measured {}; time back p50 {:?} s, p95 {:?} s, p99 {:?} s, max {:?} s (bound {} s); longest hotspot beside a usable network {} s; strandings {}",
        figs.flaps,
        r.len(),
        pct(50),
        pct(95),
        pct(99),
        r.last(),
        bound(&Settings::default()),
        figs.max_hotspot_while_usable,
        figs.strandings.len()
    );
    assert!(
        figs.strandings.is_empty(),
        "{} strandings, first: {:?}",
        figs.strandings.len(),
        figs.strandings.first()
    );
}

/// The campaign sees a stranding when there is one: a machine that never retries its known
/// networks from hotspot mode (no roaming) is caught.
#[test]
fn the_campaign_catches_a_machine_that_stays_in_hotspot_mode() {
    let mut figs = Figures::default();
    campaign(1, 100, false, true, true, &mut figs);
    assert!(!figs.strandings.is_empty(), "{figs:?}");
}
