# shellcheck shell=bash
# Host side of the real-RAUC scenarios (os-rauc-*; issue 43): `. "$(dirname "$0")/../rauc-lab.sh"`
# in a host hook, then `rauc_lab_share`. The guest image stays as it is (its cache key too):
#
# - Debian's own rauc 1.8 and the one library the image lacks (libjson-glib), fetched once with
#   apt-get download and unpacked into an overlay tree. Debian's package ships only the binary,
#   so the tree adds what an image's RAUC integration adds (meta-rauc's rauc.service, D-Bus
#   policy and activation file), /etc/rauc/system.conf (two root slots: /dev/vda and slot B,
#   /dev/vdd; the `custom` boot loader backend), a test keyring, and the data-partition layout
#   of the agent (as lab_ro_layout, docs/packaging.md) with its vendor key.
# - The lab's `custom` backend (rauc-lab-boot) keeps the boot loader's variables in
#   /data/lab-boot, which both slots see (as U-Boot's environment or grubenv would be), and
#   prints the slot the next boot starts from on the console (`@@SLOT@@`, the lab's switch).
# - The lab's reboot: qemu runs with -no-reboot and the harness boots a next phase only after a
#   power cut, so /usr/local/sbin/systemctl (first on the agent's PATH) records `systemctl
#   reboot` in /var/lib/lab/reboot-<boot id> and the scenario cuts the power once it sees it.
#   Everything else goes to systemd's systemctl.
# - Bundles made with the real `rauc bundle` from the lab's own slot image (the guest image with
#   the overlay written in by debugfs, without what a slot's boot does not read: modules it
#   does not load, /boot, apt's caches, docs; shrunk with resize2fs -M), signed by the test key
#   (and a copy signed by another key, `rauc resign`), and one of the same image with a mistake
#   of its own that svc-server refuses (rauc_lab_bad_overlay: os-rauc-bad-gate).
# All of it is cached in $LAB_CACHE/rauc-<key>/, the key covering the image, this file, the
# packages and the agent binary (the slot image carries the image's agent).

. "$(dirname "${BASH_SOURCE[0]}")/host-lib.sh"

RAUC_LAB_PKGS=(rauc libjson-glib-1.0-0)
RAUC_LAB_COMPATIBLE=svc-lab-amd64

