#!/usr/bin/env bash
# Build time and test time of the integration test binary (tests/it) before and after a
# change of the tests, side by side in one run: BASE's tests/it and benches/agent.rs are
# unpacked over the working tree, the binary rebuilt and the chosen tests run; then the same
# with HEAD's. The library and the binaries are the same for both (built first, untimed), so
# the build figure is the test binary's own compile and link.
#
#   bash benches/it-build.sh BASE [TEST FILTER...]
#
# Needs tests/it and benches committed (they are put back from HEAD at the end). Prints one
# markdown table row per tree. Test time is wall time on whatever else the machine is doing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2
[ $# -ge 1 ] || { echo "usage: $0 BASE [TEST FILTER...]" >&2; exit 2; }
base=$(git rev-parse --verify "$1^{commit}")
shift
head=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain -- tests/it benches)" ]; then
  echo "it-build: commit tests/it and benches first" >&2
  exit 2
fi
restore() {
  rm -rf tests/it
  git checkout -q "$head" -- tests/it benches/agent.rs
}
trap restore EXIT

cargo build -q --bins --lib
log=$(mktemp)
echo "| tree | test binary build | tests run (\`$*\`) |"
echo "|---|---|---|"
for ref in "$base" "$head"; do
  rm -rf tests/it
  # -m: the files get the time of unpacking, so that cargo sees them as changed.
  git archive "$ref" tests/it benches/agent.rs | tar -x -m
  t0=$(date +%s.%N)
  cargo test -q --test it --no-run >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  t1=$(date +%s.%N)
  result=PASS
  cargo test -q --test it -- "$@" >"$log" 2>&1 || result=FAIL
  t2=$(date +%s.%N)
  passed=$(grep -o '[0-9]* passed' "$log" | tail -n1)
  printf '| %s (%s) | %.0f s | %.0f s, %s, %s |\n' "$(git log -1 --format=%h "$ref")" \
    "$([ "$ref" = "$base" ] && echo before || echo after)" \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$passed" "$result"
  [ "$result" = PASS ] || tail -n 40 "$log" >&2
done
rm -f "$log"
