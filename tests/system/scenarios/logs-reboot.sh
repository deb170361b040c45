#!/bin/bash
# Logs queued while the management app cannot take them survive a power cut and arrive
# after it, each once and in order. The file:// app's log file is made unwritable (a folder
# stands where logs.jsonl goes), the agent is restarted once (two start lines with known
# pids), the power is cut; phase 2 (logs-reboot.after.sh) restores the log file.
# Needs: the persistent log queue and shipper, file:// log upload.
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt/logs.jsonl"   # a folder: every append fails, lines stay queued
cat > "$mgmt/poll.json" <<'JSON'
{"config": {"components": [], "modules": [],
            "agent": {"svc-server": {"disable_subsystem": true}}},
 "targets": {}, "poll_interval_secs": 5, "commands": []}
JSON
lab_credentials "$mgmt"
lab_check "svc-agent install" svc-agent install
lab_wait 120 "svc-agent.service active" systemctl is-active --quiet svc-agent.service
pid1=$(systemctl show -p MainPID --value svc-agent.service)
lab_check "systemctl restart svc-agent" systemctl restart svc-agent
lab_wait 120 "svc-agent.service active again" systemctl is-active --quiet svc-agent.service
pid2=$(systemctl show -p MainPID --value svc-agent.service)
lab_wait 60 "the agent tried to ship and could not" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "logs.jsonl"'
lab_check "nothing was shipped" test -d "$mgmt/logs.jsonl"
echo "$pid1 $pid2" > /var/lib/lab/pids
lab_log "queued: the start lines of pids $pid1 and $pid2"
lab_powercut
