#!/usr/bin/env bash
# Binary deltas on the project's own consecutive releases (issue 44): two `dist` builds of
# svc-agent and svc-server that differ by a small code change (one log message's text), then
# `svc-release delta` between them: delta bytes against the full artifact, and the device's
# apply time and peak memory (`svc-agent apply-delta`, /usr/bin/time -v). Prints one line per
# binary; the figures go to BENCHMARKS.md, "Binary deltas".
#
#   benches/delta.sh [x86_64|aarch64]     default x86_64
#
# The two source trees are `git archive HEAD` copies under target/delta-bench/ (the work tree is
# not touched); both build into this tree's target folder, so only svc's own units are compiled
# twice. Needs the dist prerequisites of scripts/build-static.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-x86_64}"
root="$PWD"
work="$root/target/delta-bench/$arch"
mkdir -p "$work"
export CARGO_TARGET_DIR="$root/target"
out="$CARGO_TARGET_DIR/$arch-unknown-linux-musl/dist"

build() { # build NAME SED-EXPR: a copy of HEAD, changed by SED-EXPR in src/update/mod.rs
    local name="$1" change="$2" src="$work/src-$1"
    # Built once (9 min each on two busy cores); DELTA_BENCH_REBUILD=1 builds them again.
    if [ -x "$work/$name/svc-agent" ] && [ -z "${DELTA_BENCH_REBUILD:-}" ]; then
        return 0
    fi
    rm -rf "$src" && mkdir -p "$src" "$work/$name"
    git archive HEAD | tar -x -C "$src"
    [ -z "$change" ] || sed -i "$change" "$src/src/update/mod.rs"
    # The release stamp's version differs too, as between two real releases.
    (cd "$src" && SVC_BUILD_VERSION="$3" bash scripts/build-static.sh "$arch" --profile dist >/dev/null)
    cp "$out/svc-agent" "$out/svc-server" "$work/$name/"
    git rev-parse HEAD >"$work/$name/.head"
}
build old "" 0.1.0
build new 's/is damaged ({e}); downloading again/is damaged ({e}); fetching it again/' 0.1.1

# The device's side: this tree's own dist agent (its size is the one with delta support).
agent="$(scripts/build-static.sh "$arch" --profile dist | grep '/svc-agent$')"
tool="$CARGO_TARGET_DIR/debug/svc-release"
cargo build --quiet --bin svc-release
echo "$arch svc-agent dist with delta support: $(stat -c %s "$agent") B (ceiling 4194304)"
for bin in svc-agent svc-server; do
    old="$work/old/$bin" new="$work/new/$bin" patch="$work/$bin.delta" res="$work/$bin.result"
    t0=$(date +%s.%N)
    "$tool" delta "$old" "$new" "$patch" >/dev/null
    t1=$(date +%s.%N)
    /usr/bin/time -v "$agent" apply-delta "$old" "$patch" "$res" 2>"$work/$bin.time" >/dev/null
    cmp "$new" "$res"
    full=$(stat -c %s "$new") delta=$(stat -c %s "$patch")
    rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$work/$bin.time")
    wall=$(awk -F': ' '/Elapsed \(wall/ {print $2}' "$work/$bin.time")
    printf '%s %s: full %d B, delta %d B (%.1f %%), make %.1f s, apply %s wall, peak RSS %s KiB\n' \
        "$arch" "$bin" "$full" "$delta" "$(echo "100*$delta/$full" | bc -l)" \
        "$(echo "$t1-$t0" | bc -l)" "$wall" "$rss"
done
