#!/bin/bash
# Booted slot B, written by RAUC from the bundle: the agent (from the data partition) sees the
# new slot, runs the health gate (svc-server through its probation, the app reached), marks the
# slot good through RAUC and reports OS 2.0.0-lab. Prints the figures.
# Then the hawkBit phase: the machine joins gooseBit on the host (`svc-agent hawkbit join`,
# board svc-lab-amd64: RAUC's compatible string, by which gooseBit's rollout of OS 2.0.2-lab
# reaches it), takes the deployment through the same OS engine, RAUC writes slot A, the agent
# asks for the reboot: gooseBit must not show the action Finished yet. final.sh: the gate.
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_data_mounted
lab_check "booted slot B ($LAB_SLOT_B_DEV)" lab_booted_from b "$LAB_SLOT_B_DEV"
lab_check "slot B runs OS 2.0.0-lab (the bundle's image)" test "$(cat /etc/lab-os-version)" = 2.0.0-lab
lab_wait 180 "svc-agent.service active on slot B" systemctl is-active --quiet svc-agent.service
lab_wait 400 "the gate passed, slot marked good" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "OS 2.0.0-lab passed its health gate: slot rootfs.1 marked good"'
t_good=$(journalctl -b -u svc-agent -o short-unix --no-pager | grep "passed its health gate" | head -n1 | cut -d. -f1)
rauc status --detailed --output-format=json || true
lab_check "RAUC: booted rootfs.1" test "$(lab_rauc_slot_field rootfs.1 state)" = booted
lab_check "RAUC: rootfs.1 is good" test "$(lab_rauc_slot_field rootfs.1 boot_status)" = good
lab_check "RAUC: rootfs.1 holds bundle 2.0.0-lab" test "$(lab_rauc_slot_field rootfs.1 bundle.version)" = 2.0.0-lab
lab_wait 120 "the status reports OS 2.0.0-lab on rootfs.1" python3 -c '
import json, sys
o = json.load(open("/var/lib/lab/mgmt/status.json")).get("os") or {}
print(o); sys.exit(0 if o.get("version") == "2.0.0-lab" and o.get("booted_slot") == "rootfs.1" and o.get("state") == "idle" else 1)'
size=$(python3 -c 'import json; print(json.load(open("/var/lib/lab/mgmt/poll.json"))["targets"]["os"]["size"])')
lab_log "figures: offer to marked good $((t_good - $(cat /data/lab/t-offer))) s (offer to reboot asked $(( $(cat /data/lab/t-reboot) - $(cat /data/lab/t-offer) )) s), bundle $size bytes downloaded"

# ---- the same good image as a gooseBit deployment (os-rauc-good.final.sh ends it) ----
. /lab/share/goosebit.env
printf 'lab-goosebit-token\n' > /tmp/hawkbit.token
date +%s > /data/lab/t-gb-offer
lab_check "the machine joins gooseBit as board svc-lab-amd64" env SVC_STATE_DIR=/data/svc SVC_CREDENTIALS_DIR=/data/etc \
    /usr/lib/svc-agent/svc-agent hawkbit join --url "http://10.0.2.2:$GB_PORT" --tenant DEFAULT \
    --controller-id lab-rauc --board svc-lab-amd64 --token-file /tmp/hawkbit.token
lab_wait 120 "gooseBit registered the device with the board svc-lab-amd64" lab_goosebit_device hardware.model svc-lab-amd64
lab_wait 900 "the agent asked for the reboot into slot A (gooseBit's OS 2.0.2-lab)" lab_rauc_reboot_asked
date +%s > /data/lab/t-gb-reboot
journalctl -b -u svc-agent -o short-unix --no-pager | grep -E 'OS 2.0.2|hawkBit|told the server|rebooting' || true
lab_check "RAUC made slot A primary" test "$(/usr/lib/lab/rauc-lab-boot get-primary)" = a
lab_goosebit_device || true
lab_check "gooseBit: the action is Running, not Finished, before the reboot and the gate" lab_goosebit_device last_state Running
lab_check "no success told before the reboot" sh -c '! journalctl -b -u svc-agent -o cat | grep -q "told the server Success"'
sync
lab_rauc_reboot
