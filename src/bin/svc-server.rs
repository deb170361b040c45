//! svc-server: loads and validates the machine config and stays up until stopped,
//! re-reading the config on SIGHUP. (The module host grows here.)
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("version") {
        let code = match svc::cli::cmd_version(&args[2..], "svc-server") {
            Ok(c) => c,
            Err(e) => {
                eprintln!("svc-server version: {e}");
                2
            }
        };
        std::process::exit(code);
    }
    let config = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| std::env::var("SVC_CONFIG_FILE").ok());
    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(true));
    for (sig, flag) in [
        (signal_hook::consts::SIGTERM, &stop),
        (signal_hook::consts::SIGINT, &stop),
        (signal_hook::consts::SIGHUP, &reload),
    ] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(flag)) {
            eprintln!("svc-server: cannot install signal handlers: {e}");
            std::process::exit(1);
        }
    }
    svc::info!("svc-server", "svc-server {} up", env!("SVC_VERSION"));
    while !stop.load(Ordering::Relaxed) {
        if reload.swap(false, Ordering::Relaxed) {
            match config.as_deref().map(std::fs::read) {
                Some(Ok(bytes)) => match svc::config::parse_slice(&bytes) {
                    Ok((cfg, _)) => svc::info!(
                        "svc-server",
                        "config loaded: {} components, {} modules",
                        cfg.components.len(),
                        cfg.modules.len()
                    ),
                    Err(r) => {
                        svc::error!("svc-server", "config rejected: {} errors", r.errors.len())
                    }
                },
                Some(Err(e)) => svc::warn!("svc-server", "no config yet: {e}"),
                None => svc::warn!("svc-server", "no --config given"),
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    svc::info!("svc-server", "svc-server stopping");
}
