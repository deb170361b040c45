#!/bin/bash
# Host side of prov-ble: the guest image has no Bluetooth stack, so the host hands it Debian's
# own bluez (bluetoothd, btmgmt, gatttool), bluez-test-tools (btvirt) and the two libraries
# bluez needs that the image lacks. The image's recipe (and its cache key) stays as it is. The
# packages are fetched with apt-get download from the mirror apt uses on the host (bookworm, as
# the guest), once, into $LAB_CACHE/debs-bluez.
# They reach the guest unpacked, as /lab/share/bluez.tar (host_debs_tar: every file of the five
# packages at the path dpkg installs it to, the conffiles, bluetoothd's D-Bus policy among
# them, in place, not as dpkg --unpack's `.dpkg-new`). The guest extracts it and does what
# bluez's maintainer scripts do that the scenario needs (the `bluetooth` group, /var/lib/bluetooth
# 0700, ldconfig, one D-Bus reload): `dpkg -i` took 36-60 s of the guest under TCG, mostly its
# maintainer scripts (twenty dpkg-maintscript-helper runs, addgroup, update-rc.d and
# deb-systemd-helper in Perl, a daemon-reload) for conffile moves from 2009 and init scripts.
# Home Assistant's Improv client (#45): py-improv-ble-client with bleak and what they need, as
# wheels for the guest's CPython 3.11 on x86_64, unpacked into /lab/share/improv-client (the
# guest has no pip, and PyPI is reachable from the host only). Pinned by version
# and hash (pip refuses anything else), fetched once into $LAB_CACHE/wheels-improv.
# py-improv-ble-client 2.0.1 declares no dependencies in its metadata, so the whole set is
# named here (pip's own resolution of bleak and bleak-retry-connector on 2026-11-27).
set -euo pipefail
. "$(dirname "$0")/../host-lib.sh"
pkgs=(bluez bluez-test-tools libasound2 libasound2-data libdw1)
cache="${LAB_CACHE:?}/debs-bluez"
fetch() { (cd "$1" && apt-get download "${pkgs[@]}") >&2; }
host_cache_once "$cache" fetch
[ "$(ls "$cache"/*.deb | wc -l)" = "${#pkgs[@]}" ] || { echo "prov-ble: expected ${#pkgs[@]} packages" >&2; exit 1; }
host_debs_tar "$LAB_SHARE/bluez.tar" "$cache"/*.deb

wheels=(
    "py-improv-ble-client==2.0.1 --hash=sha256:179e9ba910332d125b19c2463c670d58b66e4d2ec6805d2d4a183d3c775b3fcb"
    "bleak==3.1.0 --hash=sha256:3cb08e03039f6e477c276252540416b287d4e3de63a86732780ff93a2f6e73ef"
    "bleak-retry-connector==4.7.1 --hash=sha256:75b4cb3f69955123121d860348d2c43da638a0f3211f2cb6197d717edbd6f47f"
    "bluetooth-adapters==2.4.0 --hash=sha256:f2841c49e8750658ecb8c1d46d2c05a9de4740362eb83e3e7e501d3092c0377e"
    "dbus-fast==5.2.0 --hash=sha256:4944cb6cf92af103b4127e3935f138a8852b8268444ed8bf7975c507cad45c8a"
    "typing-extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8"
    "aiooui==0.1.11 --hash=sha256:531e808bba926d80213413202243754a125a100b3e7912dadb3cd3f921e1665d"
    "uart-devices==0.1.1 --hash=sha256:55bc8cce66465e90b298f0910e5c496bc7be021341c5455954cf61c6253dc123"
    "usb-devices==0.5.1 --hash=sha256:e77e7972b5ac6a883b3778b0273d9582c5b8ae847ac78fba3d080dd4a4cc69ad"
)
fetch_wheels() {
    printf '%s\n' "${wheels[@]}" > "$1/requirements.txt"
    /usr/bin/python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
        --implementation cp --python-version 3.11 --abi cp311 --abi abi3 --abi none \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -r "$1/requirements.txt" -d "$1" >&2
}
wcache="$LAB_CACHE/wheels-improv"
host_cache_once "$wcache" fetch_wheels
[ "$(ls "$wcache"/*.whl | wc -l)" = "${#wheels[@]}" ] || { echo "prov-ble: expected ${#wheels[@]} wheels" >&2; exit 1; }
# Unpacked here, not in the guest: nine python3 starts under TCG took ~20 s of guest time
# each run. A wheel is a zip of the installed files; the guest imports them from this folder.
mkdir -p "$LAB_SHARE/improv-client"
for w in "$wcache"/*.whl; do
    /usr/bin/python3 -m zipfile -e "$w" "$LAB_SHARE/improv-client"
done
