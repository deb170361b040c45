//! State files that several threads write at once (issue 27): `versions.json` changed by many
//! threads through the one lock loses no change and always parses; two update workers (the
//! factory-fresh case: svc-server and svc-agent offered in one answer) both succeed, every
//! round, and both end up recorded.
use crate::update_support;

use std::sync::{Arc, Barrier};

use svc::fsutil::atomic_write;
use svc::update::{Engine, StateLock, VersionRecords};
use update_support::*;

const THREADS: usize = 8;
const CHANGES: usize = 60;

#[test]
fn many_threads_changing_the_records_lose_nothing_and_never_tear_the_file() {
    let paths = sandbox("state-files-records");
    let file = VersionRecords::path(&paths);
    // The writers, the reader and this thread.
    let start = Arc::new(Barrier::new(THREADS + 2));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));

    // A reader that parses the file whenever it can: it must never see a torn text.
    let reader = {
        let (file, done, start) = (file.clone(), done.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            let mut reads = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(bytes) = std::fs::read(&file) {
                    serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_or_else(|e| {
                        panic!(
                            "torn versions.json ({e}): {}",
                            String::from_utf8_lossy(&bytes)
                        )
                    });
                    reads += 1;
                }
            }
            reads
        })
    };
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (paths, start) = (paths.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for i in 0..CHANGES {
                    // One read-change-write, as the update workers and the main loop do it.
                    let held = StateLock::acquire(&paths).expect("lock");
                    let mut r = VersionRecords::load(&paths).expect("load");
                    r.entry(&format!("name-{t}")).bad.push(format!("{t}.{i}.0"));
                    r.entry("shared").bad.push(format!("{t}.{i}.1"));
                    r.save(&paths, &held)
                        .unwrap_or_else(|e| panic!("thread {t} change {i}: {e}"));
                }
            })
        })
        .collect();
    start.wait();
    for w in writers {
        w.join().expect("a writer failed");
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().expect("the reader saw a torn file") > 0);

    let r = VersionRecords::load(&paths).unwrap();
    assert!(
        !file.with_extension("json.corrupt").exists(),
        "set aside as corrupt"
    );
    for t in 0..THREADS {
        let own = &r
            .get(&format!("name-{t}"))
            .expect("every thread's entry")
            .bad;
        let want: Vec<String> = (0..CHANGES).map(|i| format!("{t}.{i}.0")).collect();
        assert_eq!(own, &want, "thread {t}'s changes");
    }
    assert_eq!(r.get("shared").unwrap().bad.len(), THREADS * CHANGES);
    let leftovers: Vec<_> = std::fs::read_dir(paths.state_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[test]
fn every_atomic_write_has_its_own_temp_file() {
    // Two threads writing the same file with texts of different lengths: each write lands
    // whole (the file is always one of the texts), and no write fails.
    let dir = scratch().join("state-files-atomic");
    let _ = std::fs::remove_dir_all(&dir);
    let file = dir.join("status.json");
    let texts = [vec![b'a'; 10], vec![b'b'; 100_000]];
    let start = Arc::new(Barrier::new(2));
    let handles: Vec<_> = texts
        .iter()
        .cloned()
        .map(|text| {
            let (file, start) = (file.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for i in 0..200 {
                    atomic_write(&file, &text, 0o600).unwrap_or_else(|e| panic!("write {i}: {e}"));
                    let now = std::fs::read(&file).unwrap();
                    assert!(
                        now == texts_of(&now),
                        "a mix of both texts ({} bytes)",
                        now.len()
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a writer failed");
    }
}

/// `bytes` when it is all one letter (one whole text), else an empty vector.
fn texts_of(bytes: &[u8]) -> Vec<u8> {
    match bytes.first() {
        Some(&c) if bytes.iter().all(|&b| b == c) => bytes.to_vec(),
        _ => Vec::new(),
    }
}

#[test]
fn svc_server_and_svc_agent_offered_together_both_update_every_time() {
    let paths = sandbox("state-files-both");
    for round in 1..=15 {
        let version = format!("1.0.{round}");
        let start = Arc::new(Barrier::new(2));
        let workers: Vec<_> = ["svc-server", "svc-agent"]
            .into_iter()
            .map(|name| {
                let (paths, start, version) = (paths.clone(), start.clone(), version.clone());
                let body = fake_binary(name, &version, "ok", 0);
                let src = paths.root().join(format!("src-{name}-{version}"));
                std::fs::write(&src, &body).unwrap();
                let a = artifact(name, &version, &format!("file://{}", src.display()), &body);
                std::thread::spawn(move || {
                    start.wait();
                    Engine::new(paths, test_opts()).install(&a)
                })
            })
            .collect();
        for (w, name) in workers.into_iter().zip(["svc-server", "svc-agent"]) {
            let r = w.join().expect("worker panicked");
            assert!(r.is_ok(), "round {round}: {name} update failed: {r:?}");
        }
        let r = VersionRecords::load(&paths).unwrap();
        for name in ["svc-server", "svc-agent"] {
            let rec = r.get(name).unwrap_or_else(|| panic!("{name} not recorded"));
            assert_eq!(rec.current.as_deref(), Some(version.as_str()), "{name}");
            assert_eq!(active(&paths, name).0, version, "{name}'s link");
        }
    }
}
