//! The log-queue frame decoder, through the queue's own open (scan and truncate at the first
//! bad frame) and read: any bytes in a segment give a queue that opens, reads records with
//! increasing ids, and still takes and returns a new record. Never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::logging::Level;
use svc::logqueue::{LogQueue, QueueConfig};

fuzz_target!(|data: &[u8]| {
    // tmpfs where there is one: the queue fsyncs, which on a disk would dominate each run.
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("svc-fuzz-logqueue-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("seg-00000000000000000001.log"), data).expect("segment");
    let mut q = match LogQueue::open(&dir, QueueConfig::default()) {
        Ok(q) => q,
        Err(_) => return,
    };
    let batch = q.read_batch(10_000, 1 << 20).expect("read after open");
    for w in batch.windows(2) {
        assert!(w[0].id < w[1].id, "ids not increasing");
    }
    let last = batch.last().map_or(0, |r| r.id);
    q.append(Level::Info, "fuzz", "after").expect("append");
    let again = q.read_batch(20_000, 1 << 21).expect("read after append");
    let tail = again.last().expect("the new record");
    assert!(tail.id > last);
    assert_eq!(tail.message, "after");
});
