#!/bin/bash
# Power-cut harness check, phase 2 (second boot of the same disk): the synced file survived,
# the first boot really ended without a shutdown, and its journal survived up to the cut.
set -euo pipefail
. "$LAB/lab-lib.sh"

lab_check "synced file survived the power cut" test "$(cat /var/lib/lab/synced)" = "$(lab_run_id)"
boots="$(journalctl --list-boots --no-pager | grep -cE '^ *-?[0-9]+ [0-9a-f]{32} ' || true)"
lab_check "journal holds exactly the two boots (got $boots)" test "$boots" -eq 2
prev="$(journalctl -b -1 -o cat --no-pager)"
lab_check "previous boot's journal reaches the marker" grep -q "powercut-smoke marker $(lab_run_id)" <<<"$prev"
if grep -q -e 'Reached target.*Power-Off' -e 'Reached target.*System Shutdown' <<<"$prev"; then
    lab_fail "previous boot shut down cleanly: the power cut did not happen"
fi
lab_log "ok: previous boot has no shutdown in its journal"
