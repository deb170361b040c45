#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo fuzz, libFuzzer) of every fuzz target for a bounded time.
# cargo-fuzz needs nightly-only flags; RUSTC_BOOTSTRAP lets the stable toolchain take them,
# and no sanitizer is used (stable has none), so this looks for panics and hangs.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2
# 30 s a target in the test command (a longer campaign: FUZZ_SECONDS=600 scripts/fuzz.sh).
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}
# A libFuzzer run uses one core: one target per core at a time (FUZZ_JOBS to change it).
JOBS=${FUZZ_JOBS:-$(nproc)}
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --version 0.13.2
fi
export RUSTC_BOOTSTRAP=1
# Every target in one cargo invocation (its compile runs on every core), then the runs.
cargo fuzz build -s none
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# fuzz_one TARGET: one bounded run; its output goes to a log, its status to TARGET.rc.
fuzz_one() {
  local target=$1 seeds="fuzz/seeds/$1" corpus="fuzz/corpus/$1" rc=0
  mkdir -p "$corpus" "$seeds"
  cargo fuzz run -s none "$target" "$corpus" "$seeds" -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 >"$logs/$target.log" 2>&1 || rc=$?
  echo "$rc" >"$logs/$target.rc"
}
mapfile -t targets < <(cargo fuzz list)
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
