#!/bin/bash
# Runs inside the guest (started by lab.service through /usr/local/sbin/lab-boot), from the
# lab disk mounted at /lab. Runs one phase of one scenario and leaves its results in
# /lab/out/<phase>/: rc, log.txt, journal.txt, state.txt, timing.txt. The phase comes from
# the kernel command line (svc.lab.phase=main|after|final|fourth), set by the harness.
set -u
phase="$(sed -n 's/.*svc\.lab\.phase=\([a-z]*\).*/\1/p' /proc/cmdline)"
phase="${phase:-main}"
name="$(cat /lab/name)"
out="/lab/out/$phase"
mkdir -p "$out"
export LAB=/lab LAB_OUT="$out" LAB_PHASE="$phase" LAB_SHARE=/lab/share LAB_NAME="$name"
export PATH="/lab/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# shellcheck source=lab-lib.sh
. /lab/lab-lib.sh

script=/lab/scenario.sh
[ "$phase" = after ] && script=/lab/after.sh
[ "$phase" = final ] && script=/lab/final.sh
[ "$phase" = fourth ] && script=/lab/fourth.sh
up_start="$(cut -d' ' -f1 /proc/uptime)"
console "@@LAB-START@@ $name $phase uptime=$up_start"

# The scenario's output goes to the lab disk and, live, to the serial console (the disk copy
# of a power-cut phase may be lost with the cut).
bash "$script" 2>&1 | tee "$out/log.txt" > "$LAB_TTY"
rc=${PIPESTATUS[0]}
up_end="$(cut -d' ' -f1 /proc/uptime)"

journalctl -b -o short-precise --no-pager > "$out/journal.txt" 2>&1
if [ "$phase" != main ]; then
    journalctl -b -1 -o short-precise --no-pager > "$out/journal-previous-boot.txt" 2>&1
fi
lab_agent_state > "$out/state.txt" 2>&1
{
    echo "boot_to_runner_s=$up_start"
    echo "scenario_s=$(awk -v a="$up_start" -v b="$up_end" 'BEGIN{printf "%.1f", b-a}')"
    # systemd-analyze cannot answer while this unit is still starting; read the stamps.
    mono() { systemctl show -p "$2" --value "$1" 2>/dev/null | awk '{printf "%.1f", $1/1000000}'; }
    # kernel + initrd, then systemd to multi-user.target and NetworkManager.
    echo "userspace_start_s=$(systemctl show -p UserspaceTimestampMonotonic --value | awk '{printf "%.1f", $1/1000000}')"
    echo "multi_user_s=$(mono multi-user.target ActiveEnterTimestampMonotonic)"
    echo "network_manager_s=$(mono NetworkManager.service ActiveEnterTimestampMonotonic)"
} > "$out/timing.txt"
echo "$rc" > "$out/rc"
sync
console "@@LAB-END@@ $name $phase rc=$rc"
# Power off now: a clean shutdown takes 10-15 s of emulated time and checks nothing. The lab
# disk goes read-only first, which writes its journal home, so the harness (debugfs, which
# does not replay a journal) reads every result; if that fails, lab-boot shuts down cleanly.
if mount -o remount,ro /lab; then
    echo o > /proc/sysrq-trigger
fi
