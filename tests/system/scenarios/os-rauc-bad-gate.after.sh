#!/bin/bash
# Slot B, OS 2.0.1-lab: svc-server refuses the image's setting at every start, so the health
# gate fails: RAUC marks rootfs.1 bad (the boot loader's choice goes back to slot A) and the
# agent asks for the reboot back, which the lab makes.
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_data_mounted
lab_check "booted slot B ($LAB_SLOT_B_DEV)" lab_booted_from b "$LAB_SLOT_B_DEV"
lab_check "slot B runs OS 2.0.1-lab (the bad bundle's image)" test "$(cat /etc/lab-os-version)" = 2.0.1-lab
lab_wait 180 "svc-agent.service active on slot B" systemctl is-active --quiet svc-agent.service
lab_wait 400 "the gate failed on svc-server's crashes" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "OS 2.0.1-lab failed its health gate: svc-server crashed"'
journalctl -b -u svc-agent -o short-unix --no-pager | grep -E 'OS |SVC_MACHINE_ID|rolling|reboot' | head -n 20 || true
lab_check "svc-server refused the image's machine id" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "SVC_MACHINE_ID"'
lab_wait 120 "the agent asked for the reboot back" lab_rauc_reboot_asked
rauc status --detailed --output-format=json || true
lab_check "RAUC: rootfs.1 is bad" test "$(lab_rauc_slot_field rootfs.1 boot_status)" = bad
lab_check "the boot loader starts slot A next" test "$(/usr/lib/lab/rauc-lab-boot next)" = a
lab_check "the agent's state: rolling back to rootfs.0" python3 -c '
import json, sys
p = json.dumps(json.load(open("/data/svc/os.json"))["phase"])
print(p); sys.exit(0 if "rolling" in p.lower() and "rootfs.0" in p else 1)'
lab_rauc_reboot
