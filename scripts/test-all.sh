#!/usr/bin/env bash
# The whole test suite, on a fresh Debian 12 machine with rustup: every tier installs what
# it needs. Prints one PASS/FAIL line per tier and a closing "tiers: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# The toolchain pin first: a machine without Rust X.Y.Z (rust-toolchain.toml) stops here with
# one clear error instead of every cargo tier failing (or trying a download).
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2

tiers=(
  "stock:scripts/check-stock-image.sh"
  "lint:scripts/test-lint.sh"
  "unit+integration:scripts/test-cargo.sh"
  "demo:scripts/demo.sh --check"
  "fuzz:scripts/fuzz.sh"
  "packaging:scripts/check-packaging.sh"
  "ecosystems:scripts/check-ecosystems.sh"
  "system:scripts/test-system.sh"
)

passed=0 failed=0 summary=""
for entry in "${tiers[@]}"; do
  name=${entry%%:*} script=${entry#*:}
  echo "=== tier $name ($script)"
  start=$(date +%s)
  # shellcheck disable=SC2086 # an entry may carry arguments
  if bash $script; then
    result=PASS passed=$((passed + 1))
  else
    result=FAIL failed=$((failed + 1))
  fi
  line="$result $name ($(( $(date +%s) - start )) s)"
  echo "=== $line"
  summary="$summary$line"$'\n'
done
echo
printf '%s' "$summary"
echo "tiers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
