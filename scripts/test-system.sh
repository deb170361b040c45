#!/usr/bin/env bash
# The system test tier: real systemd, journald, NetworkManager and Wi-Fi stack in a qemu
# guest (see docs/lab.md).
#
#   scripts/test-system.sh [SCENARIO...]
#
# Installs the host prerequisites when missing (idempotent), builds the static x86_64
# binaries, builds or reuses the cached guest image, runs the scenarios (all by default) and
# exits non-zero on any failure. A prerequisite that cannot be had fails the run loudly.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
log() { echo "test-system: $*" >&2; }
die() { echo "test-system: ERROR: $*" >&2; echo "system: 0 passed, 1 failed"; exit 1; }
t0=$SECONDS

[ "$(id -u)" = 0 ] || die "must run as root (apt, debootstrap, chroot)"
[ "$(uname -m)" = x86_64 ] || die "the lab host must be x86_64 (the guest is amd64 under TCG)"

"$root/scripts/lab-prereqs.sh" || die "the lab's host prerequisites could not be installed (see above)"
log "prerequisites ready ($((SECONDS - t0)) s)"

t1=$SECONDS
mapfile -t built < <("$root/scripts/build-static.sh" x86_64 --profile dist)
[ ${#built[@]} -eq 2 ] || die "scripts/build-static.sh x86_64 failed"
log "static binaries ready ($((SECONDS - t1)) s): ${built[*]}"

t2=$SECONDS
image="$("$root/tests/system/guest/build-image.sh")" || die "guest image build failed"
log "guest image ready ($((SECONDS - t2)) s): $image"

rc=0
LAB_AGENT="${built[0]}" LAB_SERVER="${built[1]}" "$root/tests/system/run.sh" "$@" || rc=$?
log "total $((SECONDS - t0)) s"
exit "$rc"
