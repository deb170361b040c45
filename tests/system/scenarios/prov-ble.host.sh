#!/bin/bash
# Host side of prov-ble: the guest image has no Bluetooth stack, so the host hands it Debian's
# own bluez (bluetoothd, btmgmt, gatttool), bluez-test-tools (btvirt) and the two libraries
# bluez needs that the image lacks, as .deb files in /lab/share/debs (installed with dpkg in
# the guest). The image's recipe (and its cache key) stays as it is. The packages are fetched
# with apt-get download from the mirror apt uses on the host (bookworm, as the guest), once,
# into $LAB_CACHE/debs-bluez.
set -euo pipefail
. "$(dirname "$0")/../host-lib.sh"
pkgs=(bluez bluez-test-tools libasound2 libasound2-data libdw1)
cache="${LAB_CACHE:?}/debs-bluez"
if [ ! -f "$cache/complete" ]; then
    tmp="$(mktemp -d "${LAB_CACHE}/debs-bluez.XXXXXX")"
    chmod 755 "$tmp"
    (cd "$tmp" && apt-get download "${pkgs[@]}") >&2
    rm -rf "$cache"
    touch "$tmp/complete"
    mv "$tmp" "$cache" 2>/dev/null || rm -rf "$tmp"   # another run may have won the race
fi
mkdir -p "$LAB_SHARE/debs"
cp "$cache"/*.deb "$LAB_SHARE/debs/"
[ "$(ls "$LAB_SHARE/debs" | wc -l)" = "${#pkgs[@]}" ] || { echo "prov-ble: expected ${#pkgs[@]} packages" >&2; exit 1; }
