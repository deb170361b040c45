#!/usr/bin/env bash
# The whole test suite, on a fresh Debian 12 machine with rustup: every tier installs what
# it needs. Prints each tier's output and one PASS/FAIL line per tier (wall and CPU seconds),
# then a closing "tiers: N passed, M failed".
#
# The stock tier runs first and alone (it removes and reinstalls qemu), then the others one
# after another in the order below. TEST_LANES=3 runs them in three lanes instead: one
# lane's tiers one after another, the lanes side by side, since no tier keeps the machine's
# cores busy on its own (tests wait on processes, guests and servers; a crate compiles
# alone at the end of every build). A lane's tiers share a build folder (lint →
# unit+integration → demo share target/debug); the static builds of the system and
# packaging tiers take turns (scripts/build-static.sh's lock). With lanes, a tier's output
# is printed whole when it ends (they would interleave it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# The toolchain pin first: a machine without Rust X.Y.Z (rust-toolchain.toml) stops here with
# one clear error instead of every cargo tier failing (or trying a download).
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2

declare -A script=(
  [stock]="scripts/check-stock-image.sh"
  [lint]="scripts/test-lint.sh"
  [unit+integration]="scripts/test-cargo.sh"
  [demo]="scripts/demo.sh --check"
  [fuzz]="scripts/fuzz.sh"
  [packaging]="scripts/check-packaging.sh"
  [ecosystems]="scripts/check-ecosystems.sh"
  [system]="scripts/test-system.sh"
)
order=(stock lint unit+integration demo fuzz packaging ecosystems system)
# The system tier alone in a lane, started first: its guests are most of the run, and
# they leave a core idle often enough for the compiling tiers beside them (it makes its
# own static builds; scripts/build-static.sh lets one build at a time into target/).
lanes=(
  "system"
  "lint unit+integration demo packaging"
  "fuzz ecosystems"
)
# One lane unless TEST_LANES=3: the lanes' figures (BENCHMARKS.md, "What a full test run
# costs", session 9) are not yet a whole passing run of this layout.
case "${TEST_LANES:-1}" in
  1) lanes=("${order[*]:1}") ;;
  3) ;;
  *) echo "TEST_LANES is 1 (one tier after another) or 3 (three lanes), not '$TEST_LANES'" >&2; exit 2 ;;
esac

out=$(mktemp -d /tmp/svc-tiers.XXXXXX)
trap 'rm -rf "$out"' EXIT

# CPU seconds (user + system) of the processes a tier ran and waited for: this shell's
# cutime + cstime from /proc, read before and after. The wall time alone hides whether a
# tier is compute-bound on the machine's cores or waits (guests, sleeps, the network).
tick=$(getconf CLK_TCK 2>/dev/null || echo 100)
# children_cpu PID: in clock ticks (PID: the shell itself, $BASHPID read outside `$(...)`).
children_cpu() {
  local stat
  read -r stat </proc/"$1"/stat
  stat=${stat##*) }
  # shellcheck disable=SC2086 # split the fields after the command name
  set -- $stat
  echo $(( ${14} + ${15} ))
}

# run_tier NAME: runs the tier and prints its result line, and keeps the line. In one lane
# its output goes out as it comes; with lanes into a file, printed whole when the tier ends
# (under a lock: one tier at a time).
run_tier() {
  local name=$1 me=$BASHPID start cpu0 result line
  echo "=== tier $name started (${script[$name]})"
  start=$(date +%s) cpu0=$(children_cpu "$me")
  # One lane prints as it goes; lanes print a tier's output once it ends.
  local log=""
  [ "${#lanes[@]}" = 1 ] || log=$out/$name.log
  # shellcheck disable=SC2086 # an entry may carry arguments
  if if [ -z "$log" ]; then bash ${script[$name]} 2>&1; else bash ${script[$name]} >"$log" 2>&1; fi; then
    result=PASS
  else
    result=FAIL
  fi
  line="$result $name ($(( $(date +%s) - start )) s, $(( ($(children_cpu "$me") - cpu0) / tick )) CPU s)"
  {
    flock 8
    if [ -n "$log" ]; then
      echo "=== tier $name (${script[$name]})"
      cat "$log"
    fi
    echo "=== $line"
  } 8>"$out/.print"
  echo "$line" >"$out/$name.result"
}

# The system tier's guest images (mmdebstrap: mostly downloads and unpacking) are built in the
# background while the compiling tiers run, once the stock tier has put qemu's packages back:
# the lab's prerequisites first (apt, before any lane's apt), then the image. The system
# tier's own build-image.sh waits for it on the cache's lock, finds it ready, or builds it
# itself (and reports why) if this one failed.
image_log="" image_pid=""
start_lab_image() {
  [ "${LAB_IMAGE_EARLY:-1}" != 0 ] && [ "$(id -u)" = 0 ] && [ "$(uname -m)" = x86_64 ] || return 0
  image_log=$(mktemp /tmp/svc-lab-image.XXXXXX.log)
  echo "=== the lab's guest image builds in the background (log: $image_log)"
  if bash scripts/lab-prereqs.sh >"$image_log" 2>&1; then
    # Then the arm64 machine's (issue 42; its own recipe, much of it under qemu-user).
    { bash tests/system/guest/build-image.sh && bash tests/system/guest/build-image-arm64.sh; } >>"$image_log" 2>&1 &
    image_pid=$!
  else
    echo "=== the lab's prerequisites failed here; the system tier installs them again and says why"
  fi
}

began=$(date +%s)
run_tier stock
start_lab_image
pids=()
first=1
for lane in "${lanes[@]}"; do
  # The first lane is the run's critical path: the others run at a lower priority, so they
  # take the cores its guests leave idle instead of slowing it (measured: at equal priority
  # the system tier's own static build took three times as long beside two compiling lanes).
  # shellcheck disable=SC2086 # a lane is a word list of tier names
  (
    [ "$first" = 1 ] || renice -n 10 -p "$BASHPID" >/dev/null
    for name in $lane; do run_tier "$name"; done
  ) &
  pids+=($!)
  first=0
done
for pid in "${pids[@]}"; do wait "$pid"; done
if [ -n "$image_pid" ] && ! wait "$image_pid"; then
  echo "=== the background image build failed (the system tier built it itself):"
  tail -n 20 "$image_log"
fi
[ -z "$image_log" ] || rm -f "$image_log"

passed=0 failed=0
echo
for name in "${order[@]}"; do
  if [ -f "$out/$name.result" ]; then
    line=$(cat "$out/$name.result")
  else
    line="FAIL $name (did not run)"
  fi
  echo "$line"
  case $line in PASS*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
done
echo "whole run: $(( $(date +%s) - began )) s, ${#lanes[@]} lane(s)"
echo "tiers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
