#!/bin/bash
# Slot B again after the cut in its first boot: the gate starts over, the app is back, the
# gate passes, RAUC marks rootfs.1 good, the status reports 2.0.0-lab; the lines every agent
# process queued (slot A before the first cut and after it, slot B's first boot) arrived once.
set -euo pipefail
. "$LAB/lab-lib.sh"
app=$LAB_RAUC_APP
lab_data_mounted
lab_check "booted slot B again ($LAB_SLOT_B_DEV)" lab_booted_from b "$LAB_SLOT_B_DEV"
rmdir "$app/logs.jsonl"
mv "$app/poll.json.held" "$app/poll.json"
lab_wait 180 "svc-agent.service active on slot B" systemctl is-active --quiet svc-agent.service
lab_wait 400 "the gate passed, slot marked good" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "OS 2.0.0-lab passed its health gate: slot rootfs.1 marked good"'
journalctl -b -u svc-agent -o short-unix --no-pager | grep -E 'OS ' || true
lab_check "the gate began again on this boot" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "its health gate begins"'
lab_check "RAUC: booted rootfs.1" test "$(lab_rauc_slot_field rootfs.1 state)" = booted
lab_check "RAUC: rootfs.1 is good" test "$(lab_rauc_slot_field rootfs.1 boot_status)" = good
lab_wait 120 "the status reports OS 2.0.0-lab on rootfs.1" python3 -c "
import json, sys
o = json.load(open('$app/status.json')).get('os') or {}
print(o); sys.exit(0 if o.get('version') == '2.0.0-lab' and o.get('booted_slot') == 'rootfs.1' and o.get('state') == 'idle' else 1)"
lab_wait 300 "slot B's first boot's queued lines arrived (its gate began twice)" \
    lab_rauc_shipped "$app" "its health gate begins" 2
lab_wait 300 "this boot's gate result shipped" lab_rauc_shipped "$app" "passed its health gate" 1
lab_check "every queued line of the four boots arrived once, in order" lab_rauc_log_whole "$app"
lab_check "svc-server runs on slot B" pgrep -f 'svc-server --config'
