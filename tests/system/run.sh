#!/usr/bin/env bash
# The machine lab: boots a real Debian guest (systemd, journald, NetworkManager, the Debian
# kernel with mac80211_hwsim) under qemu and runs scenarios in it against the static
# svc-agent and svc-server.
#
#   tests/system/run.sh [SCENARIO...]          all scenarios in scenarios/ when none given
#
# SCENARIO is a name (scenarios/<name>.sh) or a path to a scenario file (pending/x.sh).
#
# A scenario is scenarios/<name>.sh, run inside the guest by a oneshot unit once the system
# is up; the guest then powers off. Optional companions:
#   <name>.host.sh   run on the host before boot, with LAB_WORK (the run's folder) and
#                    LAB_SHARE (a folder that the guest sees as /lab/share). It may start
#                    host services (reachable from the guest at 10.0.2.2 = host loopback) and
#                    must write their PIDs to $LAB_WORK/host.pids; they are killed afterwards.
#   <name>.after.sh  makes it a power-cut scenario: the main phase must print @@POWERCUT@@ on
#                    the console (lab_powercut), the harness kills qemu, boots the same disk
#                    again and runs <name>.after.sh.
#   <name>.final.sh  a third boot: the after phase too ends with @@POWERCUT@@, the harness boots
#                    again and runs <name>.final.sh (phase "final").
#   <name>.fourth.sh a fourth boot: the final phase too ends with @@POWERCUT@@ (two cuts after
#                    a reboot, e.g. os-rauc-powercut), then <name>.fourth.sh (phase "fourth").
# `# lab-timeout: SECONDS` in a scenario sets its per-phase time limit (default 480).
# `# lab-root: ro` boots every phase after the main one with the root read-only from the
# kernel command line (`ro`), as a read-only image's boot loader says: the main phase makes
# the image (its fstab mounts / read-only), and a remount of a root booted `rw` can fail at
# boot (EBUSY while something still writes to it) and leave it writable.
# `# lab-needs: v2` puts 0.2.0 builds of both binaries in /lab/share/v2/ (update scenarios).
# `# lab-needs: usb` gives the guest a USB controller (qemu-xhci, id xhci) and the host a QEMU
# monitor socket at $LAB_WORK/monitor.sock, so that a host hook can hot-plug disks
# (host-lib.sh: host_usb_media).
# `# lab-needs: data-disk` adds a blank ext4 disk labelled svcdata as /dev/vdc (the data
# partition of the read-only-root scenarios, which make the root read-only themselves);
# `# lab-data-size: SIZE` (e.g. 1G) makes it larger than its default 256M.
# `# lab-needs: slot-b` adds a second root disk, "slot B" of an A/B pair: another
# copy-on-write overlay of the guest image, attached after the other disks (/dev/vdd with a
# data disk). A phase picks the root of the next boot as a boot loader's slot variable
# would: `@@SLOT@@ a|b` on its console (lab-lib.sh: lab_boot_slot); slot A (/dev/vda) until
# one does. The kernel command line says which slot booted (svc.lab.slot=a|b).
#
# `run.sh --snapshot DIR` boots the guest once and saves it, up and idle, into DIR; with
# LAB_SNAPSHOT=DIR, each scenario's main phase restores that guest (seconds) instead of
# booting (about 40 s under TCG), unless it needs other devices (usb, data-disk, slot-b) or says
# `# lab-needs: fresh-boot`. Waits for DIR/status when the snapshot is still being made. An
# after phase always boots: that boot is what a power-cut scenario tests.
#
# LAB_ARCH=arm64 runs the scenarios on the arm64 machine (qemu-system-aarch64, `virt`,
# Cortex-A57, TCG; its own image, guest/build-image-arm64.sh) with the aarch64
# builds; the default is amd64. Its PASS/FAIL lines say `arm64:NAME`; its phases have twice
# the time limit (a foreign instruction set under TCG), and it always boots (no saved guest).
#
# Environment: LAB_AGENT, LAB_SERVER (binaries; default: scripts/build-static.sh x86_64 or
# aarch64 --profile dist), LAB_OTHER_SERVER (svc-server built for the other architecture, for
# `# lab-needs: other-arch`; default: built likewise), LAB_CACHE (default tests/system/.cache), LAB_KEEP=1 keeps the disks of
# passing runs. Prints one PASS/FAIL line per scenario and `system: N passed, M failed`.
set -euo pipefail

