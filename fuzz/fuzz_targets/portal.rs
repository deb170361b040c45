//! Portal request parsing: any bytes give a request or a typed error, never a panic; a parsed
//! request respects the size limits, and accepted networks pass the SSID/psk rules.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::provisioning::portal;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = portal::parse_request(data) {
        assert!(req.body.len() <= portal::MAX_BODY);
        assert!(req.headers.len() <= portal::MAX_HEADERS);
        let _ = portal::parse_form(&req.body);
        if let Ok(n) = portal::validate_connect_form(&req, "token") {
            assert!(!n.ssid.is_empty() && n.ssid.len() <= 32);
            assert!(n.psk.len() >= 8 && n.psk.len() <= 64);
        }
    }
});
