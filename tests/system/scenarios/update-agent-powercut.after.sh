#!/bin/bash
# After the power cut: the guard (from the known-good binary) let 0.2.0 start; 0.2.0 runs,
# marks itself healthy (the stable link moves, the boot record goes) and reports 0.2.0.
set -euo pipefail
. "$LAB/lab-lib.sh"
v1=$(cat /var/lib/lab/v1)
lab_wait 180 "svc-agent.service active after the power cut" systemctl is-active --quiet svc-agent.service
lab_wait 60 "the running agent is 0.2.0" sh -c \
    'p=$(systemctl show -p MainPID --value svc-agent.service) && [ "$(readlink /proc/$p/exe)" = /opt/svc/cache/svc-agent-0.2.0 ]'
lab_wait 60 "0.2.0 proved healthy: the stable link moved" \
    sh -c '[ "$(readlink /opt/svc/bin/svc-agent.stable)" = ../cache/svc-agent-0.2.0 ]'
lab_check "no boot record left (probation over)" test ! -e /opt/svc/agent-boot.json
lab_check "the guard ran before the start" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "svc-agent 0.2.0 on probation: start 1 of 3"'
lab_wait 60 "the app sees 0.2.0 (status.json)" grep -q '"version": "0.2.0"' /var/lib/lab/mgmt/status.json
lab_check "the previous version is kept for a rollback" test -x "/opt/svc/cache/svc-agent-$v1"
lab_check "no restart loop" test "$(systemctl show -p NRestarts --value svc-agent.service)" -le 1
