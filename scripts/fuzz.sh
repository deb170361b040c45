#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer, through the libfuzzer-sys crate) of every fuzz target
# for a bounded time. The build is cargo-fuzz's (`cargo fuzz build -s none`) made by cargo
# itself: the same instrumentation flags on every crate of the target, the host's triple as
# the target (so build scripts and proc macros stay uninstrumented), release with line
# tables. A clean machine then needs no cargo-fuzz (its install was 33 s of the tier:
# BENCHMARKS.md, session 11). No sanitizer (stable has none): this looks for panics and
# hangs. With cargo-fuzz installed, `cd fuzz && cargo fuzz run -s none TARGET` is the same
# build, for a campaign by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2
# 30 s a target in the test command (a longer campaign: FUZZ_SECONDS=600 scripts/fuzz.sh).
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}
# A libFuzzer run uses one core: one target per core at a time (FUZZ_JOBS to change it).
JOBS=${FUZZ_JOBS:-$(nproc)}
host=$(rustc -vV | sed -n 's/^host: //p')
mapfile -t targets < <(sed -n 's#^path = "fuzz_targets/\(.*\)\.rs"#\1#p' fuzz/Cargo.toml)
[ "${#targets[@]}" -gt 0 ] || { echo "fuzz: no [[bin]] targets in fuzz/Cargo.toml"; exit 1; }
# Every target in one cargo invocation (its compile runs on every core), then the runs.
(cd fuzz && RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares" \
  cargo build --locked --release --target "$host" --bins --config 'profile.release.debug="line-tables-only"')
# `scripts/fuzz.sh --build`: the build alone (benches/build-costs.sh fuzz times it).
[ "${1:-}" != --build ] || exit 0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# fuzz_one TARGET: one bounded run; its output goes to a log, its status to TARGET.rc.
fuzz_one() {
  local target=$1 seeds="fuzz/seeds/$1" corpus="fuzz/corpus/$1" rc=0
  mkdir -p "$corpus" "$seeds" "fuzz/artifacts/$target"
  "fuzz/target/$host/release/$target" -artifact_prefix="fuzz/artifacts/$target/" \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 \
    "$corpus" "$seeds" >"$logs/$target.log" 2>&1 || rc=$?
  echo "$rc" >"$logs/$target.rc"
}
running=0
for target in "${targets[@]}"; do
  echo "fuzzing $target for ${SECONDS_PER_TARGET}s"
  fuzz_one "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n || true; running=$((running - 1)); fi
done
wait
failed=0
for target in "${targets[@]}"; do
  echo "--- $target"
  tail -n 3 "$logs/$target.log"
  rc=$(cat "$logs/$target.rc" 2>/dev/null || echo missing)
  if [ "$rc" != 0 ]; then
    echo "fuzz: $target FAILED (status $rc); its output:"
    tail -n 40 "$logs/$target.log"
    failed=$((failed + 1))
  fi
done
[ "$failed" -eq 0 ] || { echo "fuzz: $failed of ${#targets[@]} targets failed"; exit 1; }
echo "fuzz: ${#targets[@]} targets, $JOBS at a time, ${SECONDS_PER_TARGET}s each: no crash, no hang"
