#!/bin/sh
# SWUpdate image figures (issue 26): .swu overhead, and taking a 5 MB svc-server out of an
# image through the engine, side by side with `cpio -i` + `sha256sum` of the same archive.
# Figures go to BENCHMARKS.md ("SWUpdate images").
set -eu
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2
if ! command -v cpio >/dev/null 2>&1; then
    # shellcheck source=scripts/lib/apt.sh
    . scripts/lib/apt.sh
    apt_need_file /usr/bin/cpio cpio
    apt_install_needed
fi
# As scripts/bench-update.sh: release code without LTO, debug assertions on (the bench links
# the library the tests build, with its test hooks: src/lib.rs).
CARGO_PROFILE_BENCH_LTO=false CARGO_PROFILE_BENCH_CODEGEN_UNITS=16 CARGO_PROFILE_BENCH_DEBUG_ASSERTIONS=true \
    exec cargo bench --bench swu "$@"
