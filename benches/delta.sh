#!/usr/bin/env bash
# Binary deltas on the project's own consecutive releases (issue 44): three `dist` builds of
# svc-agent and svc-server, `old` (0.1.0), `new` (0.1.1: a small code change, one log
# message's text) and `dep` (0.1.1: a dependency update, rustls-pki-types 1.15.1 -> 1.16.0 in
# Cargo.lock, a minor version of a crate both binaries link through rustls; no code change),
# then `svc-release delta` from `old` to each: delta bytes against the full artifact, and the
# device's apply time and peak memory (`old`'s own `svc-agent apply-delta`, the binary a
# device runs when it applies the delta, under /usr/bin/time -v). Prints one line per binary,
# change and format: svc-delta-v1 (bsdiff + zlib) and svc-delta-v2 (the same patch in LZMA) on
# the same builds; the figures go to BENCHMARKS.md, "Binary deltas".
#
#   benches/delta.sh [x86_64|aarch64]     default x86_64
#
# DELTA_BENCH_CHANGES: the changes measured (default "new dep"; only those are built).
# DELTA_BENCH_REV: the commit the builds are made from (default HEAD).
# DELTA_BENCH_AGENT_REV: build the device's agent that applies the deltas from this commit
# (`agent`), e.g. one that reads svc-delta-v2 when DELTA_BENCH_REV is from before it;
# default: `old`'s own agent. DELTA_BENCH_FORMATS: the formats made and applied (default
# "svc-delta-v1 svc-delta-v2"; v1 alone for an applying agent from before v2).
#
# aarch64: the device side runs on this x86_64 host through qemu-aarch64-static (binfmt), so
# its time and peak RSS are the emulator's (qemu-user's own memory included), not a board's.
#
# The source tree is a `git archive HEAD` copy under target/delta-bench/ARCH/src (the work tree
# is not touched), made afresh for each build; all build into this tree's target folder, so
# only svc's own units (and, for `dep`, the updated crate and those above it) are compiled
# again. Needs the dist
# prerequisites of scripts/build-static.sh, and crates.io for the updated crate.
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-x86_64}"
root="$PWD"
work="$root/target/delta-bench/$arch"
mkdir -p "$work"
# DELTA_BENCH_TARGET: another target folder for the builds (two architectures side by side:
# scripts/build-static.sh builds one at a time per folder); svc-release is this tree's.
export CARGO_TARGET_DIR="${DELTA_BENCH_TARGET:-$root/target}"
out="$CARGO_TARGET_DIR/$arch-unknown-linux-musl/dist"

build() { # build NAME VERSION [COMMAND]: a copy of HEAD, changed by COMMAND run in it
    # One source folder for all (each extracted afresh): the aarch64 build's linker is a
    # path in it (scripts/build-static.sh), so one path lets the three share what they can.
    # Each build's Cargo.lock is kept beside its binaries.
    local name="$1" version="$2" change="${3:-}" src="$work/src"
    # Built once (9 min each on two busy cores); DELTA_BENCH_REBUILD=1 builds them again.
    if [ -x "$work/$name/svc-agent" ] && [ -z "${DELTA_BENCH_REBUILD:-}" ]; then
        return 0
    fi
    rm -rf "$src" && mkdir -p "$src" "$work/$name"
    git archive "$rev" | tar -x -C "$src"
    [ -z "$change" ] || (cd "$src" && eval "$change")
    # The release stamp's version differs too, as between two real releases.
    (cd "$src" && SVC_BUILD_VERSION="$version" bash scripts/build-static.sh "$arch" --profile dist >/dev/null)
    cp "$out/svc-agent" "$out/svc-server" "$work/$name/"
    cp "$src/Cargo.lock" "$work/$name/Cargo.lock"
    git rev-parse "$rev" >"$work/$name/.head"
}
changes="${DELTA_BENCH_CHANGES:-new dep}"
rev="${DELTA_BENCH_REV:-HEAD}"
build old 0.1.0
case " $changes " in *" new "*)
    build new 0.1.1 "sed -i 's/is damaged ({e}); downloading again/is damaged ({e}); fetching it again/' src/update/mod.rs" ;;
esac
case " $changes " in *" dep "*)
    build dep 0.1.1 "cargo update --quiet -p rustls-pki-types --precise 1.16.0"
    grep -q '^version = "1.16.0"' <(grep -A1 '^name = "rustls-pki-types"' "$work/dep/Cargo.lock") \
        || { echo "delta.sh: the dep build's Cargo.lock does not name rustls-pki-types 1.16.0" >&2; exit 1; } ;;
esac

# The device's side: `old`'s own dist agent (it is the one that applies the delta).
agent="$work/old/svc-agent"
if [ -n "${DELTA_BENCH_AGENT_REV:-}" ]; then
    rev="$DELTA_BENCH_AGENT_REV"
    build agent 0.1.0
    agent="$work/agent/svc-agent"
fi
tool="$root/target/debug/svc-release"
CARGO_TARGET_DIR="$root/target" cargo build --quiet --bin svc-release
echo "$arch svc-agent dist that applies: $(stat -c %s "$agent") B (ceiling 4194304)"
formats="${DELTA_BENCH_FORMATS:-svc-delta-v1 svc-delta-v2}"
for change in $changes; do
    for bin in svc-agent svc-server; do
        for format in $formats; do
            old="$work/old/$bin" new="$work/$change/$bin" patch="$work/$bin.$change.$format" res="$work/$bin.$change.result"
            t0=$(date +%s.%N)
            "$tool" delta --format "$format" "$old" "$new" "$patch" >/dev/null
            t1=$(date +%s.%N)
            rm -f "$res"
            /usr/bin/time -v "$agent" apply-delta "$old" "$patch" "$res" 2>"$work/$bin.$change.time" >/dev/null
            cmp "$new" "$res"
            full=$(stat -c %s "$new") delta=$(stat -c %s "$patch")
            rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$work/$bin.$change.time")
            wall=$(awk -F': ' '/Elapsed \(wall/ {print $2}' "$work/$bin.$change.time")
            printf '%s %s %s %s: full %d B, delta %d B (%.1f %%), make %.1f s, apply %s wall, peak RSS %s KiB\n' \
                "$arch" "$change" "$bin" "$format" "$full" "$delta" "$(echo "100*$delta/$full" | bc -l)" \
                "$(echo "$t1-$t0" | bc -l)" "$wall" "$rss"
        done
    done
done
