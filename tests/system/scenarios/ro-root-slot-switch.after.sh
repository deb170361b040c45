#!/bin/bash
# Booted "slot B" (image agent 0.2.0, data partition with 0.1.x): the seed makes 0.2.0 the
# current version on probation, it proves healthy. Then back to slot A (image agent 0.1.x):
# 0.2.0 keeps running (no downgrade), the records and credentials are untouched.
set -euo pipefail
. "$LAB/lab-lib.sh"
v1=$(cat /data/lab/v1)
lab_check "the root booted read-only" lab_root_ro
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

# Back to slot A (an A/B fallback): the older image agent must not replace 0.2.0.
lab_ro_slot /lab/bin/svc-agent
lab_check "restart as a boot of slot A would" systemctl restart svc-agent.service
lab_wait 120 "svc-agent.service active on slot A" systemctl is-active --quiet svc-agent.service
lab_check "0.2.0 still runs (no downgrade)" lab_agent_is /data/svc/cache/svc-agent-0.2.0
lab_check "the seed said why" sh -c \
    "journalctl -b -u svc-agent -o cat | grep -q 'the image.s svc-agent $v1 is not newer than 0.2.0 in /data/svc: 0.2.0 keeps running'"
lab_check "the credentials are untouched" sha256sum -c --quiet /data/lab/creds.sha
lab_check "versions.json still current 0.2.0" grep -q '"current": "0.2.0"' /data/svc/versions.json
lab_check "nothing in /opt/svc" test ! -e /opt/svc
