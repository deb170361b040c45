//! SWUpdate images (`.swu`, update::swu): any bytes are an image whose every file matches its
//! sw-description, or an error; never a panic, never more memory than the archive's own
//! bounds allow.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(desc) = svc::update::swu::inspect(data, "x86_64") {
        assert!(!desc.images.is_empty());
    }
});
