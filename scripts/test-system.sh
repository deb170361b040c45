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

apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2
}

# ensure COMMAND PACKAGE...: install PACKAGE... unless COMMAND is already there.
missing=()
ensure() {
    local cmd="$1"; shift
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$@")
}
ensure qemu-system-x86_64 qemu-system-x86
ensure qemu-img qemu-utils
ensure debootstrap debootstrap
ensure mke2fs e2fsprogs
ensure debugfs e2fsprogs
ensure flock util-linux
ensure readelf binutils
# qemu's firmware for -kernel boots (SeaBIOS and the linuxboot option ROM).
[ -f /usr/share/seabios/bios-256k.bin ] || missing+=(seabios)
[ -f /usr/share/qemu/linuxboot_dma.bin ] || missing+=(qemu-system-data)
if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get"
    log "installing ${missing[*]}"
    if ! apt_install "${missing[@]}"; then
        apt-get update >&2 || die "apt-get update failed"
        if ! apt_install "${missing[@]}"; then
            # A newer qemu-utils from elsewhere (e.g. backports) Breaks the distribution's
            # qemu-system-common; line qemu-utils up with the qemu-system-x86 we install.
            v="$(apt-cache policy qemu-system-x86 | sed -n 's/^ *Candidate: *//p')"
            [ -n "$v" ] && [ "$v" != "(none)" ] || die "no qemu-system-x86 candidate in apt"
            log "retrying with qemu-utils=$v (matching qemu-system-x86)"
            apt_install --allow-downgrades "${missing[@]}" "qemu-utils=$v" \
                || die "apt-get install ${missing[*]} failed"
        fi
    fi
fi
for c in qemu-system-x86_64 qemu-img debootstrap mke2fs debugfs flock readelf; do
    command -v "$c" >/dev/null || die "$c still missing after installing prerequisites"
done
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