case "${1:-}" in
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export LAB_CACHE="${LAB_CACHE:-$here/.cache}"
mkdir -p "$LAB_CACHE"
log() { echo "lab: $*" >&2; }
die() { echo "lab: ERROR: $*" >&2; echo "system: 0 passed, 1 failed"; exit 1; }

export LAB_ARCH="${LAB_ARCH:-amd64}"
# LAB_MACHINE: the guest's `uname -m` (build-static.sh's and install.sh's name for it).
case "$LAB_ARCH" in
    amd64) qemu=qemu-system-x86_64 tty=ttyS0 machine_args=() kernel_args="" LAB_MACHINE=x86_64 other_machine=aarch64 shown="" ;;
    # cortex-a57: a plain ARMv8.0 core; `max` adds pointer authentication, slow under TCG.
    # kpti=0: the A57 is not open to Meltdown, but Debian's kernel turns page table isolation
    # on for KASLR's sake, and TCG flushes its whole TLB at each of the two page table switches
    # of every syscall and interrupt (the amd64 guest's CPU model gets no PTI either).
    arm64) qemu=qemu-system-aarch64 tty=ttyAMA0 machine_args=(-M virt -cpu cortex-a57) kernel_args=" kpti=0" LAB_MACHINE=aarch64 other_machine=x86_64 shown="arm64:" ;;
    *) die "LAB_ARCH must be amd64 or arm64, not '$LAB_ARCH'" ;;
esac
export LAB_MACHINE
[ "$LAB_ARCH" = amd64 ] || unset LAB_SNAPSHOT # the saved guest is an amd64 machine

for c in "$qemu" qemu-img mke2fs debugfs; do
    command -v "$c" >/dev/null || die "$c not found (scripts/test-system.sh installs the prerequisites)"
done

# `run.sh --snapshot DIR` saves an up and idle guest into DIR instead (make_snapshot).
snapshot_dir=""
if [ "${1:-}" = --snapshot ]; then
    snapshot_dir="${2:?--snapshot needs a folder}"
    set --
fi

