#!/usr/bin/env bash
# The machine lab's guest image: Debian bookworm from Debian's own packages (mmdebstrap),
# with systemd as PID 1, journald, NetworkManager, hostapd, wpa_supplicant, dnsmasq, the
# Debian kernel (which ships mac80211_hwsim) and the lab runner unit.
#
#   tests/system/guest/build-image.sh            prints the cache directory of the image
#
# The image is cached under tests/system/.cache/image-<hash>/, keyed by a hash of this
# recipe and the files it bakes in, so it is rebuilt only when the recipe changes. The
# directory holds base.img (raw ext4, treated as immutable: scenarios boot copy-on-write
# overlays of it), vmlinuz, initrd-small.img (the one the lab boots: guest/initrd-init),
# packages.txt and timings.txt (what each step cost). Needs root, mmdebstrap, e2fsprogs and cpio.
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

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap, chroot)"
for c in mmdebstrap mke2fs chroot cpio; do
    command -v "$c" >/dev/null || die "$c not found (scripts/lab-prereqs.sh installs it)"
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
    local m
    for m in proc sys dev/pts dev; do
        if mountpoint -q "$1/rootfs/$m" 2>/dev/null; then umount -l "$1/rootfs/$m" || return 1; fi
    done
    rm -rf --one-file-system "$1"
}
trap 'remove_build_dir "$work"' EXIT
for stale in "$cache"/build-*; do [ -e "$stale" ] && remove_build_dir "$stale"; done
mkdir -p "$work"

t0=$(date +%s)
# The root: bookworm's required packages and apt (debootstrap's minbase), then these. The
# kernel brings initramfs-tools (a dependency) and with it klibc-utils, whose tools the small
# initrd takes. mmdebstrap, not debootstrap: apt resolves and downloads in parallel and dpkg
# unpacks and configures in a few runs, not one per package; no man pages, docs or
# translations (dpkg path-exclude), dpkg's unsafe-io (no fsync: a half-built root is thrown
# away, never used); the kernel's graphics, sound and media drivers are left out; no
# mkinitramfs (update-initramfs diverted to a no-op: the lab boots the small initrd).
packages=systemd,systemd-sysv,udev,kmod,dbus,libpam-systemd,iproute2,network-manager,hostapd,wpasupplicant,dnsmasq-base,iw,curl,ca-certificates,python3,procps,unattended-upgrades,linux-image-amd64
excl=()
for p in /usr/share/man /usr/share/doc /usr/share/info /usr/share/locale /usr/share/lintian \
    /lib/modules/*/kernel/drivers/gpu /lib/modules/*/kernel/sound /lib/modules/*/kernel/drivers/media \
    /lib/modules/*/kernel/drivers/infiniband /lib/modules/*/kernel/drivers/staging \
    /lib/modules/*/kernel/drivers/iio; do
    excl+=(--dpkgopt="path-exclude=$p/*")
done
stamp() { # each line with the seconds since the start: what each of mmdebstrap's steps cost
    local l now
    while IFS= read -r l; do printf -v now '%(%s)T' -1; printf '%4d %s\n' $((now - t0)) "$l"; done
}
log "mmdebstrap bookworm from $mirror"
# shellcheck disable=SC2016 # $1 is mmdebstrap's, expanded by its hook shell
# The merged-usr hook: the root made merged from the start, as debootstrap does (usr-is-merged,
# not the usrmerge converter and perl).
mmdebstrap --mode=root --variant=minbase --include="$packages" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
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

chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}\n' > "$work/packages.txt"

# The lab's small initrd (guest/initrd-init): klibc's tools and the modules that reading an
# ext4 root on a virtio disk needs, uncompressed (nothing for the emulated kernel to gunzip).
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
for m in drivers/virtio/virtio.ko drivers/virtio/virtio_ring.ko \
    drivers/virtio/virtio_pci_legacy_dev.ko drivers/virtio/virtio_pci_modern_dev.ko \
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
# Older images (other recipe hashes) are dead weight.
for old in "$cache"/image-*; do [ "$old" = "$out" ] || rm -rf "$old"; done
log "image ready in $((t3-t0)) s: $out"
echo "$out"
