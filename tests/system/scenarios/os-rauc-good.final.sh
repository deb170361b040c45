#!/bin/bash
# os-rauc-good's hawkBit phase, ended (after.sh began it): booted slot A, written by RAUC from
# the bundle gooseBit deployed (OS 2.0.2-lab); the agent (from the data partition, its cached
# config naming gooseBit with board svc-lab-amd64) runs the health gate, marks rootfs.0 good,
# and only then tells gooseBit closed + success: gooseBit shows the device Finished.
# Prints the gooseBit route's figures (offer to closed + success, bytes downloaded).
set -euo pipefail
. "$LAB/lab-lib.sh"
. /lab/share/goosebit.env
lab_data_mounted
lab_check "booted slot A (/dev/vda)" lab_booted_from a /dev/vda
lab_check "slot A runs OS 2.0.2-lab (gooseBit's bundle)" test "$(cat /etc/lab-os-version)" = 2.0.2-lab
lab_wait 180 "svc-agent.service active on slot A" systemctl is-active --quiet svc-agent.service
lab_wait 400 "the gate passed, slot rootfs.0 marked good" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "OS 2.0.2-lab passed its health gate: slot rootfs.0 marked good"'
lab_wait 300 "the agent told gooseBit closed + success" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "told the server Success"'
journalctl -b -u svc-agent -o short-unix --no-pager | grep -E 'OS 2.0.2|hawkBit|told the server' || true
lab_check "success told only after the gate" python3 -c '
import subprocess, sys
log = subprocess.run(["journalctl", "-b", "-u", "svc-agent", "-o", "cat"], capture_output=True, text=True).stdout
g, s = log.find("passed its health gate"), log.find("told the server Success")
sys.exit(0 if 0 <= g < s else 1)'
lab_wait 120 "gooseBit shows the device Finished" lab_goosebit_device last_state Finished
lab_goosebit_device || true
rauc status --detailed --output-format=json || true
lab_check "RAUC: booted rootfs.0" test "$(lab_rauc_slot_field rootfs.0 state)" = booted
lab_check "RAUC: rootfs.0 is good" test "$(lab_rauc_slot_field rootfs.0 boot_status)" = good
lab_check "RAUC: rootfs.0 holds bundle 2.0.2-lab" test "$(lab_rauc_slot_field rootfs.0 bundle.version)" = 2.0.2-lab
t_ok=$(journalctl -b -u svc-agent -o short-unix --no-pager | grep "told the server Success" | head -n1 | cut -d. -f1)
lab_log "figures: gooseBit route: offer (join) to closed + success $((t_ok - $(cat /data/lab/t-gb-offer))) s (to the reboot asked $(( $(cat /data/lab/t-gb-reboot) - $(cat /data/lab/t-gb-offer) )) s), bundle $GB_BUNDLE_SIZE bytes downloaded"