# Scenarios to run.
if [ $# -gt 0 ]; then
    scenarios=("$@")
else
    scenarios=()
    for f in "$here"/scenarios/*.sh; do
        b="$(basename "$f" .sh)"
        case "$b" in *.host|*.after|*.final|*.fourth) continue ;; esac
        scenarios+=("$b")
    done
fi
[ ${#scenarios[@]} -gt 0 ] || die "no scenarios found in $here/scenarios"

# Binaries (none for a snapshot).
[ -n "$snapshot_dir" ] && LAB_AGENT=/bin/true LAB_SERVER=/bin/true
if [ -z "${LAB_AGENT:-}" ] || [ -z "${LAB_SERVER:-}" ]; then
    log "building static binaries"
    mapfile -t built < <("$root/scripts/build-static.sh" "$LAB_MACHINE" --profile dist)
    [ ${#built[@]} -eq 2 ] || die "scripts/build-static.sh did not report two binaries"
    LAB_AGENT="${built[0]}"; LAB_SERVER="${built[1]}"
fi
[ -x "$LAB_AGENT" ] && [ -x "$LAB_SERVER" ] || die "binaries not executable: $LAB_AGENT $LAB_SERVER"

# Second versions (0.2.0) of both binaries for the update scenarios (`# lab-needs: v2`):
# copies of LAB_AGENT and LAB_SERVER that say 0.2.0 (stamp-version.py: the build that
# SVC_BUILD_VERSION=0.2.0 makes, without compiling again). LAB_V2_AGENT and LAB_V2_SERVER:
# already made (scripts/test-system.sh makes them once for all its workers).
LAB_V2=""
[ -n "$snapshot_dir" ] && scenarios=()
for s in "${scenarios[@]}"; do
    f="$s"; [ -f "$f" ] || f="$here/scenarios/$s.sh"
    grep -q '^# lab-needs: v2' "$f" 2>/dev/null && LAB_V2=1
done
v2dir=""
trap '[ -z "$v2dir" ] || rm -rf "$v2dir"' EXIT
if [ -n "$LAB_V2" ] && [ -n "${LAB_V2_AGENT:-}" ] && [ -n "${LAB_V2_SERVER:-}" ]; then
    [ -x "$LAB_V2_AGENT" ] && [ -x "$LAB_V2_SERVER" ] || die "0.2.0 binaries not executable: $LAB_V2_AGENT $LAB_V2_SERVER"
    LAB_V2="$LAB_V2_AGENT $LAB_V2_SERVER"
elif [ -n "$LAB_V2" ]; then
    v2dir="$(mktemp -d)"
    mapfile -t built_v2 < <("$here/stamp-version.py" 0.2.0 "$v2dir" "$LAB_AGENT" "$LAB_SERVER")
    [ ${#built_v2[@]} -eq 2 ] || die "the 0.2.0 copies of $LAB_AGENT and $LAB_SERVER failed"
    LAB_V2="${built_v2[0]} ${built_v2[1]}"
fi

# svc-server built for the other architecture (`# lab-needs: other-arch`: bad input).
other=""
for s in "${scenarios[@]}"; do
    f="$s"; [ -f "$f" ] || f="$here/scenarios/$s.sh"
    grep -q '^# lab-needs: other-arch' "$f" 2>/dev/null && other=1
done
if [ -n "$other" ] && [ -z "${LAB_OTHER_SERVER:-}" ]; then
    log "building the $other_machine binaries (a build for the wrong machine)"
    mapfile -t built_other < <("$root/scripts/build-static.sh" "$other_machine" --profile dist)
    [ ${#built_other[@]} -eq 2 ] || die "the $other_machine build did not report two binaries"
    LAB_OTHER_SERVER="${built_other[1]}"
fi

# Guest image (cached by recipe hash).
img_start=$SECONDS
# Each machine its own recipe (and cache key): build-image.sh amd64, build-image-arm64.sh arm64.
recipe="$here/guest/build-image.sh"
[ "$LAB_ARCH" = arm64 ] && recipe="$here/guest/build-image-arm64.sh"
image="$("$recipe")" || die "guest image build failed"
log "guest image $image ($((SECONDS - img_start)) s)"

# host_down WORK: names the host processes a hook recorded that are no longer running.
host_down() {
    local f="$1/host.pids" p down=""
    [ -f "$f" ] || return 0
    while read -r p; do
        [ -n "$p" ] && ! kill -0 "$p" 2>/dev/null && down="$down $p"
    done < "$f"
    echo "$down"
}

kill_host_pids() { # kill exactly the processes a host hook recorded
    local f="$1/host.pids" p
    [ -f "$f" ] || return 0
    while read -r p; do
        [ -n "$p" ] && kill "$p" 2>/dev/null || true
    done < "$f"
}

# machine WORK PHASE [SLOT]: the guest machine's qemu arguments, into the array qargs. A
# boot, the snapshot and a restore all use this one definition: a saved guest restores only
# into the machine it was saved from. SLOT: boot from slot A's root (/dev/vda, the default)
# or slot B's (the last virtio disk, with `lab-needs: slot-b`).
# The small initrd (guest/initrd-init) mounts the root and hands over to systemd.
# no_timer_check: on a loaded host a TCG guest's kernel can miss its IO-APIC timer check and
# panic before userspace ("IO-APIC + timer doesn't work!"), as cloud images also avoid.
machine() {
    local work="$1" phase="$2" slot="${3:-a}" data_drive=() slot_drive=()
    local rootdev=/dev/vda letters=(a b c d e) mode=rw
    [ "$phase" != main ] && [ "${root_ro:-0}" = 1 ] && mode=ro
    [ -f "$work/data.img" ] && data_drive=(-drive "file=$work/data.img,format=raw,if=virtio")
    if [ -f "$work/root-b.qcow2" ]; then
        slot_drive=(-drive "file=$work/root-b.qcow2,format=qcow2,if=virtio")
        [ "$slot" = b ] && rootdev="/dev/vd${letters[$((2 + ${#data_drive[@]} / 2))]}"
    fi
    local monitor=(-monitor none)
    [ "$usb" = 1 ] && monitor=(-monitor "unix:$work/monitor.sock,server=on,wait=off" -device "qemu-xhci,id=xhci")
    [ "$usb" = snapshot ] && monitor=(-monitor "unix:$work/monitor.sock,server=on,wait=off")
    # shellcheck disable=SC2054 # qemu's own commas
    qargs=("${machine_args[@]}" -accel tcg -smp "${LAB_SMP:-2}" -m 1024
        -nodefaults -no-user-config -display none "${monitor[@]}" -no-reboot
        -kernel "$image/vmlinuz" -initrd "$image/initrd-small.img"
        -append "console=$tty root=$rootdev $mode quiet no_timer_check systemd.show_status=0 panic=-1 svc.lab.phase=$phase svc.lab.slot=$slot$kernel_args"
        -drive "file=$work/root.qcow2,format=qcow2,if=virtio"
        -drive "file=$work/lab.img,format=raw,if=virtio"
        "${data_drive[@]}" "${slot_drive[@]}"
        -netdev user,id=n0 -device virtio-net-pci,netdev=n0
        -device virtio-rng-pci
        -serial "file:$work/console-$phase.log")
}

# boot WORK PHASE TIMEOUT POWERCUT [SLOT [STATE]]: boots the scenario's disks once (from
# SLOT, default a), or with STATE restores the saved guest onto them. Sets boot_result to poweroff, powercut or timeout,
# boot_wall to the seconds qemu ran and boot_start to the seconds until the runner started.
boot() {
    local work="$1" phase="$2" limit="$3" powercut="$4" slot="${5:-a}" state="${6:-}"
    local console="$work/console-$phase.log" start=$SECONDS incoming=()
    : > "$console"
    machine "$work" "$phase" "$slot"
    [ -n "$state" ] && incoming=(-incoming "exec:cat '$state'")
    "$qemu" "${qargs[@]}" "${incoming[@]}" > "$work/qemu-$phase.log" 2>&1 &
    local qpid=$!
    boot_result=poweroff; boot_start=""; local end=""
    while kill -0 "$qpid" 2>/dev/null; do
        if [ -z "$boot_start" ] && grep -q '@@LAB-START@@' "$console"; then
            boot_start=$((SECONDS - start))
        fi
        if [ -z "$end" ] && grep -q '@@LAB-END@@' "$console"; then end=$SECONDS; fi
        if [ "$powercut" = 1 ] && grep -q '@@POWERCUT@@' "$console"; then
            kill -KILL "$qpid" 2>/dev/null || true
            boot_result=powercut
            break
        fi
        if [ $((SECONDS - start)) -ge "$limit" ]; then
            kill -KILL "$qpid" 2>/dev/null || true
            boot_result=timeout
            break
        fi
        sleep 0.5
    done
    wait "$qpid" 2>/dev/null || true
    boot_wall=$((SECONDS - start))
    boot_down=""
    if [ -n "$end" ]; then boot_down=$((SECONDS - end)); fi
}

# hmp WORK COMMAND: one command to the guest's QEMU monitor ($WORK/monitor.sock); prints
# QEMU's answer.
hmp() { python3 "$here/hmp.py" "$1" "$2"; }

# make_snapshot DIR: boots the guest once with a waiting runner (guest/snapshot-wait.sh)
# and saves it, up and idle, into DIR: root.qcow2 (its disk) and state (its memory and
# devices). Scenarios then restore it instead of booting (see LAB_SNAPSHOT above). Writes
# DIR/status: "ok" or "failed: REASON".
make_snapshot() {
    local dir="$1" start=$SECONDS reason=""
    mkdir -p "$dir/stage"
    cp "$here/guest/snapshot-wait.sh" "$dir/stage/guest-run.sh"
    mke2fs -q -t ext4 -d "$dir/stage" -L labwait "$dir/lab.img" 512M > /dev/null
    qemu-img create -q -f qcow2 -b "$image/base.img" -F raw "$dir/root.qcow2"
    usb=snapshot; machine "$dir" main; usb=0
    : > "$dir/console-main.log"
    "$qemu" "${qargs[@]}" > "$dir/qemu.log" 2>&1 &
    local qpid=$!
    while ! grep -q '@@LAB-READY@@' "$dir/console-main.log"; do
        if ! kill -0 "$qpid" 2>/dev/null; then reason="qemu exited before the guest was up"; break; fi
        if [ $((SECONDS - start)) -ge 600 ]; then reason="the guest was not up within 600 s"; break; fi
        sleep 0.5
    done
    if [ -z "$reason" ]; then
        # Not stopped first: a guest saved as stopped restores stopped. The migration ends
        # with the guest stopped and its disks flushed, so disk and memory agree.
        hmp "$dir" "migrate -d \"exec:cat > $dir/state\"" > /dev/null
        while :; do
            local st
            st="$(hmp "$dir" "info migrate" | sed -n 's/^Migration status: *//p' | tr -d '\r')"
            case "$st" in
                completed) break ;;
                failed|cancelled|"") reason="saving the guest failed (migration status '${st:-none}')"; break ;;
            esac
            if [ $((SECONDS - start)) -ge 900 ]; then reason="saving the guest took over 900 s"; break; fi
            sleep 0.5
        done
    fi
    # quit, not kill: the disk's last metadata is written on the way out.
    [ -z "$reason" ] && hmp "$dir" quit > /dev/null 2>&1
    local waited=0
    while kill -0 "$qpid" 2>/dev/null && [ $waited -lt 60 ]; do sleep 0.5; waited=$((waited + 1)); done
    kill -KILL "$qpid" 2>/dev/null || true
    wait "$qpid" 2>/dev/null || true
    if [ -n "$reason" ]; then
        echo "failed: $reason; console: $(tail -n 5 "$dir/console-main.log" | tr '\n' ' ')" > "$dir/status"
        return 1
    fi
    rm -f "$dir/lab.img"
    echo "ok $((SECONDS - start)) s, $(($(stat -c %s "$dir/state") / 1048576)) MiB saved" > "$dir/status"
}

