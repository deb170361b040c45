//! svc-agent: the shared library behind the `svc-agent` and `svc-server` binaries.
//!
//! One module per concept; see `docs/architecture.md` for how data flows between them.
pub mod agent;
pub mod cli;
pub mod config;
pub mod credentials;
pub mod fsutil;
#[macro_use]
pub mod logging;
pub mod logqueue;
pub mod logship;
pub mod paths;
pub mod protocol;
pub mod provisioning;
pub mod server;
pub mod supervisor;
pub mod syscfg;
pub mod systemd;
pub mod update;
