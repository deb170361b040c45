//! `svc-agent provision`: agent-provisioning in the foreground, without the daemon, until a
//! stop signal (`signals`) or, with `--until-online`, until the machine is online.
use super::args::{Args, UsageError};
use super::{help_requested, EXIT_INVALID, EXIT_OK};
use crate::paths::Paths;
use crate::provisioning::{defaults, manufacturer, nm, service::Service};

const HELP: &str = "usage: svc-agent provision [--until-online] [--force] [--root DIR]\n  Runs agent-provisioning in the foreground with NetworkManager: with no network reachable\n  (or no credentials, or --force) a WPA2 hotspot <prefix>-<hostname> and the captive portal\n  at http://10.42.0.1/; a network entered there is saved and joined. --until-online exits 0\n  once the machine is online after a hotspot session.\n";

pub(crate) fn cmd_provision(rest: &[String]) -> Result<i32, UsageError> {
    let a = Args::parse(rest, &["help", "until-online", "force"], &["root"])?;
    if help_requested(&a, HELP) {
        return Ok(EXIT_OK);
    }
    let paths = super::device_paths(&a)?;
    // The label secret and the DPP key are kept in the state directory.
    if !crate::dirtrust::trusted_or_logged(&paths, "provision") {
        return Ok(EXIT_INVALID);
    }
    Ok(run(paths, a.flag("until-online"), a.flag("force")))
}

fn run(paths: Paths, until_online: bool, force: bool) -> i32 {
    let defaults = match manufacturer::load_defaults(&paths) {
        Ok(d) => d,
        Err(e) => {
            crate::error!("provisioning", "manufacturer defaults: {e}");
            return EXIT_INVALID;
        }
    };
    if !nm::wifi_device_present() {
        crate::error!(
            "provisioning",
            "no Wi-Fi device managed by NetworkManager (nmcli -t -f TYPE dev): nothing to provision with"
        );
        return EXIT_INVALID;
    }
    let settings = defaults::effective(&[&defaults]);
    if let Some(why) = defaults::startup_problem(&settings) {
        crate::error!("provisioning", "{why}");
        return EXIT_INVALID;
    }
    if let Err(e) = crate::provisioning::dns::install(paths.root()) {
        crate::warn!("provisioning", "DNS redirect for the portal: {e}");
    }
    let mut svc = Service::new(paths, settings, None);
    if force {
        svc.force();
    }
    // SIGTERM and SIGINT stop it, as they stop the daemon (one set of flags per process).
    if let Err(e) = crate::signals::install() {
        crate::error!("provisioning", "signal handlers: {e}");
        return EXIT_INVALID;
    }
    if svc.run(&crate::signals::stop_flag(), until_online) {
        EXIT_OK
    } else {
        EXIT_INVALID
    }
}