# rauc_lab_overlay DIR AGENT VENDOR_PUB: the overlay tree.
rauc_lab_overlay() {
    local d="$1" agent="$2" pub="$3" repo deb
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    for deb in "$RAUC_LAB_DEBS"/*.deb; do dpkg-deb -x "$deb" "$d"; done
    rm -rf "$d/usr/share/doc" "$d/usr/share/man"
    mkdir -p "$d/etc/rauc" "$d/usr/lib/systemd/system" "$d/usr/share/dbus-1/system.d" \
        "$d/usr/share/dbus-1/system-services" "$d/usr/lib/lab" "$d/usr/local/sbin" \
        "$d/usr/lib/svc-agent" "$d/usr/lib/systemd/system/svc-agent.service.d" \
        "$d/etc/systemd/system/multi-user.target.wants" "$d/etc/systemd/system/svc-agent.service.d" \
        "$d/etc/profile.d" "$d/data" "$d/var/lib/lab" "$d/lab"
    cat > "$d/etc/rauc/system.conf" <<EOF
# The lab's A/B pair (tests/system/rauc-lab.sh): slot A is the first root disk, slot B the
# second; RAUC tells which one booted from the kernel's root=.
[system]
compatible=$RAUC_LAB_COMPATIBLE
bootloader=custom
statusfile=/data/rauc.status
mountprefix=/run/rauc

[handlers]
bootloader-custom-backend=/usr/lib/lab/rauc-lab-boot

[keyring]
path=/etc/rauc/keyring.pem

[slot.rootfs.0]
device=/dev/vda
type=ext4
bootname=a

[slot.rootfs.1]
device=/dev/vdd
type=ext4
bootname=b
EOF
    cp "$RAUC_LAB_KEYS/ca.cert.pem" "$d/etc/rauc/keyring.pem"
    cat > "$d/usr/lib/systemd/system/rauc.service" <<'EOF'
[Unit]
Description=RAUC update service
RequiresMountsFor=/data

[Service]
Type=dbus
BusName=de.pengutronix.rauc
ExecStart=/usr/bin/rauc service

[Install]
WantedBy=multi-user.target
EOF
    # Started at boot, as meta-rauc's image does: the agent asks RAUC's name's owner, which
    # does not activate the service.
    ln -sf /usr/lib/systemd/system/rauc.service "$d/etc/systemd/system/multi-user.target.wants/rauc.service"
    cat > "$d/usr/share/dbus-1/system-services/de.pengutronix.rauc.service" <<'EOF'
[D-BUS Service]
Name=de.pengutronix.rauc
Exec=/bin/false
User=root
SystemdService=rauc.service
EOF
    cat > "$d/usr/share/dbus-1/system.d/de.pengutronix.rauc.conf" <<'EOF'
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<!-- RAUC's service: owned by root and spoken to by root only (the agent runs as root). -->
<busconfig>
  <policy user="root">
    <allow own="de.pengutronix.rauc"/>
    <allow send_destination="de.pengutronix.rauc"/>
  </policy>
</busconfig>
EOF
    cat > "$d/usr/lib/lab/rauc-lab-boot" <<'EOF'
#!/bin/sh
# RAUC's `custom` boot loader backend over the lab's slot switch. The variables live in
# /data/lab-boot (seen by both slots, as a boot loader's environment): primary (a|b) and
# state-a, state-b (good|bad). The boot loader starts the primary slot when it is good, else
# the other one; every change prints that choice on the console, where the harness reads it.
set -eu
env=/data/lab-boot
mkdir -p "$env"
get() { cat "$env/$1" 2>/dev/null || echo "$2"; }
put() { printf '%s\n' "$2" > "$env/.$1.tmp"; sync "$env/.$1.tmp"; mv "$env/.$1.tmp" "$env/$1"; sync "$env"; }
other() { if [ "$1" = a ]; then echo b; else echo a; fi; }
next() {
    p=$(get primary a)
    if [ "$(get "state-$p" good)" = good ]; then echo "$p"; else other "$p"; fi
}
case "${1:-}" in
    get-primary) get primary a ;;
    set-primary) put "state-$2" good; put primary "$2"; echo "@@SLOT@@ $(next)" > /dev/ttyS0 ;;
    get-state) get "state-$2" good ;;
    set-state) put "state-$2" "$3"; echo "@@SLOT@@ $(next)" > /dev/ttyS0 ;;
    next) next ;;
    *) echo "rauc-lab-boot: unknown command '${1:-}'" >&2; exit 1 ;;
esac
EOF
    cat > "$d/usr/local/sbin/systemctl" <<'EOF'
#!/bin/sh
# The lab's reboot (tests/system/rauc-lab.sh): recorded for the scenario, which cuts the power.
if [ "${1:-}" = reboot ]; then
    echo "reboot asked at $(date +%s)" >> "/var/lib/lab/reboot-$(cat /proc/sys/kernel/random/boot_id)"
    exit 0
fi
exec /usr/bin/systemctl "$@"
EOF
    chmod 0755 "$d/usr/lib/lab/rauc-lab-boot" "$d/usr/local/sbin/systemctl"
    # The agent's data-partition layout (as lab_ro_layout), its vendor key and the lab's gate.
    install -m 0755 "$agent" "$d/usr/lib/svc-agent/svc-agent"
    cp "$repo/dist/svc-agent.service" "$d/usr/lib/systemd/system/"
    sed -e "s#@STATE_DIR@#/data/svc#g" -e "s#@CREDENTIALS_DIR@#/data/etc#g" \
        -e "s#@IMAGE_AGENT@#/usr/lib/svc-agent/svc-agent#g" "$repo/dist/svc-agent-data-partition.conf.in" \
        > "$d/usr/lib/systemd/system/svc-agent.service.d/data-partition.conf"
    ln -sf /usr/lib/systemd/system/svc-agent.service "$d/etc/systemd/system/multi-user.target.wants/svc-agent.service"
    printf 'SVC_STATE_DIR=/data/svc\nSVC_CREDENTIALS_DIR=/data/etc\nexport SVC_STATE_DIR SVC_CREDENTIALS_DIR\n' \
        > "$d/etc/profile.d/svc-agent.sh"
    # svc-server's probation (and the OS gate's part of it) 15 s, the gate's deadline 150 s.
    # The first-contact wait 5 s (as air-gap-usb): os-rauc-powercut boots slot B twice with the
    # app away, and its phase that brings the app back runs only once the agent's unit has
    # started, which the default wait held back ~45 s at each of those boots.
    printf '[Service]\nEnvironment=SVC_AGENT_PROBATION_SECS=15 SVC_AGENT_OS_GATE_SECS=150 SVC_AGENT_FIRST_CONTACT_SECS=5\n' \
        > "$d/etc/systemd/system/svc-agent.service.d/lab-gate.conf"
    install -m 0644 "$pub" "$d/etc/svc-signing.pub"
    cat > "$d/etc/fstab" <<'EOF'
LABEL=svcdata /data ext4 defaults 0 2
/data/lab /var/lib/lab none bind,x-systemd.requires-mounts-for=/data 0 0
EOF
}

# What the slot image keeps of the guest image's kernel modules: those a slot's boot and its
# RAUC install load (`lsmod` on slot B in os-rauc-good, after RAUC wrote slot A from there),
# with what they depend on (modules.dep). The lab boots the host's copy of the kernel
# (-kernel) with the small initrd, so /boot is not read; udev and RAUC load modules from the
# root. A module missing here shows as a slot B boot without its device (the scenarios check
# the network, the data disk and RAUC's install on slot B).
RAUC_LAB_MODULES=(
    squashfs loop dm_mod fuse configfs autofs4 binfmt_misc ip_tables x_tables
    ext4 jbd2 mbcache crc16 crc32c_generic virtio virtio_ring virtio_pci virtio_pci_modern_dev
    virtio_pci_legacy_dev virtio_blk virtio_net net_failover failover virtio_rng qemu_fw_cfg
    ata_piix ata_generic libata scsi_mod scsi_common floppy i2c_piix4 psmouse serio_raw evdev
    button pcspkr rfkill drm efi_pstore kvm kvm_amd kvm_intel irqbypass ccp
)
# What else a slot does not need: apt's caches, documentation, manuals, translations.
RAUC_LAB_DROP=(/boot /var/cache/apt /usr/share/doc /usr/share/man /usr/share/info /usr/share/locale)

# rauc_lab_prune_cmds IMAGE TMP: debugfs commands on stdout that remove RAUC_LAB_DROP and every
# module but RAUC_LAB_MODULES (and their dependencies) from IMAGE and write the module indexes
# depmod makes for what stays (files read out with debugfs into TMP; no loop mount). Of the
# modules only the indexes and the kept ones are read: modules.dep names every module file.
rauc_lab_prune_cmds() {
    local img="$1" tmp="$2" kver d f m keep mods
    kver="$(debugfs -R "ls -p /usr/lib/modules" "$img" 2>/dev/null | awk -F/ '$6 ~ /^[0-9]/ { print $6; exit }')"
    [ -n "$kver" ] || { echo "rauc-lab: no kernel modules in $img" >&2; return 1; }
    mods="/usr/lib/modules/$kver"
    mkdir -p "$tmp/tree" "$tmp/dep/lib/modules/$kver" "$tmp/depmod.d"
    for f in modules.dep modules.order modules.builtin modules.builtin.modinfo; do
        debugfs -R "dump $mods/$f $tmp/$f" "$img" > /dev/null 2>&1
        [ -s "$tmp/$f" ] || { echo "rauc-lab: could not read $mods/$f of $img" >&2; return 1; }
    done
    # The kept modules: each named one's line of modules.dep (the module and all it needs).
    keep="$tmp/keep.txt"
    : > "$keep.all"
    for m in "${RAUC_LAB_MODULES[@]}"; do
        awk -v m="$m" -F: '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); gsub(/-/, "_", n) }
            n == m { print $1; k = split($2, d, " "); for (i = 1; i <= k; i++) print d[i]; f = 1 }
            END { exit !f }' "$tmp/modules.dep" >> "$keep.all" || true
    done
    # A module the image does not have at all (its recipe leaves out the graphics drivers,
    # drm) is loaded by neither slot.
    [ -s "$keep.all" ] || { echo "rauc-lab: none of the slot's modules is in $img" >&2; return 1; }
    LC_ALL=C sort -u "$keep.all" > "$keep"
    # The indexes of the kept set: depmod over a tree of just those (and the builtin lists).
    cp "$tmp/modules.order" "$tmp/modules.builtin" "$tmp/modules.builtin.modinfo" \
        "$tmp/dep/lib/modules/$kver/" || return 1
    while read -r f; do
        mkdir -p "$(dirname "$tmp/dep/lib/modules/$kver/$f")" || return 1
        debugfs -R "dump $mods/$f $tmp/dep/lib/modules/$kver/$f" "$img" > /dev/null 2>&1
        [ -s "$tmp/dep/lib/modules/$kver/$f" ] || { echo "rauc-lab: could not read $mods/$f of $img" >&2; return 1; }
    done < "$keep"
    depmod -C "$tmp/depmod.d" -b "$tmp/dep" "$kver" || { echo "rauc-lab: depmod failed" >&2; return 1; }
    # Out: every other module, its folders once empty, and the old indexes.
    cut -d: -f1 "$tmp/modules.dep" | LC_ALL=C sort | LC_ALL=C comm -23 - "$keep" | sed "s#^#rm $mods/#"
    cut -d: -f1 "$tmp/modules.dep" | while read -r f; do
        while [ "${f%/*}" != "$f" ]; do f="${f%/*}"; echo "$f"; done
    done | sort -u | awk '{ print length($0), $0 }' | sort -rn | cut -d' ' -f2- | sed "s#^#rmdir $mods/#"
    debugfs -R "ls -p $mods" "$img" 2>/dev/null | awk -F/ '$6 ~ /^modules\./ { print $6 }' | sed "s#^#rm $mods/#"
    for f in "$tmp/dep/lib/modules/$kver"/modules.*; do
        echo "write $f $mods/${f##*/}"
    done
    # The other folders: read out whole (a few tens of MB) for their lists of files.
    for d in "${RAUC_LAB_DROP[@]}"; do
        # What the image's recipe already left out (docs, manuals, translations) is not there.
        debugfs -R "stat $d" "$img" 2>&1 | grep -q '^Inode:' || continue
        debugfs -R "rdump $d $tmp/tree" "$img" > /dev/null 2>&1
        [ -d "$tmp/tree/${d##*/}" ] || { echo "rauc-lab: could not read $d of $img" >&2; return 1; }
        (cd "$tmp/tree/${d##*/}" && find . -mindepth 1 ! -type d | sed 's#^\./##') | sed "s#^#rm $d/#"
        (cd "$tmp/tree/${d##*/}" && find . -mindepth 1 -depth -type d | sed 's#^\./##') | sed "s#^#rmdir $d/#"
        rm -rf "${tmp:?}/tree/${d##*/}"
    done
}

