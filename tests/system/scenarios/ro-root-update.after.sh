#!/bin/bash
# After the power cut, on the read-only root: the seed (from the image's older agent) keeps
# the data partition's 0.2.0, which starts, proves healthy and reports 0.2.0.
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_data_mounted
v1=$(cat /data/lab/v1)
lab_check "the root booted read-only" lab_root_ro
lab_wait 180 "svc-agent.service active after the power cut" systemctl is-active --quiet svc-agent.service
lab_wait 60 "the running agent is 0.2.0 from /data" lab_agent_is /data/svc/cache/svc-agent-0.2.0
lab_check "the image's older agent did not downgrade it" sh -c \
    "journalctl -b -u svc-agent -o cat | grep -q 'the image.s svc-agent $v1 is not newer than 0.2.0 in /data/svc: 0.2.0 keeps running'"
lab_wait 60 "0.2.0 proved healthy: the stable link moved" \
    sh -c '[ "$(readlink /data/svc/bin/svc-agent.stable)" = ../cache/svc-agent-0.2.0 ]'
lab_wait 60 "the app sees 0.2.0 (status.json)" grep -q '"version": "0.2.0"' /var/lib/lab/mgmt/status.json
lab_check "the previous version is kept for a rollback" test -x "/data/svc/cache/svc-agent-$v1"
lab_check "the credentials stayed on the data partition, 0600" \
    test "$(stat -c %a /data/etc/svc.json)" = 600
lab_check "nothing in /opt/svc" test ! -e /opt/svc