# next_slot PHASE: the slot the phase asked the next boot to use (its last @@SLOT@@ line), or
# the one it booted from.
next_slot() {
    local s
    s="$(grep -ao '@@SLOT@@ [ab]' "$work/console-$1.log" 2>/dev/null | tail -n1 | cut -d' ' -f2 || true)"
    echo "${s:-$slot_now}"
}

# field FILE KEY: a key=value from a timing file.
field() { sed -n "s/^$2=//p" "$1" 2>/dev/null | head -n1 || true; }

report_failure() {
    local work="$1" ph
    for ph in main after final fourth; do
        [ -d "$work/out/$ph" ] || [ -f "$work/console-$ph.log" ] || continue
        echo "---- $ph: scenario log"
        cat "$work/out/$ph/log.txt" 2>/dev/null || echo "(none on the lab disk)"
        echo "---- $ph: agent state"
        cat "$work/out/$ph/state.txt" 2>/dev/null || echo "(none)"
        echo "---- $ph: journal (last 200 lines; full: $work/out/$ph/journal.txt)"
        tail -n 200 "$work/out/$ph/journal.txt" 2>/dev/null || echo "(none)"
        echo "---- $ph: serial console (last 60 lines; full: $work/console-$ph.log)"
        tail -n 60 "$work/console-$ph.log" 2>/dev/null || true
    done
    echo "---- run folder kept: $work"
}