# rauc_lab_slot_image OVERLAY VERSION OUT: the guest image with OVERLAY written in (debugfs,
# no loop mount) and /etc/lab-os-version, without what a slot does not need
# (rauc_lab_prune_cmds), shrunk to its minimum size; its free blocks are holes (zeros), which
# the bundle's squashfs stores as nothing.
rauc_lab_slot_image() {
    local ov="$1" ver="$2" out="$3" cmds p tmp
    cp --sparse=always "$RAUC_LAB_IMAGE/base.img" "$out"
    chmod 0644 "$out"
    cmds="$(mktemp)"
    tmp="$(mktemp -d)"
    rauc_lab_prune_cmds "$out" "$tmp" > "$cmds" || { rm -rf "$cmds" "$tmp"; return 1; }
    (cd "$ov" && find . -mindepth 1 -type d | sed 's#^\.##' | while read -r p; do echo "mkdir $p"; done
     cd "$ov" && find . -mindepth 1 ! -type d | sed 's#^\.##' | while read -r p; do
        echo "rm $p"
        if [ -L "$ov$p" ]; then echo "symlink $p $(readlink "$ov$p")"
        else echo "write $ov$p $p"; echo "sif $p mode 0$(stat -c %a "$ov$p" | sed 's/^/100/')"; fi
     done) >> "$cmds"
    echo "$ver" > "$cmds.ver"
    { echo "rm /etc/lab-os-version"; echo "write $cmds.ver /etc/lab-os-version"; } >> "$cmds"
    debugfs -w -f "$cmds" "$out" > "$cmds.log" 2>&1
    rm -rf "$cmds" "$cmds.ver" "$cmds.log" "$tmp"
    e2fsck -fy "$out" > /dev/null 2>&1 || [ $? -le 1 ]
    # The journal mke2fs gives a file system of the slot's size (16 MiB), not the 3 GiB guest
    # disk's 64 MiB: RAUC copies every block of the image into the slot.
    tune2fs -O ^has_journal "$out" > /dev/null && tune2fs -J size=16 "$out" > /dev/null
    resize2fs -M "$out" > /dev/null 2>&1
    e2fsck -fy -E discard "$out" > /dev/null 2>&1 || [ $? -le 1 ]
    local blocks
    blocks="$(dumpe2fs -h "$out" 2>/dev/null | sed -n 's/^Block count: *//p')"
    truncate -s "$((blocks * 4096))" "$out"
}

