#!/usr/bin/env bash
# The machine lab's host prerequisites (qemu for amd64 and arm64 guests, qemu-user-static,
# mmdebstrap, e2fsprogs, ...), installed when missing, through scripts/lib/apt.sh (apt never removes a package here, and every tool is
# checked afterwards). qemu-utils is lined up with the qemu-system-x86 that apt installs,
# whichever suite the installed one came from: the stock image has qemu-utils from
# bookworm-backports, which conflicts with bookworm's qemu-system-common.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib/apt.sh
. "$root/scripts/lib/apt.sh"

apt_need qemu-system-x86_64 qemu-system-x86
# The arm64 machine (tests/system/run.sh, LAB_ARCH=arm64): qemu's `virt` board, and
# qemu-user-static with binfmt-support and mmdebstrap (which wants arch-test for a foreign
# root) to bootstrap its root (guest/build-image-arm64.sh).
apt_need qemu-system-aarch64 qemu-system-arm
apt_need qemu-aarch64-static qemu-user-static
apt_need update-binfmts binfmt-support
apt_need mmdebstrap mmdebstrap
apt_need arch-test arch-test
apt_need qemu-img qemu-utils
apt_need mke2fs e2fsprogs
apt_need debugfs e2fsprogs
# The lab's small initrd is cut from the image's (tests/system/guest/build-image.sh).
apt_need cpio cpio
apt_need flock util-linux
apt_need readelf binutils
apt_need python3 python3
# prov-ble fetches Home Assistant's Improv client as wheels from PyPI on the host with Debian's
# own python3 and pip (whatever python3 comes first on PATH).
apt_need_file /usr/bin/python3 python3
apt_need_file /usr/lib/python3/dist-packages/pip/__init__.py python3-pip
# The real-RAUC scenarios (os-rauc-*) make their bundles on the host (tests/system/rauc-lab.sh).
apt_need rauc rauc
apt_need mksquashfs squashfs-tools
apt_need resize2fs e2fsprogs
apt_need openssl openssl
# qemu's firmware for -kernel boots (SeaBIOS and the linuxboot option ROM).
apt_need_file /usr/share/seabios/bios-256k.bin seabios
apt_need_file /usr/share/qemu/linuxboot_dma.bin qemu-system-data

extra=()
case " $APT_QUEUE " in
*" qemu-system-x86 "* | *" qemu-system-arm "*)
    # qemu-system-x86 comes from apt's candidate suite; qemu-utils must be the same build.
    want="$(apt_candidate qemu-system-x86 || true)"
    if [ -z "$want" ]; then
        apt-get update >&2 || true
        want="$(apt_candidate qemu-system-x86 || true)"
    fi
    [ -n "$want" ] || { echo "lab-prereqs: no qemu-system-x86 in apt" >&2; exit 1; }
    have="$(dpkg-query -W -f '${Version}' qemu-utils 2>/dev/null || true)"
    if [ "$have" != "$want" ]; then
        echo "lab-prereqs: lining qemu-utils ${have:-(none)} up with qemu-system-x86 $want" >&2
        extra=(--allow-downgrades "qemu-utils=$want")
    fi
    ;;
esac
apt_install_needed "${extra[@]}"

# arm64 programs run here through qemu-user-static's binfmt handler (the arm64 image's
# mmdebstrap, and `svc-agent version --json` of the aarch64 build). Its fix-binary flag
# (Debian's default for qemu-user-static) opens the handler now, so a chroot needs no copy.
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/register" ]; then
    mount -t binfmt_misc binfmt_misc "$binfmt" || { echo "lab-prereqs: cannot mount $binfmt" >&2; exit 1; }
fi
if ! grep -qsx enabled "$binfmt/qemu-aarch64"; then
    update-binfmts --import qemu-aarch64 >&2 || true
    update-binfmts --enable qemu-aarch64 >&2 || true
fi
grep -qsx enabled "$binfmt/qemu-aarch64" && grep -qs '^flags:.*F' "$binfmt/qemu-aarch64" \
    || { echo "lab-prereqs: no fix-binary qemu-aarch64 binfmt handler in $binfmt" >&2; exit 1; }

# gooseBit, for os-rauc-good's hawkBit phase (tests/system/scenarios/os-rauc-good.final.sh):
# the pinned venv the cargo tier uses (scripts/lib/goosebit.sh; made once, python3-venv from
# apt when the stock python3 cannot make one). The hook reads it from the same place.
bash "$root/scripts/lib/goosebit.sh" install "${XDG_CACHE_HOME:-$HOME/.cache}/svc-agent-tests/goosebit"
