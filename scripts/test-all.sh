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

# The system tier's guest image (debootstrap: mostly downloads and unpacking) is built in the
# background while the compiling tiers run, once the stock tier has put qemu's packages back:
# the lab's prerequisites first (apt, before any other tier's apt), then the image. The system
# tier's own build-image.sh waits for it on the cache's lock, finds it ready, or builds it
# itself (and reports why) if this one failed.
image_log="" image_pid=""
start_lab_image() {
  [ "${LAB_IMAGE_EARLY:-1}" != 0 ] && [ "$(id -u)" = 0 ] && [ "$(uname -m)" = x86_64 ] || return 0
  image_log=$(mktemp /tmp/svc-lab-image.XXXXXX.log)
  echo "=== the lab's guest image builds in the background (log: $image_log)"
  if bash scripts/lab-prereqs.sh >"$image_log" 2>&1; then
    bash tests/system/guest/build-image.sh >>"$image_log" 2>&1 &
    image_pid=$!
  else
    echo "=== the lab's prerequisites failed here; the system tier installs them again and says why"
  fi
}

# CPU seconds (user + system) of the processes a tier ran and waited for: this shell's
# cutime + cstime from /proc, read before and after. The wall time alone hides whether a
# tier is compute-bound on the machine's cores or waits (guests, sleeps, the network).
tick=$(getconf CLK_TCK 2>/dev/null || echo 100)
children_cpu() {
  local stat
  read -r stat </proc/$$/stat
  stat=${stat##*) }
  # shellcheck disable=SC2086 # split the fields after the command name
  set -- $stat
  echo $(( ${14} + ${15} ))
}

passed=0 failed=0 summary=""
for entry in "${tiers[@]}"; do
  name=${entry%%:*} script=${entry#*:}
  [ "$name" = lint ] && start_lab_image
  echo "=== tier $name ($script)"
  start=$(date +%s) cpu_start=$(children_cpu)
  # shellcheck disable=SC2086 # an entry may carry arguments
  if bash $script; then
    result=PASS passed=$((passed + 1))
  else
    result=FAIL failed=$((failed + 1))
  fi
  line="$result $name ($(( $(date +%s) - start )) s, $(( ($(children_cpu) - cpu_start) / tick )) CPU s)"
  echo "=== $line"
  summary="$summary$line"$'\n'
done
if [ -n "$image_pid" ] && ! wait "$image_pid"; then
  echo "=== the background image build failed (the system tier built it itself):"
  tail -n 20 "$image_log"
fi
[ -z "$image_log" ] || rm -f "$image_log"
echo
printf '%s' "$summary"
echo "tiers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
