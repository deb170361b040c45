fn main() {
    std::process::exit(svc::cli::agent_main(std::env::args().collect()));
}
