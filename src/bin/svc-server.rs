//! svc-server, the reference module host: see `svc::server` and docs/server.md.

// What `version --json` says, readable without running this file (`svc-release`).
svc::release_stamp!(STAMP, "svc-server");

fn main() {
    // Keeps the release stamp in the file whatever the linker collects.
    std::hint::black_box(&STAMP);
    std::process::exit(svc::cli::server::server_main(std::env::args().collect()));
}
