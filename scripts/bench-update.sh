#!/bin/sh
# Update engine benchmark: 256 MiB artifact over loopback HTTPS with a test CA.
# Compares svc-agent's download+verify with the floor `curl | sha256sum` and reports the
# downloader's peak memory (VmHWM of a child process). Figures go to BENCHMARKS.md ("Updates").
set -eu
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2
# curl is the floor we compare against; install it on a fresh machine (idempotent).
if ! command -v curl >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq curl
fi
# Release code, but thin LTO off so the bench builds in reasonable time on a small machine.
# Debug assertions on: the tests build the library with its test hooks (src/lib.rs).
CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true \
    cargo test --release --test it -- --ignored --nocapture --test-threads=1 \
    update_bench::bench_download_verify_256mib 2>/dev/null | grep -E '^[|]|^raw:'
