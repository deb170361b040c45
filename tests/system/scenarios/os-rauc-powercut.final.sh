#!/bin/bash
# The first boot of slot B: the gate begins and waits for the app (away); the power is cut
# before it passes. The agent's lines of this boot stay queued.
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_data_mounted
lab_check "booted slot B ($LAB_SLOT_B_DEV)" lab_booted_from b "$LAB_SLOT_B_DEV"
lab_check "slot B runs OS 2.0.0-lab" test "$(cat /etc/lab-os-version)" = 2.0.0-lab
lab_wait 180 "svc-agent.service active on slot B" systemctl is-active --quiet svc-agent.service
lab_wait 300 "the gate began" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "OS 2.0.0-lab booted from slot rootfs.1: its health gate begins"'
lab_check "the gate has not passed (the app is away)" sh -c \
    '! journalctl -b -u svc-agent -o cat | grep -q "passed its health gate"'
lab_check "the agent's state: the gate" grep -qi '"gate"' /data/svc/os.json
lab_powercut
