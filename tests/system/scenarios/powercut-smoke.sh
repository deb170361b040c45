#!/bin/bash
# Power-cut harness check, phase 1: write and sync a file, then have the power cut.
# Phase 2 is powercut-smoke.after.sh. Needs: nothing from the agent.
# lab-timeout: 300
set -euo pipefail
. "$LAB/lab-lib.sh"

mkdir -p /var/lib/lab
printf '%s\n' "$(lab_run_id)" > /var/lib/lab/synced
sync /var/lib/lab/synced
lab_log "powercut-smoke marker $(lab_run_id)" | systemd-cat -t lab-powercut
lab_powercut
