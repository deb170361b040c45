#!/usr/bin/env bash
# Unit and integration tests: real processes, real HTTPS on loopback with a test CA, and the
# same management app behind Debian's nginx (tests/it/common/nginx.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2
# Host tools some tests run against what the agent writes (apt-config, systemd-analyze).
bash scripts/syscfg-test-deps.sh
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh
# nginx in front of the test app; python3 for the plain HTTP/1.1 keep-alive backend. The
# tests fail (not skip) without nginx when CI=true, so this run sets it.
apt_need_file /usr/sbin/nginx nginx
apt_need python3 python3
# iptables: dropped_flow drops a held poll's flow (no reset) in a network namespace of its own.
apt_need_file /usr/sbin/iptables iptables
# rauc, openssl and unsquashfs: the hawkBit OS tests make a real RAUC bundle for gooseBit
# (tests/it/hawkbit_goosebit.rs) and the RAUC stand-in reads its manifest (tests/it/os_rauc.rs).
apt_need_file /usr/bin/rauc rauc
apt_need_file /usr/bin/openssl openssl
apt_need_file /usr/bin/unsquashfs squashfs-tools
# Python's cryptography (OpenSSL's ed25519): the independent check of svc-release's
# signatures (tests/it/release_tool.rs); that test fails without it under CI=true.
if ! python3 -c 'import cryptography' 2>/dev/null && ! /usr/bin/python3 -c 'import cryptography' 2>/dev/null; then
    APT_QUEUE="$APT_QUEUE python3-cryptography"
fi
apt_install_needed
# gooseBit, the DDI server the hawkBit backend is tested against (tests/it/hawkbit_goosebit.rs),
# in a venv of its own under the user's cache (made once; the test fails without it under CI).
GOOSEBIT_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/svc-agent-tests/goosebit"
bash scripts/lib/goosebit.sh install "$GOOSEBIT_DIR"
export GOOSEBIT_VENV="$GOOSEBIT_DIR/venv"
export CI="${CI:-true}"
cargo build --locked --all-targets
# Benches are built above, not run: they are measurements (cargo bench --bench NAME).
# Sixteen at a time on two cores: the tests wait on real processes, servers and their
# timers most of the time, and none asserts a time. The integration binary took 128 s at 4
# threads, 68 s at 8, 40-46 s at 16 and 50 s at 32, with the same ~60 CPU s each
# (BENCHMARKS.md, session 11).
# The library tests run beside the integration tests (both wait on timers and processes far
# more than they compute): their output goes to a file, printed whole after the integration
# tests' (so the two never interleave), and a failure of either fails the tier.
unit_log=$(mktemp)
list=$(mktemp) && trap 'rm -f "$list" "$unit_log"' EXIT
cargo test --locked --lib --bins --no-run
cargo test --locked --lib --bins -- --test-threads=16 >"$unit_log" 2>&1 &
unit_pid=$!
# The integration tests, with those a bare `cargo test` leaves out because they need what this
# script installed (`#[ignore = "needs ..."]`: nginx, gooseBit, root); only child processes
# and measurements stay out, by exact name (scripts/lib/ignored-tests.py checks every reason).
cargo test --locked --test it -- --list --ignored >"$list"
names=$(python3 scripts/lib/ignored-tests.py "$list" tests/it src)
skip=()
for name in $names; do skip+=(--skip "$name"); done
it_rc=0
cargo test --locked --test it -- --include-ignored --exact "${skip[@]}" --test-threads=16 || it_rc=$?
unit_rc=0
wait "$unit_pid" || unit_rc=$?
echo "--- the library tests (run beside the integration tests above)"
cat "$unit_log"
[ "$unit_rc" -eq 0 ] || echo "test-cargo: the library tests FAILED (status $unit_rc)"
[ "$it_rc" -eq 0 ] || echo "test-cargo: the integration tests FAILED (status $it_rc)"
[ "$unit_rc" -eq 0 ] && [ "$it_rc" -eq 0 ]