# rauc_lab_bundle IMAGE VERSION OUT: a RAUC bundle of IMAGE (rootfs slot class), signed by the
# test key. zstd level 3 in 1 MiB blocks: 7% smaller than 128 KiB blocks; level 9 saves 6% more
# for 5x the host's time at every cache build, level 19 16% for 130x (190 s a bundle).
rauc_lab_bundle() {
    local dir
    dir="$(mktemp -d "$LAB_CACHE/rauc-bundle.XXXXXX")"
    ln "$1" "$dir/rootfs.ext4" 2>/dev/null || cp --sparse=always "$1" "$dir/rootfs.ext4"
    cat > "$dir/manifest.raucm" <<EOF
[update]
compatible=$RAUC_LAB_COMPATIBLE
version=$2

[image.rootfs]
filename=rootfs.ext4
EOF
    rm -f "$3"
    rauc bundle --cert "$RAUC_LAB_KEYS/ca.cert.pem" --key "$RAUC_LAB_KEYS/ca.key.pem" \
        --mksquashfs-args="-comp zstd -Xcompression-level 3 -b 1M" "$dir" "$3" >&2
    rm -rf "$dir"
}

# rauc_lab_image_bundle OVERLAY VERSION OUT: the slot image of OVERLAY (rauc_lab_slot_image) as
# a bundle (rauc_lab_bundle); the image is removed once bundled. Every bundle is made this way.
rauc_lab_image_bundle() {
    rauc_lab_slot_image "$1" "$2" "$3.ext4"
    rauc_lab_bundle "$3.ext4" "$2" "$3"
    rm -f "$3.ext4"
}

