#!/usr/bin/env bash
# The machine lab's guest image: Debian bookworm from Debian's own packages (debootstrap),
# with systemd as PID 1, journald, NetworkManager, hostapd, wpa_supplicant, dnsmasq, the
# Debian kernel (which ships mac80211_hwsim) and the lab runner unit.
#
#   tests/system/guest/build-image.sh            prints the cache directory of the image
#
# The image is cached under tests/system/.cache/image-<hash>/, keyed by a hash of this
# recipe and the files it bakes in, so it is rebuilt only when the recipe changes. The
# directory holds base.img (raw ext4, treated as immutable: scenarios boot copy-on-write
# overlays of it), vmlinuz, initrd.img (the image's own) and initrd-small.img (the one the lab
# boots: small_initrd below). Needs root, debootstrap, e2fsprogs and cpio.
# LAB_MIRROR overrides the Debian mirror (default: the one configured for apt on the host).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${LAB_CACHE:-$here/../.cache}"
mkdir -p "$cache"; cache="$(cd "$cache" && pwd)"
log() { echo "build-image: $*" >&2; }
die() { echo "build-image: ERROR: $*" >&2; exit 1; }

# Everything that shapes the image goes into the key.
key="$(cat "$here/build-image.sh" "$here/lab.service" "$here/lab-boot" "$here/initrd-init" | sha256sum | cut -c1-16)"
out="$cache/image-$key"
if [ -f "$out/ready" ]; then echo "$out"; exit 0; fi

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"
for c in debootstrap mke2fs chroot cpio; do
    command -v "$c" >/dev/null || die "$c not found (scripts/test-system.sh installs it)"
done

# One builder at a time; a second caller waits and then finds the image ready.
exec 9>"$cache/image.lock"
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

work="$cache/build-$key.$$"
rootfs="$work/rootfs"
remove_build_dir() { # never follow a mount out of the build folder
    if mountpoint -q "$1/rootfs/proc" 2>/dev/null; then umount "$1/rootfs/proc" || return 1; fi
    rm -rf --one-file-system "$1"
}
trap 'remove_build_dir "$work"' EXIT
for stale in "$cache"/build-*; do [ -e "$stale" ] && remove_build_dir "$stale"; done
mkdir -p "$work"

# small_initrd INITRD OUT: the lab's initrd (guest/initrd-init) from the image's own: its klibc
# tools and the modules that reading an ext4 root on a virtio disk needs, uncompressed (nothing
# for the emulated kernel to gunzip). The image's initrd stays beside it, unused by the lab.
small_initrd_modules="drivers/virtio/virtio.ko drivers/virtio/virtio_ring.ko
    drivers/virtio/virtio_pci_legacy_dev.ko drivers/virtio/virtio_pci_modern_dev.ko
    drivers/virtio/virtio_pci.ko drivers/block/virtio_blk.ko crypto/crc32c_generic.ko
    lib/crc16.ko fs/mbcache.ko fs/jbd2/jbd2.ko fs/ext4/ext4.ko"
small_initrd() {
    local x="$work/initrd-x" s="$work/initrd-s" m kdir
    mkdir -p "$x" "$s/bin" "$s/lib" "$s/m"
    zcat "$1" | (cd "$x" && cpio -idm --quiet) || return 1
    kdir="$(ls "$x/lib/modules")"
    for b in sh cat mount mkdir sleep insmod run-init poweroff; do cp -a "$x/bin/$b" "$s/bin/" || return 1; done
    cp -a "$x"/lib/klibc-*.so "$s/lib/" || return 1
    : > "$s/modules"
    for m in $small_initrd_modules; do
        cp "$x/lib/modules/$kdir/kernel/$m" "$s/m/" || return 1
        basename "$m" >> "$s/modules"
    done
    install -m 0755 "$here/initrd-init" "$s/init"
    (cd "$s" && find . | cpio -o -H newc --quiet) > "$2"
}

