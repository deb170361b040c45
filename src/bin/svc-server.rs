//! svc-server, the reference module host: see `svc::server` and docs/server.md.
fn main() {
    std::process::exit(svc::cli::server::server_main(std::env::args().collect()));
}
