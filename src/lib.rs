//! svc-agent: the shared library behind the `svc-agent` and `svc-server` binaries.
//!
//! One module per concept; see `docs/architecture.md` for how data flows between them.
// `pub` only where the binaries or the tests reach it (the rest is `pub(crate)`), so that
// dead code shows.
#![warn(unreachable_pub)]
// Test hooks never reach a shipped binary: every shipping profile (release, dist, Yocto's and
// Buildroot's builds) has debug assertions off, and with them the hooks do not compile.
#[cfg(all(feature = "test-hooks", not(debug_assertions)))]
compile_error!("the test-hooks feature is for test builds only (debug assertions on)");

pub mod agent;
pub(crate) mod backoff;
pub mod cli;
pub mod config;
pub mod credentials;
pub(crate) mod dirtrust;
pub mod encoding;
pub mod fsutil;
pub mod hawkbit;
pub mod http;
#[macro_use]
pub mod logging;
pub mod logqueue;
pub mod logship;
pub(crate) mod osimage;
pub mod paths;
pub mod process;
pub mod protocol;
pub mod provisioning;
pub mod server;
pub mod signals;
pub mod supervisor;
pub mod sys;
pub mod syscfg;
pub mod systemd;
pub mod update;
pub(crate) mod watchdog;