t0=$(date +%s)
packages=systemd,systemd-sysv,udev,kmod,dbus,libpam-systemd,iproute2,network-manager,hostapd,wpasupplicant,dnsmasq-base,iw,curl,ca-certificates,python3,procps,unattended-upgrades
log "debootstrap bookworm from $mirror"
debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 \
    || { tail -n 40 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
t1=$(date +%s)

log "kernel and initrd"
mount -t proc proc "$rootfs/proc"
DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get install -y --no-install-recommends \
    linux-image-amd64 initramfs-tools > "$work/kernel.log" 2>&1 \
    || { tail -n 40 "$work/kernel.log" >&2; die "kernel install failed"; }
umount "$rootfs/proc"
t2=$(date +%s)

log "configure"
echo lab > "$rootfs/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 lab\n' > "$rootfs/etc/hosts"
echo '/dev/vda / ext4 defaults 0 1' > "$rootfs/etc/fstab"
# The serial getty would hang up (SIGHUP) anything the scenario writes to ttyS0.
ln -sf /dev/null "$rootfs/etc/systemd/system/serial-getty@ttyS0.service"
ln -sf /dev/null "$rootfs/etc/systemd/system/getty@tty1.service"
# NetworkManager asks hostnamed for the hostname at start; on a read-only root (the ro-root
# scenarios) hostnamed cannot set up its sandbox and NetworkManager waited out D-Bus's 25 s
# activation timeout at every such boot. Masked, the request fails at once and
# NetworkManager reads /etc/hostname itself; nothing here uses hostnamed.
ln -sf /dev/null "$rootfs/etc/systemd/system/systemd-hostnamed.service"
# Persistent journal, so a second boot (power-cut scenarios) can read the first one's.
mkdir -p "$rootfs/var/log/journal"
# Periodic apt runs would compete for the 2 emulated cores and reach for the network;
# disabled, not masked, so agent-syscfg scenarios can still turn them on.
rm -f "$rootfs"/etc/systemd/system/timers.target.wants/apt-daily*.timer \
      "$rootfs"/etc/systemd/system/timers.target.wants/e2scrub_all.timer \
      "$rootfs"/etc/systemd/system/timers.target.wants/fstrim.timer
install -m 0644 "$here/lab.service" "$rootfs/etc/systemd/system/lab.service"
install -m 0755 "$here/lab-boot" "$rootfs/usr/local/sbin/lab-boot"
ln -sf /etc/systemd/system/lab.service "$rootfs/etc/systemd/system/multi-user.target.wants/lab.service"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*_Packages
# Machine id is made on first boot of each overlay.
: > "$rootfs/etc/machine-id"

kernel="$(ls "$rootfs"/boot/vmlinuz-* | head -n1)"
initrd="$(ls "$rootfs"/boot/initrd.img-* | head -n1)"
[ -f "$kernel" ] && [ -f "$initrd" ] || die "no kernel/initrd in the rootfs"
chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}\n' > "$work/packages.txt"

log "ext4 image"
mkdir -p "$work/out"
cp "$kernel" "$work/out/vmlinuz"
cp "$initrd" "$work/out/initrd.img"
small_initrd "$initrd" "$work/out/initrd-small.img" || die "the lab's small initrd could not be made from $initrd"
cp "$work/packages.txt" "$work/debootstrap.log" "$work/kernel.log" "$work/out/"
# stdout carries only the image path: mke2fs -q still says "Creating regular file".
mke2fs -q -t ext4 -d "$rootfs" -L root "$work/out/base.img" 3G >&2
chmod 0444 "$work/out/base.img"
t3=$(date +%s)
printf 'debootstrap_s=%s kernel_s=%s image_s=%s total_s=%s mirror=%s\n' \
    $((t1-t0)) $((t2-t1)) $((t3-t2)) $((t3-t0)) "$mirror" > "$work/out/timings.txt"
touch "$work/out/ready"
rm -rf "$out"; mv "$work/out" "$out"
# Older images (other recipe hashes) are dead weight.
for old in "$cache"/image-*; do [ "$old" = "$out" ] || rm -rf "$old"; done
log "image ready in $((t3-t0)) s: $out"
echo "$out"
