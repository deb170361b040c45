#!/bin/bash
# Back on slot A: the old OS runs svc-server; the agent sees the rollback and reports OS
# 2.0.1-lab bad with the gate's reason; the offer still stands and is not installed again.
set -euo pipefail
. "$LAB/lab-lib.sh"
app=$LAB_RAUC_APP
lab_data_mounted
lab_check "booted slot A (/dev/vda)" lab_booted_from a /dev/vda
lab_check "slot A still runs OS 1.0.0-lab" test "$(cat /etc/lab-os-version)" = 1.0.0-lab
lab_wait 180 "svc-agent.service active on slot A" systemctl is-active --quiet svc-agent.service
lab_wait 300 "the agent reported the rollback" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "OS 2.0.1-lab rolled back: svc-server crashed"'
lab_wait 300 "the offer is not taken again" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "OS 2.0.1-lab failed before; not retried"'
journalctl -b -u svc-agent -o short-unix --no-pager | grep -E 'OS |svc-server' | head -n 20 || true
lab_wait 120 "the status reports 2.0.1-lab bad, rolled back, slot rootfs.0" python3 -c "
import json, sys
o = json.load(open('$app/status.json')).get('os') or {}
print(o)
r = str(o.get('last_result'))
sys.exit(0 if '2.0.1-lab' in (o.get('bad') or []) and r.startswith('rolled back:') and 'svc-server crashed' in r
         and o.get('booted_slot') == 'rootfs.0' and o.get('state') == 'idle' else 1)"
lab_check "RAUC: booted rootfs.0, primary rootfs.0" \
    test "$(lab_rauc_slot_field rootfs.0 state)/$(lab_rauc_slot_field "" boot_primary)" = booted/rootfs.0
lab_check "RAUC: rootfs.1 stays bad" test "$(lab_rauc_slot_field rootfs.1 boot_status)" = bad
lab_check "RAUC installed nothing on this boot" sh -c '! journalctl -b -u rauc -o cat | grep -q "installing"'
lab_check "svc-server runs on slot A" pgrep -f 'svc-server --config'
lab_check "svc-server was not refused here" sh -c '! journalctl -b -u svc-agent -o cat | grep -q SVC_MACHINE_ID'
lab_check "no reboot asked for on slot A" test ! -e "/var/lib/lab/reboot-$(cat /proc/sys/kernel/random/boot_id)"