# rauc_lab_bad_overlay OVERLAY OUT: OVERLAY as an image whose svc-server fails the health gate.
# svc-server lives on the data partition (both slots run the same build), so what breaks it
# must be the image's: a unit drop-in that hands it a machine id it refuses, as an image built
# with a wrong setting would. The real svc-server then exits at every start (usage, exit 2)
# while the agent runs; slot A, without the drop-in, runs the same build fine.
rauc_lab_bad_overlay() {
    cp -a "$1" "$2"
    cat > "$2/etc/systemd/system/svc-agent.service.d/lab-bad-os.conf" <<'EOF'
# os-rauc-bad-gate (tests/system/rauc-lab.sh): this image's mistake, which svc-server refuses.
[Service]
Environment=SVC_MACHINE_ID=..
EOF
}

# rauc_lab_release: svc-release ($LAB_SVC_RELEASE, else built here).
rauc_lab_release() {
    local repo
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    if [ -n "${LAB_SVC_RELEASE:-}" ]; then echo "$LAB_SVC_RELEASE"; return; fi
    (cd "$repo" && cargo build --locked --bin svc-release) >&2
    echo "${CARGO_TARGET_DIR:-$repo/target}/debug/svc-release"
}

# rauc_lab_prepare AGENT: builds (once) and sets RAUC_LAB to the cache folder: keys/
# (ca = the keyring's, other = a key RAUC does not know), vendor.key(.pub), overlay/, and
# bundles good.raucb (2.0.0-lab), bad-gate.raucb (2.0.1-lab: svc-server fails the gate there,
# rauc_lab_bad_overlay), other-key.raucb (good.raucb signed by the other key).
rauc_lab_prepare() {
    local agent="$1" here repo key
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    repo="$(cd "$here/../.." && pwd)"
    RAUC_LAB_IMAGE="$("$here/guest/build-image.sh")"
    key="$( (echo "$RAUC_LAB_IMAGE"; cat "${BASH_SOURCE[0]}" "$repo/dist/svc-agent.service" \
        "$repo/dist/svc-agent-data-partition.conf.in" "$agent") | sha256sum | cut -c1-16)"
    RAUC_LAB="$LAB_CACHE/rauc-$key"
    host_cache_once "$RAUC_LAB" rauc_lab_build "$agent"
}

