#!/usr/bin/env bash
# Runs test tiers again and again beside a CPU hog that keeps every core busy: a test that
# races, or sleeps and hopes, fails here (BENCHMARKS.md, "Tests under load").
#
#   scripts/stress-tests.sh [--runs N] [--tier NAME] [--hog N] [--ci]
#
#   --runs N   how many runs in a row (default 10)
#   --tier T   the tier of scripts/test-all.sh to run (default unit+integration; `system`
#              is the VM lab)
#   --hog N    stress-ng CPU workers (default: twice the cores)
#   --ci       instead of a tier: one whole `CI=true bash .ci/run` on a clean clone of HEAD,
#              with ../shared beside it as CI has it
#
# Every run is counted; one line per run (PASS/FAIL, seconds, load average, the path of its
# output), then "stress: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
here=$PWD

runs=10 tier=unit+integration hog=$(( $(nproc) * 2 )) ci=0
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --tier) tier=$2; shift 2 ;;
    --hog) hog=$2; shift 2 ;;
    --ci) ci=1; shift ;;
    *) echo "usage: $0 [--runs N] [--tier NAME] [--hog N] [--ci]" >&2; exit 2 ;;
  esac
done
case $runs$hog in *[!0-9]*) echo "--runs and --hog take whole numbers" >&2; exit 2 ;; esac

declare -A script=(
  [unit+integration]="scripts/test-cargo.sh"
  [system]="scripts/test-system.sh"
  [demo]="scripts/demo.sh --check"
  [lint]="scripts/test-lint.sh"
)
if [ "$ci" = 0 ] && [ -z "${script[$tier]:-}" ]; then
  echo "unknown tier '$tier' (one of: ${!script[*]})" >&2
  exit 2
fi

# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh
apt_need stress-ng stress-ng
apt_install_needed || exit 2

logs=$(mktemp -d /tmp/svc-stress.XXXXXX)
stress-ng --cpu "$hog" --timeout 0 --quiet &
hog_pid=$!
# The hog goes with this script however it ends.
trap 'kill "$hog_pid" 2>/dev/null; wait "$hog_pid" 2>/dev/null' EXIT
echo "stress: $hog CPU workers (stress-ng pid $hog_pid) on $(nproc) cores; logs in $logs"

# one_run N: runs what was asked once, its output into the run's log.
one_run() {
  local log=$logs/run-$1.log
  if [ "$ci" = 1 ]; then
    local clone
    clone=$(mktemp -d /tmp/svc-stress-clone.XXXXXX)
    # Readable by all, as a CI clone is: the ecosystems tier runs BitBake as another user.
    chmod 755 "$clone"
    git clone -q "$here" "$clone/main" && cp -a "$here/../shared" "$clone/shared" &&
      chmod -R a-w "$clone/shared" &&
      (cd "$clone/main" && CI=true bash .ci/run </dev/null) >"$log" 2>&1
    local rc=$?
    chmod -R u+w "$clone" 2>/dev/null
    rm -rf "$clone"
    return $rc
  fi
  # shellcheck disable=SC2086 # an entry may carry arguments
  CI=true bash ${script[$tier]} >"$log" 2>&1
}

passed=0 failed=0
for n in $(seq 1 "$runs"); do
  start=$(date +%s)
  # Every run's output is kept: a passing run's figures (per-scenario walls) are wanted too.
  if one_run "$n"; then
    result="PASS (output: $logs/run-$n.log)" passed=$((passed + 1))
  else
    result="FAIL (output: $logs/run-$n.log)" failed=$((failed + 1))
  fi
  echo "run $n: $result, $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "stress: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
