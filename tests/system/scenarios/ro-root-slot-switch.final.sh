#!/bin/bash
# Booted slot A again (the first root disk; image agent 0.1.x) with the data partition that
# slot B left at 0.2.0: 0.2.0 keeps running (no downgrade, the journal says why), the
# records and credentials are untouched, the agent reports to the app.
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_data_mounted
v1=$(cat /data/lab/v1)
lab_check "booted slot A again (/dev/vda)" lab_booted_from a /dev/vda
lab_check "the root booted read-only" lab_root_ro
lab_check "slot A's image agent is $v1" lab_image_agent_is "$v1"
lab_wait 180 "svc-agent.service active on slot A" systemctl is-active --quiet svc-agent.service
lab_check "0.2.0 still runs from /data (no downgrade)" lab_agent_is /data/svc/cache/svc-agent-0.2.0
lab_check "the seed said why" sh -c \
    "journalctl -b -u svc-agent -o cat | grep -q 'the image.s svc-agent $v1 is not newer than 0.2.0 in /data/svc: 0.2.0 keeps running'"
lab_check "the stable link still names 0.2.0" \
    sh -c '[ "$(readlink /data/svc/bin/svc-agent.stable)" = ../cache/svc-agent-0.2.0 ]'
lab_check "versions.json: still current 0.2.0, previous $v1" python3 -c "
import json, sys
r = json.load(open('/data/svc/versions.json'))['svc-agent']
sys.exit(0 if r['current'] == '0.2.0' and r['previous'] == '$v1' else 1)"
lab_check "the credentials are untouched" sha256sum -c --quiet /data/lab/creds.sha
rm -f /var/lib/lab/mgmt/status.json
lab_wait 60 "0.2.0 reports to the app from slot A" test -s /var/lib/lab/mgmt/status.json
lab_check "nothing in /opt/svc" test ! -e /opt/svc
