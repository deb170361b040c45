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
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --version 0.13.2
fi
export RUSTC_BOOTSTRAP=1
for target in $(cargo fuzz list); do
  seeds="fuzz/seeds/$target"
  corpus="fuzz/corpus/$target"
  mkdir -p "$corpus" "$seeds"
  echo "fuzzing $target for ${SECONDS_PER_TARGET}s"
  cargo fuzz run -s none "$target" "$corpus" "$seeds" -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 2>&1 | tail -3
done
