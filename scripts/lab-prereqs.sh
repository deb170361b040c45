#!/usr/bin/env bash
# The machine lab's host prerequisites (qemu, debootstrap, e2fsprogs, ...), installed when
# missing, through scripts/lib/apt.sh (apt never removes a package here, and every tool is
# checked afterwards). qemu-utils is lined up with the qemu-system-x86 that apt installs,
# whichever suite the installed one came from: the stock image has qemu-utils from
# bookworm-backports, which conflicts with bookworm's qemu-system-common.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib/apt.sh
. "$root/scripts/lib/apt.sh"

apt_need qemu-system-x86_64 qemu-system-x86
apt_need qemu-img qemu-utils
apt_need debootstrap debootstrap
apt_need mke2fs e2fsprogs
apt_need debugfs e2fsprogs
# The lab's small initrd is cut from the image's (tests/system/guest/build-image.sh).
apt_need cpio cpio
apt_need flock util-linux
apt_need readelf binutils
apt_need python3 python3
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
*" qemu-system-x86 "*)
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
