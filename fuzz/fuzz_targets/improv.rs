//! Improv Wi-Fi GATT writes (RPC frames split over writes): any bytes give answers, never a
//! panic, never more than one frame buffered, and no network is ever joined without the
//! label secret's authorization.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert_eq!(svc::provisioning::improv::fuzz_writes(data), 0);
});
