#!/bin/bash
# Booted slot B (the second root disk; image agent 0.2.0) with the data partition of slot A
# (0.1.x): the seed makes 0.2.0 the current version on probation, it proves healthy. Then the
# boot slot goes back to A (phase 3, ro-root-slot-switch.final.sh).
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_data_mounted
v1=$(cat /data/lab/v1)
lab_check "booted slot B: the second root disk ($LAB_SLOT_B_DEV)" lab_booted_from b "$LAB_SLOT_B_DEV"
lab_check "the root booted read-only" lab_root_ro
lab_check "slot B's image agent is 0.2.0" lab_image_agent_is 0.2.0
lab_wait 180 "svc-agent.service active on slot B" systemctl is-active --quiet svc-agent.service
lab_wait 60 "slot B's agent 0.2.0 runs from /data" lab_agent_is /data/svc/cache/svc-agent-0.2.0
lab_check "the seed upgraded from the image" sh -c \
    "journalctl -b -u svc-agent -o cat | grep -q 'the image brings svc-agent 0.2.0, newer than $v1 in /data/svc'"
lab_check "on probation first" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "svc-agent 0.2.0 on probation: start 1 of 3"'
lab_wait 60 "0.2.0 proved healthy: the stable link moved" \
    sh -c '[ "$(readlink /data/svc/bin/svc-agent.stable)" = ../cache/svc-agent-0.2.0 ]'
lab_check "the data partition's $v1 is kept for a rollback" test -x "/data/svc/cache/svc-agent-$v1"
lab_check "versions.json: current 0.2.0, previous $v1" python3 -c "
import json, sys
r = json.load(open('/data/svc/versions.json'))['svc-agent']
sys.exit(0 if r['current'] == '0.2.0' and r['previous'] == '$v1' else 1)"
lab_check "the credentials are untouched" sha256sum -c --quiet /data/lab/creds.sha
rm -f /var/lib/lab/mgmt/status.json
lab_wait 60 "0.2.0 reports to the app from slot B" test -s /var/lib/lab/mgmt/status.json

# Back to slot A (an A/B fallback): the older image agent must not replace 0.2.0.
journalctl --sync 2>/dev/null || true
lab_boot_slot a
lab_powercut
