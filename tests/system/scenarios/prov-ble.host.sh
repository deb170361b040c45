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
fetch() { (cd "$1" && apt-get download "${pkgs[@]}") >&2; }
host_cache_once "$cache" fetch
mkdir -p "$LAB_SHARE/debs"
cp "$cache"/*.deb "$LAB_SHARE/debs/"
[ "$(ls "$LAB_SHARE/debs" | wc -l)" = "${#pkgs[@]}" ] || { echo "prov-ble: expected ${#pkgs[@]} packages" >&2; exit 1; }
