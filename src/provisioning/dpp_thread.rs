//! The DPP enrollee on a thread of its own, beside the service: started and stopped as the
//! service wants it, a received network put in the same one-slot `pending` as the portal's.
use super::dpp::DppError;
use super::portal::NetworkInput;
use crate::paths::Paths;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// wpa_supplicant's per-interface control sockets (Debian's `wpa_supplicant.service`, the one
/// NetworkManager uses: `-O DIR=/run/wpa_supplicant`).
pub(crate) const WPA_CTRL_DIR: &str = "/run/wpa_supplicant";
/// How long one look at the enrollee's events lasts; the thread checks `want`/`stop` between.
const DPP_POLL: Duration = Duration::from_secs(2);
/// A failed start is retried this often (wpa_supplicant not up yet, the radio an AP...).
const DPP_RETRY: Duration = Duration::from_secs(30);

/// The DPP enrollee on a thread of its own: listening while `want` (the machine is not
/// online), a received network put in the one `pending` slot the portal uses too.
pub(super) struct DppThread {
    pub(super) want: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl DppThread {
    pub(super) fn spawn(paths: Paths, pending: Arc<Mutex<Option<NetworkInput>>>) -> DppThread {
        let want = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (w, st) = (Arc::clone(&want), Arc::clone(&stop));
        let handle = crate::sys::thread("provisioning-dpp")
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
    start: &mut dyn FnMut() -> Result<super::dpp::Enrollee, DppError>,
    want: &AtomicBool,
    stop: &AtomicBool,
    pending: &Mutex<Option<NetworkInput>>,
) {
    use super::dpp;
    let mut enrollee: Option<dpp::Enrollee> = None;
    // The last failure to start, logged once until another one (or a start) comes.
    let mut last_error: Option<DppError> = None;
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
                    last_error = None;
                    next_listen = Instant::now() + DPP_RETRY;
                    enrollee = Some(e);
                }
                Err(err) if last_error.as_ref() != Some(&err) => {
                    crate::warn!("provisioning", "DPP enrollee not started: {err}");
                    last_error = Some(err);
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
fn dpp_start(paths: &Paths) -> Result<super::dpp::Enrollee, DppError> {
    use super::dpp;
    let ctrl_dir = paths.device(WPA_CTRL_DIR);
    let sys_net = std::path::Path::new("/sys/class/net");
    let ifname = dpp::find_interface(&ctrl_dir, sys_net)
        .ok_or_else(|| DppError::NoInterface(ctrl_dir.clone()))?;
    let dir = dpp::dir(paths);
    let key = dpp::load_or_create_key(&dir.join("bootstrap.key"))?;
    let e = dpp::Enrollee::start(&ctrl_dir.join(&ifname), &key)?;
    if let Err(err) = dpp::publish(&dir, &e.uri) {
        crate::warn!("provisioning", "DPP: QR code not written: {err}");
    }
    Ok(e)
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
}
