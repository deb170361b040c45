#!/bin/bash
# After a power cut the installed agent starts again on its own and resumes polling.
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_wait 180 "svc-agent.service active after the power cut" systemctl is-active --quiet svc-agent.service
lab_wait 120 "the agent polls again (status.json)" test -s /var/lib/lab/mgmt/status.json
lab_check "no restart loop" test "$(systemctl show -p NRestarts --value svc-agent.service)" -le 1
