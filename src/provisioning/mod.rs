//! agent-provisioning: first-boot Wi-Fi setup (hotspot + portal), networks by priority, roaming.
//!
//! Decisions are pure (`state::step`, `defaults::effective`); NetworkManager, the portal and the
//! internet check are effects wired around them.
pub mod check;
pub mod defaults;
pub mod nm;
pub mod portal;
pub mod state;