# rauc_lab_build AGENT DIR: rauc_lab_prepare's folder, made in DIR.
rauc_lab_build() {
    local agent="$1" t="$2" k
    command -v rauc > /dev/null || { echo "rauc not installed (scripts/lab-prereqs.sh)" >&2; return 1; }
    RAUC_LAB_DEBS="$t/debs"; RAUC_LAB_KEYS="$t/keys"
    mkdir -p "$RAUC_LAB_DEBS" "$RAUC_LAB_KEYS" "$t/overlay"
    (cd "$RAUC_LAB_DEBS" && apt-get download "${RAUC_LAB_PKGS[@]}") >&2
    for k in ca other; do
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/O=svc lab/CN=lab RAUC $k" \
            -keyout "$RAUC_LAB_KEYS/$k.key.pem" -out "$RAUC_LAB_KEYS/$k.cert.pem" 2> /dev/null
    done
    "$(rauc_lab_release)" keygen "$t/vendor.key" > /dev/null
    rauc_lab_overlay "$t/overlay" "$agent" "$t/vendor.key.pub"
    local s=$SECONDS
    rauc_lab_image_bundle "$t/overlay" 2.0.0-lab "$t/good.raucb"
    rauc_lab_bad_overlay "$t/overlay" "$t/overlay-bad"
    rauc_lab_image_bundle "$t/overlay-bad" 2.0.1-lab "$t/bad-gate.raucb"
    rm -rf "$t/overlay-bad"
    rauc resign --cert "$RAUC_LAB_KEYS/other.cert.pem" --key "$RAUC_LAB_KEYS/other.key.pem" \
        --keyring "$RAUC_LAB_KEYS/ca.cert.pem" --signing-keyring "$RAUC_LAB_KEYS/other.cert.pem" \
        "$t/good.raucb" "$t/other-key.raucb" >&2
    echo "bundles_s=$((SECONDS - s))" > "$t/timings.txt"
}

# rauc_lab_share BUNDLE OS_VERSION: the overlay to /lab/share/rauc/overlay and the management
# directory /lab/share/app: svc-server under test and bundle BUNDLE (good, bad-gate, other-key) as OS
# OS_VERSION, published by svc-release with the vendor key.
rauc_lab_share() {
    mkdir -p "$LAB_SHARE/rauc" "$LAB_SHARE/app"
    cp -a "$RAUC_LAB/overlay" "$LAB_SHARE/rauc/"
    cp "$RAUC_LAB/timings.txt" "$LAB_SHARE/rauc/"
    echo '{"config": {"components": [], "modules": [], "agent": {}}, "poll_interval_secs": 5}' \
        > "$LAB_SHARE/app/poll.json"
    "$(rauc_lab_release)" publish --key "$RAUC_LAB/vendor.key" \
        --os-bundle "$RAUC_LAB/$1.raucb" --os-version "$2" "$LAB_SHARE/app" "$LAB_SHARE/../bin/svc-server" >&2
}
