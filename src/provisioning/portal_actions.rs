//! The portal's adapter onto the service: what the portal's handlers may ask (visible
//! networks, the status steps) and hand over (one network at a time, activity marks).
use super::portal::{NetworkInput, NetworkRefused};
use super::portal_http::{PortalActions, Visible};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};

/// A phone is using the portal (the hotspot must not be cycled under it). Bounded: a flood
/// of requests drops activity marks, which are all alike.
pub(super) struct Activity;
pub(super) const ACTIVITY_QUEUE: usize = 16;

/// What the portal sees of the service.
pub(super) struct Actions {
    pub(super) tx: SyncSender<Activity>,
    /// The one network waiting to be joined: a second submission is refused until the
    /// first was tried (each try takes the hotspot down and runs nmcli).
    pub(super) pending: Arc<Mutex<Option<NetworkInput>>>,
    pub(super) visible: Arc<Mutex<Vec<Visible>>>,
    pub(super) steps: Arc<Mutex<Vec<(String, String)>>>,
    pub(super) forced: Arc<AtomicBool>,
}

impl PortalActions for Actions {
    fn networks(&mut self) -> Vec<Visible> {
        let _ = self.tx.try_send(Activity);
        self.visible.lock().map(|v| v.clone()).unwrap_or_default()
    }
    fn connect(&mut self, net: NetworkInput) -> Result<(), NetworkRefused> {
        let mut p = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if p.is_some() {
            return Err(NetworkRefused::Busy);
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
