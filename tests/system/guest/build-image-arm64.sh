#!/usr/bin/env bash
# The machine lab's arm64 guest image: Debian bookworm arm64 from Debian's own packages, with
# systemd as PID 1, journald, NetworkManager, the Debian arm64 kernel and the lab runner unit,
# for qemu-system-aarch64's `virt` board (tests/system/run.sh, LAB_ARCH=arm64).
#
#   tests/system/guest/build-image-arm64.sh     prints the cache directory of the image
#
# A recipe of its own beside build-image.sh (the amd64 one), so that changing either never
# changes the other's cache key and forces its rebuild. Built on the x86_64 host, where every
# arm64 program runs through qemu-user-static's binfmt handler (fix-binary, so the chroot needs
# no copy of it; scripts/lab-prereqs.sh installs and registers it), so it does as little
# under emulation as it can:
#   - mmdebstrap: apt resolves and downloads on the host, and the packages are unpacked and
#     configured in a few dpkg runs (debootstrap's dozens of emulated dpkg runs took 35 min
#     under load);
#   - no man pages, docs or translations (dpkg path-exclude), dpkg's unsafe-io (no fsync: a
#     half-built root is thrown away, never used);
#   - no mkinitramfs: the kernel package depends on initramfs-tools, whose update-initramfs
#     is diverted to a no-op (under qemu-user it alone took over 40 min); the lab boots its
#     small initrd (guest/initrd-init), assembled here on the host from klibc-utils' files
#     and the kernel's modules;
#   - only what the arm64 scenarios use: no Wi-Fi stack (hostapd, wpa_supplicant, dnsmasq,
#     iw) and no unattended-upgrades (the amd64 machine's Wi-Fi and system-config scenarios),
#     no ca-certificates (its scripts took 227 s under qemu-user; the lab's servers speak
#     plain HTTP or carry their own CA), no udev hardware database (24 s; names of vendors,
#     nothing a virtio machine needs); the kernel's graphics, sound and media drivers are
#     left out.
#
# Cached under tests/system/.cache/arm64-image-<hash>/ (the hash of this recipe and the
# files it bakes in; no name build-image.sh's clean-up of image-* and build-* would take): base.img (raw ext4, immutable: scenarios boot copy-on-write overlays
# of it), vmlinuz, initrd-small.img, packages.txt and timings.txt (what each step cost).
# Needs root, mmdebstrap, e2fsprogs and cpio. LAB_MIRROR overrides the Debian mirror
# (default: the one configured for apt on the host).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${LAB_CACHE:-$here/../.cache}"
mkdir -p "$cache"; cache="$(cd "$cache" && pwd)"
log() { echo "build-image-arm64: $*" >&2; }
die() { echo "build-image-arm64: ERROR: $*" >&2; exit 1; }

# Everything that shapes the image goes into the key.
key="$(cat "$here/build-image-arm64.sh" "$here/lab.service" "$here/lab-boot" "$here/initrd-init" | sha256sum | cut -c1-16)"
out="$cache/arm64-image-$key"
if [ -f "$out/ready" ]; then echo "$out"; exit 0; fi

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap, chroot)"
for c in mmdebstrap mke2fs chroot cpio; do
    command -v "$c" >/dev/null || die "$c not found (scripts/lab-prereqs.sh installs it)"
done
if [ "$(uname -m)" != aarch64 ]; then
    grep -qsx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 && grep -qs '^flags:.*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 \
        || die "arm64 programs cannot run here: no fix-binary qemu-aarch64 binfmt handler (scripts/lab-prereqs.sh registers it)"
fi

# One builder at a time; a second caller waits and then finds the image ready.
exec 9>"$cache/arm64-image.lock"
flock 9
if [ -f "$out/ready" ]; then echo "$out"; exit 0; fi