if [ -n "$snapshot_dir" ]; then
    make_snapshot "$snapshot_dir" || true
    cat "$snapshot_dir/status"
    grep -q '^ok' "$snapshot_dir/status"
    exit
fi

passed=0; failed=0
for name in "${scenarios[@]}"; do
    t_start=$SECONDS
    # A name means scenarios/<name>.sh; a path (e.g. pending/x.sh) runs that file.
    case "$name" in
        */*|*.sh) script="$(cd "$(dirname "$name")" 2>/dev/null && pwd)/$(basename "$name")"
                  name="$(basename "$name" .sh)"
                  sdir="$(dirname "$script")" ;;
        *) script="$here/scenarios/$name.sh"; sdir="$here/scenarios" ;;
    esac
    if [ ! -f "$script" ]; then
        echo "FAIL $name: no such scenario ($script)"; failed=$((failed + 1)); continue
    fi
    after="$sdir/$name.after.sh"; powercut=0; [ -f "$after" ] && powercut=1
    final="$sdir/$name.final.sh"; third=0; [ "$powercut" = 1 ] && [ -f "$final" ] && third=1
    fourth="$sdir/$name.fourth.sh"; four=0; [ "$third" = 1 ] && [ -f "$fourth" ] && four=1
    hook="$sdir/$name.host.sh"
    limit="$(sed -n 's/^# lab-timeout: *\([0-9]\+\).*/\1/p' "$script" | head -n1)"; limit="${limit:-480}"
    [ "$LAB_ARCH" = amd64 ] || limit=$((limit * 2))
    usb=0; grep -q '^# lab-needs: usb' "$script" && usb=1
    root_ro=0; grep -q '^# lab-root: ro' "$script" && root_ro=1

    mkdir -p "$LAB_CACHE/runs"
    work="$(mktemp -d "$LAB_CACHE/runs/$shown$name.XXXXXX")"
    stage="$work/stage"
    mkdir -p "$stage/bin" "$stage/share" "$stage/out"
    cp "$here/guest/guest-run.sh" "$here/guest/lab-lib.sh" "$stage/"
    cp "$script" "$stage/scenario.sh"
    [ "$powercut" = 1 ] && cp "$after" "$stage/after.sh"
    [ "$third" = 1 ] && cp "$final" "$stage/final.sh"
    [ "$four" = 1 ] && cp "$fourth" "$stage/fourth.sh"
    cp "$LAB_AGENT" "$stage/bin/svc-agent"; cp "$LAB_SERVER" "$stage/bin/svc-server"
    echo "$name" > "$stage/name"
    od -An -N8 -tx1 /dev/urandom | tr -d ' \n' > "$stage/run-id"
    # What the guest should see from the binaries, measured on the host (an aarch64 build
    # runs here through qemu-user's binfmt handler).
    "$LAB_AGENT" version --json > "$stage/share/expected-agent-version.json"
    if [ -n "$LAB_V2" ] && grep -q '^# lab-needs: v2' "$script"; then
        mkdir -p "$stage/share/v2"
        # shellcheck disable=SC2086 # two paths
        cp $LAB_V2 "$stage/share/v2/"
    fi
    if grep -q '^# lab-needs: other-arch' "$script"; then
        mkdir -p "$stage/share/other-arch"
        cp "$LAB_OTHER_SERVER" "$stage/share/other-arch/svc-server"
        echo "$other_machine" > "$stage/share/other-arch/machine"
    fi

    reason=""; after_result=""; state=""; main_start=""; main_down=""
    if [ -f "$hook" ]; then
        log "$name: host hook"
        if ! LAB_WORK="$work" LAB_SHARE="$stage/share" bash "$hook" > "$work/host-hook.log" 2>&1; then
            reason="host side: hook failed: $(tail -n 5 "$work/host-hook.log")"
        elif [ -n "$(host_down "$work")" ]; then
            reason="host side: a server the hook started exited before the boot:$(host_down "$work")"
        fi
    fi

    if [ -z "$reason" ]; then
        # A scenario with the standard machine restores the saved guest when there is one;
        # one with other devices (USB, a data disk, slot B) or marked fresh-boot boots.
        state=""
        if [ -n "${LAB_SNAPSHOT:-}" ] && [ "$usb" = 0 ] && ! grep -q -E '^# lab-needs: (data-disk|slot-b)' "$script" \
            && ! grep -q '^# lab-needs: fresh-boot' "$script"; then
            waited=0
            while [ ! -f "$LAB_SNAPSHOT/status" ] && [ $waited -lt 1800 ]; do sleep 1; waited=$((waited + 1)); done
            if grep -q '^ok' "$LAB_SNAPSHOT/status" 2>/dev/null; then
                state="$LAB_SNAPSHOT/state"
                # After the wait: the restored guest takes this as its clock.
                date +%s > "$stage/host-epoch"
            else
                log "$name: WARNING: no saved guest ($(cat "$LAB_SNAPSHOT/status" 2>/dev/null || echo 'not made')); booting"
            fi
        fi
        # 512 MB, or more for a larger stage (os-rauc-bad-gate's two bundles): a quarter over
        # its bytes and 64 MB for the file system and what the phases write.
        lab_mb="$(du -sm --apparent-size "$stage" | cut -f1)"
        lab_mb=$((lab_mb + lab_mb / 4 + 64)); [ "$lab_mb" -ge 512 ] || lab_mb=512
        mke2fs -q -t ext4 -d "$stage" -L lab "$work/lab.img" "${lab_mb}M" > /dev/null
        if [ -n "$state" ]; then
            qemu-img create -q -f qcow2 -b "$LAB_SNAPSHOT/root.qcow2" -F qcow2 "$work/root.qcow2"
        else
            qemu-img create -q -f qcow2 -b "$image/base.img" -F raw "$work/root.qcow2"
        fi
        if grep -q '^# lab-needs: data-disk' "$script"; then
            dsize="$(sed -n 's/^# lab-data-size: *\([0-9]\+[MG]\).*/\1/p' "$script" | head -n1)"
            mke2fs -q -t ext4 -L svcdata "$work/data.img" "${dsize:-256M}" > /dev/null
        fi
        if grep -q '^# lab-needs: slot-b' "$script"; then
            qemu-img create -q -f qcow2 -b "$image/base.img" -F raw "$work/root-b.qcow2"
        fi
        slot_now=a; final_result=""; fourth_result=""
        how=booting; [ -n "$state" ] && how="restoring the saved guest"
        log "$name: $how (main phase, limit ${limit}s)"
        boot "$work" main "$limit" "$powercut" a "$state"; main_result=$boot_result; main_wall=$boot_wall
        main_start=$boot_start; main_down=$boot_down
        if [ "$powercut" = 1 ] && [ "$main_result" = powercut ]; then
            slot_now="$(next_slot main)"
            log "$name: power cut after ${main_wall}s; booting again (after phase, slot $slot_now)"
            boot "$work" after "$limit" "$third" "$slot_now"; after_result=$boot_result
            if [ "$third" = 1 ] && [ "$after_result" = powercut ]; then
                slot_now="$(next_slot after)"
                log "$name: power cut after ${boot_wall}s; booting again (final phase, slot $slot_now)"
                boot "$work" final "$limit" "$four" "$slot_now"; final_result=$boot_result
                if [ "$four" = 1 ] && [ "$final_result" = powercut ]; then
                    slot_now="$(next_slot final)"
                    log "$name: power cut after ${boot_wall}s; booting again (fourth phase, slot $slot_now)"
                    boot "$work" fourth "$limit" 0 "$slot_now"; fourth_result=$boot_result
                fi
            fi
        fi
        # rdump refuses an existing target folder: $work/out is made by it.
        debugfs -R "rdump /out $work" "$work/lab.img" > /dev/null 2>&1 || true

        rc_main="$(cat "$work/out/main/rc" 2>/dev/null || echo none)"
        if [ "$powercut" = 1 ]; then
            rc_after="$(cat "$work/out/after/rc" 2>/dev/null || echo none)"
            if [ "$main_result" = timeout ]; then reason="main phase: no @@POWERCUT@@ within ${limit}s"
            elif [ "$main_result" != powercut ] && [ "$rc_main" != 0 ]; then reason="main phase rc=$rc_main"
            elif [ "$main_result" != powercut ]; then reason="main phase passed but never asked for the power cut"
            elif [ "$after_result" = timeout ]; then reason="after phase timed out after ${limit}s"
            elif [ "$third" = 0 ] && [ "$rc_after" != 0 ]; then reason="after phase rc=$rc_after"
            elif [ "$third" = 1 ] && [ "$after_result" != powercut ] && [ "$rc_after" != 0 ]; then reason="after phase rc=$rc_after"
            elif [ "$third" = 1 ] && [ "$after_result" != powercut ]; then reason="after phase passed but never asked for the power cut"
            elif [ "$third" = 1 ] && [ "$final_result" = timeout ]; then reason="final phase timed out after ${limit}s"
            elif [ "$four" = 1 ] && [ "$final_result" != powercut ] && [ "$(cat "$work/out/final/rc" 2>/dev/null || echo none)" != 0 ]; then
                reason="final phase rc=$(cat "$work/out/final/rc" 2>/dev/null || echo none)"
            elif [ "$four" = 1 ] && [ "$final_result" != powercut ]; then reason="final phase passed but never asked for the power cut"
            elif [ "$four" = 1 ] && [ "$fourth_result" = timeout ]; then reason="fourth phase timed out after ${limit}s"
            elif [ "$four" = 1 ] && [ "$(cat "$work/out/fourth/rc" 2>/dev/null || echo none)" != 0 ]; then
                reason="fourth phase rc=$(cat "$work/out/fourth/rc" 2>/dev/null || echo none)"
            elif [ "$four" = 0 ] && [ "$third" = 1 ] && [ "$(cat "$work/out/final/rc" 2>/dev/null || echo none)" != 0 ]; then
                reason="final phase rc=$(cat "$work/out/final/rc" 2>/dev/null || echo none)"
            fi
        else
            if [ "$main_result" = timeout ]; then reason="timed out after ${limit}s"
            elif [ "$rc_main" != 0 ]; then reason="scenario rc=$rc_main"
            fi
        fi
    fi
    # A host server that died during the run is the host's failure, not the guest's.
    gone="$(host_down "$work")"
    if [ -n "$gone" ]; then
        reason="${reason:+$reason; }host side: a server the hook started died during the run:$gone ($(tail -n 3 "$work/host-http.log" 2>/dev/null | tr '\n' ' '))"
    fi
    kill_host_pids "$work"

    detail=""
    for ph in main after final fourth; do
        [ -f "$work/console-$ph.log" ] || continue
        # Boot time: the guest's uptime when the runner started (from the console, which
        # survives a power cut); scenario time from the lab disk when the phase finished.
        up="$(sed -n "s/.*@@LAB-START@@ .* uptime=\([0-9.]*\).*/\1/p" "$work/console-$ph.log" | head -n1 || true)"
        sc="$(field "$work/out/$ph/timing.txt" scenario_s)"
        if [ "$ph" = main ] && [ -n "$state" ]; then
            # A restored guest's uptime counts the saved boot: the host's clock says more.
            detail="$detail${detail:+; }$ph: restored ${main_start:-?}s${sc:+, scenario ${sc}s}${main_down:+, off ${main_down}s}"
        else
            detail="$detail${detail:+; }$ph: boot ${up:-?}s${sc:+, scenario ${sc}s}"
        fi
    done
    detail="$detail, wall $((SECONDS - t_start))s"
    if [ -z "$reason" ]; then
        echo "PASS $shown$name ($detail)"
        passed=$((passed + 1))
        [ "${LAB_KEEP:-0}" = 1 ] || rm -f "$work/root.qcow2" "$work/root-b.qcow2" "$work/lab.img" "$work/data.img"
    else
        echo "FAIL $shown$name: $reason ($detail)"
        # The check that failed, first: a CI log may keep only the head of what follows.
        for ph in main after final fourth; do
            f="$(grep -ahm1 'LAB-FAIL' "$work/out/$ph/log.txt" "$work/console-$ph.log" 2>/dev/null | head -n1 || true)"
            if [ -n "$f" ]; then echo "  $ph: $f"; fi
        done
        report_failure "$work"
        failed=$((failed + 1))
    fi
done
echo "system: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
