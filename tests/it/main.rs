//! The integration tests: one test binary (one link of aws-lc instead of one per file), a
//! module per area, shared helpers in `common` (test CA, HTTPS servers, sandboxes) and
//! `update_support` (fake ELF binaries, artifacts, signing).
//!
//! Run one area with a filter: `cargo test --test it syscfg::`.

// Tests may unwrap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod update_support;

mod agent_file;
mod agent_https;
mod cli_tools;
mod config_rules;
mod keepalive;
mod logqueue;
mod logqueue_secrets;
mod probation;
mod provisioning_netns;
mod provisioning_portal;
mod server;
mod server_app;
mod shipped_files;
mod state_files;
mod supervisor;
mod syscfg;
mod update_agent;
mod update_bench;
mod update_https;
mod update_powercut;
mod update_rollback;
