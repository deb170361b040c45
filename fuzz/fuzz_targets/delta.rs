//! Binary deltas (`update::delta`, svc-delta-v1 and -v2): any bytes applied to a fixed old
//! binary give the result or an error; never a panic, never more memory than the LZMA
//! dictionary's cap, never more output than the announced size (at most 1 MiB here, so a
//! run stays short).
#![no_main]
use libfuzzer_sys::fuzz_target;

/// The old binary the seeds (fuzz/seeds/delta) were made against.
static OLD: &[u8] = include_bytes!("../delta-old.bin");

fuzz_target!(|data: &[u8]| {
    // The size a delta announces (bytes 8..16) is what the offer must say too.
    let size = data
        .get(8..16)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    if size > 1 << 20 {
        return;
    }
    let mut patch = data;
    if let Ok(done) = svc::update::delta::apply(OLD, &mut patch, &mut std::io::sink(), size) {
        assert_eq!(done.size, size);
    }
});
