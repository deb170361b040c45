//! svc-agent, the device agent: see `svc::cli::agent_main` and docs/agent.md.
//!
//! A C `main` instead of Rust's (fast start, BENCHMARKS.md "Fast start, seventh pass"):
//! std's runtime start sets up a stack-overflow handler (an alternate signal stack, its
//! guard page, two handlers that every spawn then resets in the child): twelve system calls
//! on the way to svc-server's start, eight in the agent and four in svc-server's child.
//! `svc::sys::process_start` does the part svc-agent needs. Without the handler, a stack
//! overflow still ends the process at the guard page (SIGSEGV, and systemd restarts the
//! service); only std's message naming the thread is lost.
// `cargo test --bins` builds this file with the test harness's own `main`.
#![cfg_attr(not(test), no_main)]
// `no_mangle` and reading C's argv; nothing else here is unsafe.
#![allow(unsafe_code)]

#[cfg(not(test))]
use std::ffi::{c_char, c_int};

// What `version --json` says, readable without running this file (`svc-release`).
svc::release_stamp!(STAMP, "svc-agent");

#[cfg(not(test))]
#[no_mangle]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    svc::sys::process_start();
    // Keeps the release stamp in the file whatever the linker collects.
    std::hint::black_box(&STAMP);
    // SAFETY: the C runtime calls `main` with the argument vector exec passed: `argc`
    // pointers to NUL-terminated strings that live as long as the process.
    let args = unsafe { svc::sys::c_args(argc, argv) };
    // As Rust's main: a panic that unwinds (builds without panic=abort) exits with 101, not
    // through C's frames; std::process::exit flushes stdout.
    let code = std::panic::catch_unwind(|| svc::cli::agent_main(args)).unwrap_or(101);
    std::process::exit(code)
}