mirror_from_apt() {
    # First Debian (non-security) URI configured for apt, one-line or deb822 style.
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' |
        tr ' ' '\n' | grep -E '^https?://.*/debian/?$' | head -n1 || true
}
mirror="${LAB_MIRROR:-$(mirror_from_apt)}"
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list*; set LAB_MIRROR"

work="$cache/arm64-build-$key.$$"
rootfs="$work/rootfs"
remove_build_dir() { # never follow a mount out of the build folder
    local m
    for m in proc sys dev/pts dev; do
        if mountpoint -q "$1/rootfs/$m" 2>/dev/null; then umount -l "$1/rootfs/$m" || return 1; fi
    done
    rm -rf --one-file-system "$1"
}
trap 'remove_build_dir "$work"' EXIT
for stale in "$cache"/arm64-build-*; do [ -e "$stale" ] && remove_build_dir "$stale"; done
mkdir -p "$work"

t0=$(date +%s)
# The root: bookworm's required packages and apt (debootstrap's minbase), then these.
# initramfs-tools comes with the kernel (a dependency) and brings klibc-utils, whose tools the
# small initrd takes.
packages=systemd,systemd-sysv,udev,kmod,dbus,libpam-systemd,iproute2,network-manager,curl,python3,procps,linux-image-arm64
excl=()
for p in /usr/share/man /usr/share/doc /usr/share/info /usr/share/locale /usr/share/lintian \
    /lib/udev/hwdb.d /usr/lib/udev/hwdb.d \
    /lib/modules/*/kernel/drivers/gpu /lib/modules/*/kernel/sound /lib/modules/*/kernel/drivers/media \
    /lib/modules/*/kernel/drivers/infiniband /lib/modules/*/kernel/drivers/staging \
    /lib/modules/*/kernel/drivers/iio /lib/modules/*/kernel/drivers/net/wireless; do
    excl+=(--dpkgopt="path-exclude=$p/*")
done
stamp() { # each line with the seconds since the start: what each of mmdebstrap's steps cost
    local l now
    while IFS= read -r l; do printf -v now '%(%s)T' -1; printf '%4d %s\n' $((now - t0)) "$l"; done
}
log "mmdebstrap bookworm arm64 from $mirror"
# The essential hook runs before the kernel is installed: update-initramfs is diverted to a
# no-op, so the kernel's postinst makes no initrd under emulation.
# shellcheck disable=SC2016 # $1 is mmdebstrap's, expanded by its hook shell
mmdebstrap --mode=root --arch=arm64 --variant=minbase --include="$packages" \
    --dpkgopt=force-unsafe-io "${excl[@]}" \
    --essential-hook='chroot "$1" dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs' \
    --essential-hook='printf "#!/bin/sh\n# the lab boots its own small initrd\nexit 0\n" > "$1/usr/sbin/update-initramfs"; chmod 0755 "$1/usr/sbin/update-initramfs"' \
    bookworm "$rootfs" "$mirror" 2>&1 | stamp > "$work/mmdebstrap.log" \
    || { tail -n 40 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed (log: the lines above)"; }
t1=$(date +%s)

log "configure"
echo lab > "$rootfs/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 lab\n' > "$rootfs/etc/hosts"
echo '/dev/vda / ext4 defaults 0 1' > "$rootfs/etc/fstab"
# The serial getty would hang up (SIGHUP) anything the scenario writes to the console.
ln -sf /dev/null "$rootfs/etc/systemd/system/serial-getty@ttyAMA0.service"
ln -sf /dev/null "$rootfs/etc/systemd/system/getty@tty1.service"
# As on amd64 (build-image.sh): NetworkManager would wait for hostnamed on a read-only root.
ln -sf /dev/null "$rootfs/etc/systemd/system/systemd-hostnamed.service"
# Persistent journal, so a second boot (power-cut scenarios) can read the first one's.
mkdir -p "$rootfs/var/log/journal"
# Periodic jobs would compete for the 2 emulated cores and reach for the network.
rm -f "$rootfs"/etc/systemd/system/timers.target.wants/apt-daily*.timer \
      "$rootfs"/etc/systemd/system/timers.target.wants/e2scrub_all.timer \
      "$rootfs"/etc/systemd/system/timers.target.wants/fstrim.timer
install -m 0644 "$here/lab.service" "$rootfs/etc/systemd/system/lab.service"
# lab-boot's error line goes to the amd64 console; this machine's is ttyAMA0.
sed 's|/dev/ttyS0|/dev/ttyAMA0|g' "$here/lab-boot" > "$rootfs/usr/local/sbin/lab-boot"
chmod 0755 "$rootfs/usr/local/sbin/lab-boot"
ln -sf /etc/systemd/system/lab.service "$rootfs/etc/systemd/system/multi-user.target.wants/lab.service"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*_Packages
# Machine id is made on first boot of each overlay.
: > "$rootfs/etc/machine-id"
chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}\n' > "$work/packages.txt"

# The lab's small initrd (guest/initrd-init): klibc's tools and the modules that reading an
# ext4 root on a virtio disk needs (Debian's arm64 kernel has the virtio core built in),
# uncompressed (nothing for the emulated kernel to gunzip).
log "small initrd"
kernel="$(ls "$rootfs"/boot/vmlinuz-* | head -n1)"
[ -f "$kernel" ] || die "no kernel in the root"
kver="${kernel##*/vmlinuz-}"
mods="$rootfs/lib/modules/$kver/kernel"
s="$work/initrd-s"
mkdir -p "$s/bin" "$s/lib" "$s/m"
for b in sh cat mount mkdir sleep insmod run-init poweroff; do
    cp -L "$rootfs/usr/lib/klibc/bin/$b" "$s/bin/" || die "klibc-utils has no $b"
