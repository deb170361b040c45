#!/usr/bin/env bash
# What the test command's builds cost, before and after issue 14's changes, side by side in
# one run (BENCHMARKS.md, "What a full test run costs", session 8). Each build is cold, in a
# target folder of its own under target/build-costs/ (removed afterwards), timed with
# /usr/bin/time: wall, user and system CPU seconds. On a shared machine compare CPU seconds.
#
#   benches/build-costs.sh lab-v2|fuzz|aarch64-tests...
#
#   lab-v2         the lab's 0.2.0 build: a profile of its own (dist without LTO, opt-level 1:
#                  every dependency compiled again) against build-static.sh --profile lab-v2
#                  (dist's dependencies, only svc-agent again), after a dist build.
#   fuzz           the fuzz tier's build before session 11 (cargo-fuzz installed, then
#                  `cargo fuzz build`) and now (`scripts/fuzz.sh --build`: the same flags by
#                  cargo itself, nothing installed), each cold.
#   aarch64-tests  the packaging tier's aarch64 test build with and without debug info.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
work="$root/target/build-costs"
trap 'rm -rf "$work"' EXIT
measure() { # measure LABEL COMMAND...: one timed run, its figures on one line
    local rc=0 wall user sys
    /usr/bin/time -f "%e %U %S" -o "$work/time" "${@:2}" >"$work/out" 2>&1 || rc=$?
    [ "$rc" = 0 ] || { tail -n 20 "$work/out"; echo "$1: FAILED"; return 1; }
    read -r wall user sys <"$work/time"
    printf '%-40s wall %7.1f s  CPU %7.1f s (user %.1f + sys %.1f)\n' "$1" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$user" "$sys"
}
mkdir -p "$work"
for what in "$@"; do
    case "$what" in
    lab-v2)
        export CARGO_TARGET_DIR="$work/lab-v2"
        measure "dist build (x86_64, cold)" scripts/build-static.sh x86_64 --profile dist
        measure "0.2.0: dist's deps, svc-agent again" env SVC_BUILD_VERSION=0.2.0 scripts/build-static.sh x86_64 --profile lab-v2
        measure "0.2.0: a profile of its own (before)" env SVC_BUILD_VERSION=0.2.0 cargo build --locked \
            --profile dist --config profile.dist.lto=false --config profile.dist.opt-level=1 \
            --config profile.dist.codegen-units=16 --target x86_64-unknown-linux-musl --bin svc-agent --bin svc-server \
            --target-dir "$work/lab-v2-own"
        unset CARGO_TARGET_DIR
        rm -rf "$work/lab-v2" "$work/lab-v2-own" ;;
    fuzz)
        measure "before: cargo install cargo-fuzz" cargo install cargo-fuzz --locked --version 0.13.2 \
            --root "$work/cargo-fuzz"
        measure "before: cargo fuzz build" env RUSTC_BOOTSTRAP=1 PATH="$work/cargo-fuzz/bin:$PATH" \
            cargo fuzz build -s none --target-dir "$work/fuzz-before"
        measure "now: scripts/fuzz.sh --build" env CARGO_TARGET_DIR="$work/fuzz-now" scripts/fuzz.sh --build
        rm -rf "$work/fuzz-before" "$work/fuzz-now" "$work/cargo-fuzz" ;;
    aarch64-tests)
        for debug in 2 0; do
            measure "aarch64 lib + config tests, debug=$debug" env CARGO_TARGET_DIR="$work/aarch64-$debug" \
                CARGO_PROFILE_DEV_DEBUG=$debug CARGO_PROFILE_TEST_DEBUG=$debug \
                CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar \
                CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc \
                CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER=qemu-aarch64-static \
                sh -c 'cargo test --locked --target aarch64-unknown-linux-musl --lib -q &&
                    cargo test --locked --target aarch64-unknown-linux-musl --test it -q config_rules::'
            rm -rf "$work/aarch64-$debug"
        done ;;
    *) echo "usage: $0 lab-v2|fuzz|aarch64-tests..." >&2; exit 2 ;;
    esac
done
