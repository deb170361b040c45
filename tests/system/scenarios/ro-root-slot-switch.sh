#!/bin/bash
# A simulated A/B slot switch on a read-only root (issue 23): slot A's image ships the
# agent 0.1.x, seeded onto the empty data partition at the first start. Then the machine
# "boots slot B", whose image brings svc-agent 0.2.0 (the image's binary replaced while the
# root is briefly writable, then a power cut). Phase 2 (ro-root-slot-switch.after.sh): the
# newer image agent becomes current on probation and proves healthy; a switch back to slot A
# (the older image agent) keeps 0.2.0 running, with the state untouched.
# lab-timeout: 480
# lab-needs: v2
# lab-needs: data-disk
set -euo pipefail
. "$LAB/lab-lib.sh"

v1=$(svc-agent version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
lab_ro_image /lab/bin/svc-agent
mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
cat > "$mgmt/poll.json" <<JSON
{"config": {"components": [], "modules": [], "agent": {"svc-server": {"disable_subsystem": true}}},
 "poll_interval_secs": 5}
JSON
lab_ro_credentials "$mgmt"
echo "$v1" > /data/lab/v1

lab_check "start the image's unit (slot A)" systemctl start svc-agent.service
lab_wait 120 "the image's agent $v1 runs from /data" lab_agent_is "/data/svc/cache/svc-agent-$v1"
lab_wait 120 "it proved healthy (known-good link)" test -L /data/svc/bin/svc-agent.stable
lab_wait 60 "status.json reached the app" test -s "$mgmt/status.json"
sha256sum /data/etc/svc.json > /data/lab/creds.sha

# Slot B: its image brings svc-agent 0.2.0.
lab_ro_slot /lab/share/v2/svc-agent
lab_check "slot B's image agent is 0.2.0" sh -c "$LAB_RO_AGENT version --json | grep -q '\"version\":\"0.2.0\"'"
lab_powercut
