#!/bin/bash
# The agent installs itself as systemd service svc-agent from a credentials file placed
# beforehand (spec §4, conventions.md), comes up under systemd (Type=notify), polls a file://
# management directory, and survives a power cut (phase 2: agent-install.after.sh).
# Needs: `svc-agent install`, `svc-agent run` (sd_notify READY), file:// protocol (status.json).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"

mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
# An empty config that leaves svc-server unmanaged, so nothing needs downloading.
cat > "$mgmt/poll.json" <<'JSON'
{"config": {"components": [], "modules": [],
            "agent": {"svc-server": {"disable_subsystem": true}}},
 "targets": {}, "poll_interval_secs": 5, "commands": []}
JSON
lab_credentials "$mgmt"

lab_check "svc-agent install" svc-agent install
lab_check "unit svc-agent.service is installed" systemctl cat svc-agent.service
lab_check "unit svc-agent.service is enabled" systemctl is-enabled --quiet svc-agent.service
lab_check "/opt/svc/bin/svc-agent runs" /opt/svc/bin/svc-agent version --json
lab_wait 120 "svc-agent.service active (READY=1 sent)" systemctl is-active --quiet svc-agent.service
lab_wait 120 "the agent logs to the journal" sh -c 'journalctl -b -u svc-agent -o cat | grep -q .'
lab_wait 120 "the agent polled the file:// app (status.json)" test -s "$mgmt/status.json"
lab_check "credentials stay 0600" test "$(stat -c %a /etc/svc.json)" = 600
if journalctl -b -o cat | grep -q "lab-secret-$(lab_run_id)"; then lab_fail "the secret reached the journal"; fi
rm -f "$mgmt/status.json"
lab_powercut
