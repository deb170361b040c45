//! The integration tests: one test binary (one link of aws-lc instead of one per file), a
//! module per area, shared helpers in `common` (one test CA, one HTTPS test server with its behaviours, nginx in front, sandboxes) and
//! `update_support` (fake ELF binaries, artifacts, signing).
//!
//! Run one area with a filter: `cargo test --test it syscfg::`.

// Tests may unwrap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Each scenario of a protocol test runs twice (`NAME::direct`, `NAME::nginx`): against the
/// test app directly, and through Debian's nginx (TLS terminated by nginx, keep-alive to the
/// agent, plain HTTP to the app). `NAME` is a function taking a `Front`.
macro_rules! both_fronts {
    ($name:ident) => {
        mod $name {
            #[test]
            fn direct() {
                super::$name(crate::common::https::Front::Direct);
            }
            #[test]
            #[ignore = "needs nginx (scripts/test-cargo.sh installs it and runs this)"]
            fn nginx() {
                super::$name(crate::common::https::Front::Nginx);
            }
        }
    };
}

mod common;
mod update_support;

mod agent_file;
mod agent_https;
mod app_conformance;
mod budget;
mod cli_tools;
mod config_rules;
mod data_partition;
mod ddi_server;
mod delta_agent;
mod dropped_flow;
mod enterprise_wifi;
mod fs_attacks;
mod fs_crash;
mod harness;
mod hawkbit;
mod hawkbit_config;
mod hawkbit_consent;
mod hawkbit_daemon;
mod hawkbit_goosebit;
// Its crates are x86_64-only dev-dependencies (Cargo.toml).
#[cfg(target_arch = "x86_64")]
mod hawkbit_mock;
mod hawkbit_operator;
mod hawkbit_rauc;
mod improv_button;
mod keepalive;
mod log_policy;
mod logqueue;
mod logqueue_secrets;
mod longpoll;
mod os_rauc;
mod powercut_campaign;
mod probation;
mod process_start;
mod provisioning_netns;
mod provisioning_portal;
mod provisioning_start;
mod release_tool;
mod server;
mod server_app;
mod shipped_files;
mod state_dirs;
mod state_files;
mod stick_authority;
mod supervisor;
mod swu_faults;
mod syscfg;
mod thread_stacks;
mod update_agent;
mod update_bench;
mod update_delta;
mod update_https;
mod update_powercut;
mod update_rollback;
mod watchdog;
