#!/bin/bash
# After the power cut: with the log file writable again, every queued line arrives, once,
# in order.
set -euo pipefail
. "$LAB/lab-lib.sh"
mgmt=/var/lib/lab/mgmt
read -r pid1 pid2 < /var/lib/lab/pids
rmdir "$mgmt/logs.jsonl"
lab_wait 180 "svc-agent.service active after the power cut" systemctl is-active --quiet svc-agent.service
lab_wait 240 "both queued start lines shipped" sh -c \
    "grep -q 'starting (pid $pid1,' $mgmt/logs.jsonl && grep -q 'starting (pid $pid2,' $mgmt/logs.jsonl"
count() { grep -o "starting (pid $1," "$mgmt/logs.jsonl" | wc -l; }
lab_check "the first start line arrived once" test "$(count "$pid1")" = 1
lab_check "the second start line arrived once" test "$(count "$pid2")" = 1
order=$(grep -o "starting (pid [0-9]*," "$mgmt/logs.jsonl" | sed 's/[^0-9]//g' | tr '\n' ' ')
lab_log "start lines in the shipped log, in order: $order"
lab_check "in order: $pid1 before $pid2" sh -c \
    "echo '$order' | grep -q '$pid1 .*$pid2'"