done
# The tools' interpreter is /lib/klibc-<hash>.so.
cp -L "$rootfs"/usr/lib/klibc-*.so "$s/lib/" || die "no libklibc in the root"
: > "$s/modules"
for m in drivers/virtio/virtio_pci_legacy_dev.ko drivers/virtio/virtio_pci_modern_dev.ko \
    drivers/virtio/virtio_pci.ko drivers/block/virtio_blk.ko crypto/crc32c_generic.ko \
    lib/crc16.ko fs/mbcache.ko fs/jbd2/jbd2.ko fs/ext4/ext4.ko; do
    f="$mods/$m"
    # The package may ship them compressed; the initrd's insmod reads plain ELF.
    if [ ! -f "$f" ] && [ -f "$f.xz" ]; then xz -dc "$f.xz" > "$s/m/$(basename "$m")"; else cp "$f" "$s/m/" || die "no module $m in $kver"; fi
    basename "$m" >> "$s/modules"
done
install -m 0755 "$here/initrd-init" "$s/init"
t2=$(date +%s)

log "ext4 image"
mkdir -p "$work/out"
cp "$kernel" "$work/out/vmlinuz"
(cd "$s" && find . | cpio -o -H newc --quiet) > "$work/out/initrd-small.img"
cp "$work/packages.txt" "$work/mmdebstrap.log" "$work/out/"
# stdout carries only the image path: mke2fs -q still says "Creating regular file".
mke2fs -q -t ext4 -d "$rootfs" -L root "$work/out/base.img" 3G >&2
chmod 0444 "$work/out/base.img"
t3=$(date +%s)
printf 'mmdebstrap_s=%s configure_s=%s image_s=%s total_s=%s mirror=%s\n' \
    $((t1-t0)) $((t2-t1)) $((t3-t2)) $((t3-t0)) "$mirror" > "$work/out/timings.txt"
touch "$work/out/ready"
rm -rf "$out"; mv "$work/out" "$out"
# Older arm64 images (other recipe hashes) are dead weight.
for old in "$cache"/arm64-image-????????????????; do [ "$old" = "$out" ] || rm -rf "$old"; done
log "image ready in $((t3-t0)) s: $out"
echo "$out"
