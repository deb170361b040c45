//! Agent figures for BENCHMARKS.md, each next to its floor in the same run:
//! - bytes per unchanged poll (HTTPS with a 304, on the wire incl. TLS; and file://);
//! - fast-start latency: `svc-agent run` exec to svc-server exec, warm cache, next to a
//!   bare fork+exec launcher starting the same program.
//!
//! Run: `cargo bench --bench agent`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measurement harness
#[path = "../tests/it/common/mod.rs"]
mod common;

use common::https::HttpsServer;
use common::sandbox::{terminate, wait_for, Sandbox};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A tiny C program that prints the time it was exec'd and exits: the "svc-server" whose
/// start is measured. Compiled here so that its own start-up is negligible.
fn stamp_program(dir: &std::path::Path) -> std::path::PathBuf {
    let src = dir.join("stamp.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <time.h>\nint main(int c, char **v){struct timespec t;clock_gettime(CLOCK_REALTIME,&t);\
         FILE *f=fopen(getenv(\"STAMP_FILE\"),\"a\");fprintf(f,\"%lld\\n\",(long long)t.tv_sec*1000000000LL+t.tv_nsec);fclose(f);\
         struct timespec s={3600,0};nanosleep(&s,0);return 0;}\n",
    )
    .unwrap();
    let out = dir.join("stamp");
    let st = Command::new("cc")
        .args(["-O2", "-include", "stdlib.h", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "cc failed");
    out
}

fn agent_bin() -> String {
    std::env::var("SVC_AGENT_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_svc-agent").to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn fast_start(runs: usize) {
    let sb = Sandbox::new("bench-fast-start");
    let stamp = stamp_program(&sb.root);
    let bin = sb.root.join("opt/svc/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(&stamp, bin.join("svc-server")).unwrap();
    // A file:// app with no answer yet: fast start must not wait for it.
    sb.file_app();
    let stamp_file = sb.root.join("stamps");
    let (mut agent_ms, mut floor_ms) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let _ = std::fs::remove_file(&stamp_file);
        let t0 = now_ns();
        let mut child = Command::new(agent_bin())
            .args(["run", "--root", sb.root.to_str().unwrap()])
            .env("SVC_AGENT_FAST_START", "1")
            .env("STAMP_FILE", &stamp_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the stamp", 30, || {
            std::fs::read_to_string(&stamp_file).is_ok_and(|s| s.ends_with('\n'))
        });
        let t1: u128 = std::fs::read_to_string(&stamp_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        agent_ms.push((t1 - t0) as f64 / 1e6);
        terminate(&mut child);
        // The floor: a bare fork+exec of the same program from this process.
        let _ = std::fs::remove_file(&stamp_file);
        let t0 = now_ns();
        let mut c = Command::new(&stamp)
            .env("STAMP_FILE", &stamp_file)
            .spawn()
            .unwrap();
        wait_for("the floor stamp", 30, || {
            std::fs::read_to_string(&stamp_file).is_ok_and(|s| s.ends_with('\n'))
        });
        let t1: u128 = std::fs::read_to_string(&stamp_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        floor_ms.push((t1 - t0) as f64 / 1e6);
        let _ = c.kill();
        let _ = c.wait();
    }
    println!(
        "| fast start: exec of svc-agent to exec of svc-server (median of {runs}) | {:.2} ms |",
        median(agent_ms)
    );
    println!(
        "| floor: bare fork+exec of the same program (median of {runs}) | {:.2} ms |",
        median(floor_ms)
    );
}

fn unchanged_poll_bytes() {
    let sb = Sandbox::new("bench-poll-bytes");
    let srv = HttpsServer::start();
    sb.write_credentials(srv.base_url());
    srv.set_answer(serde_json::json!({"poll_interval_secs": 1, "config": {"agent": {}}}));
    let bin = sb.root.join("opt/svc/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("svc-server"), "#!/bin/sh\nexec sleep 3600\n").unwrap();
    std::fs::set_permissions(
        bin.join("svc-server"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let mut agent = sb.spawn_agent(&[("SSL_CERT_FILE", srv.ca.ca_file.to_str().unwrap())]);
    wait_for("five 304s", 60, || {
        srv.polls().iter().filter(|p| p.status_sent == 304).count() >= 5
    });
    terminate(&mut agent);
    let polls = srv.polls();
    let nm: Vec<_> = polls.iter().filter(|p| p.status_sent == 304).collect();
    let avg = |f: &dyn Fn(&&common::https::Seen) -> usize| {
        nm.iter().map(f).sum::<usize>() as f64 / nm.len() as f64
    };
    println!(
        "| unchanged poll over HTTPS, HTTP bytes (request + answer) | {:.0} + {:.0} B |",
        avg(&|p| p.bytes_in),
        avg(&|p| p.bytes_out)
    );
    println!(
        "| unchanged poll over HTTPS, on the wire incl. TLS handshake (client to server + back) | {:.0} + {:.0} B |",
        avg(&|p| p.wire_in),
        avg(&|p| p.wire_out)
    );
    let first = polls.iter().find(|p| p.status_sent == 200).unwrap();
    println!(
        "| first (changed) poll, on the wire | {} + {} B |",
        first.wire_in, first.wire_out
    );
}

fn main() {
    // `cargo bench` passes --bench; ignore arguments.
    // BENCH_ONLY=fast-start|poll-bytes runs one part; SVC_AGENT_BIN measures another build
    // (the static dist binary that ships, say).
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    println!("| figure | value |\n|---|---|");
    if only.is_empty() || only == "poll-bytes" {
        unchanged_poll_bytes();
    }
    if only.is_empty() || only == "fast-start" {
        fast_start(21);
    }
}
