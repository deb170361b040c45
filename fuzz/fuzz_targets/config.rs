//! Parser + validator of the machine config: any bytes give a result, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match svc::config::parse_slice(data) {
        Ok((cfg, report)) => {
            assert!(report.is_valid());
            // A valid config serializes and validates again.
            let text = serde_json::to_string(&cfg).expect("serializable");
            let again = svc::config::parse_str(&text);
            assert!(again.is_ok(), "re-validation failed: {text}");
            // Module environments either expand or name their problem.
            let lookup = |k: &str| (k == "HOME").then(|| "/root".to_string());
            let host = svc::config::env::HostEnv { lookup: &lookup, machine_id: "m".into() };
            for m in &cfg.modules {
                let _ = svc::config::env::module_env(m, &host, None);
            }
        }
        Err(report) => assert!(!report.errors.is_empty()),
    }
});
