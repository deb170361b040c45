#!/bin/bash
# After the power cut: a complete svc-server at every instant, the download resumed from
# where it stopped, 0.2.0 active and running, and nothing left over.
set -euo pipefail
. "$LAB/lab-lib.sh"
v1=$(cat /var/lib/lab/v1)
# Before anything else: what the link points at is complete and runs.
link=$(readlink /opt/svc/bin/svc-server)
case "$link" in
    "../cache/svc-server-$v1" | ../cache/svc-server-0.2.0) ;;
    *) lab_fail "unexpected link after the power cut: $link" ;;
esac
lab_check "the linked svc-server runs after the power cut" /opt/svc/bin/svc-server version --json
lab_wait 240 "svc-server 0.2.0 active" sh -c '[ "$(readlink /opt/svc/bin/svc-server)" = ../cache/svc-server-0.2.0 ]'
lab_wait 120 "svc-server 0.2.0 running" sh -c \
    'p=$(pgrep -x svc-server | head -n1) && [ "$(readlink /proc/$p/exe)" = /opt/svc/cache/svc-server-0.2.0 ]'
lab_check "the download was resumed, not restarted" \
    sh -c 'journalctl -b -u svc-agent -o cat | grep -q "svc-server 0.2.0: resuming download at byte"'
lab_check "versions.json: current 0.2.0, previous $v1" python3 - "$v1" <<'PY'
import json, sys
r = json.load(open("/opt/svc/versions.json"))["svc-server"]
assert r["current"] == "0.2.0" and r["previous"] == sys.argv[1], r
PY
lab_check "no partial download left" sh -c '! ls /opt/svc/cache/*.part 2>/dev/null'
lab_check "the new svc-server is checked: version --json says 0.2.0" \
    sh -c '/opt/svc/bin/svc-server version --json | grep -q "\"version\":\"0.2.0\""'
