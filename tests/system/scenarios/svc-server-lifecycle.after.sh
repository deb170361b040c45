#!/bin/bash
# After the reboot: the enabled agent starts on its own, svc-server runs at the same version,
# and polling resumes.
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_wait 180 "svc-agent.service active after the reboot" systemctl is-active --quiet svc-agent.service
lab_wait 120 "svc-server running again" sh -c '[ -n "$(pgrep -x svc-server)" ]'
lab_check "same svc-server version" test "$(readlink /opt/svc/bin/svc-server)" = "../cache/svc-server-$(cat /var/lib/lab/server-version)"
lab_wait 120 "the agent polls again (status.json)" test -s /var/lib/lab/mgmt/status.json
lab_check "svc status reports svc-server running" sh -c 'svc-agent status --json | grep -q "\"running\":true"'
