#!/bin/bash
# A factory-fresh device whose management app offers svc-server 0.2.0 and svc-agent 0.2.0 in
# the same answer (issue 27): the two update workers stage at once and share the version
# records. Both must end active and recorded the first time, with no failed update and no
# retry: versions.json names 0.2.0 as current for both, svc-server 0.2.0 runs, and the
# journal has no "update failed".
# lab-timeout: 480
# lab-arches: amd64 arm64
# lab-needs: v2
set -euo pipefail
. "$LAB/lab-lib.sh"

mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
target() { # target NAME: the targets entry for /lab/share/v2/NAME as 0.2.0
    cp "/lab/share/v2/$1" "$mgmt/$1-0.2.0"
    printf '"%s": {"version": "0.2.0", "url": "%s-0.2.0", "sha256": "%s", "size": %s}' \
        "$1" "$1" "$(sha256sum "$mgmt/$1-0.2.0" | cut -d' ' -f1)" "$(stat -c %s "$mgmt/$1-0.2.0")"
}
cat > "$mgmt/poll.json" <<JSON
{"config": {"components": [], "modules": [], "agent": {}},
 "poll_interval_secs": 5,
 "targets": {$(target svc-server), $(target svc-agent)}}
JSON
lab_credentials "$mgmt"
# Fresh: nothing of svc-server on the machine, only the agent that installs itself.
rm -rf /opt/svc
lab_check "svc-agent install" svc-agent install
lab_wait 180 "svc-server 0.2.0 active" sh -c '[ "$(readlink /opt/svc/bin/svc-server)" = ../cache/svc-server-0.2.0 ]'
lab_wait 180 "svc-agent 0.2.0 active" sh -c '[ "$(readlink /opt/svc/bin/svc-agent)" = ../cache/svc-agent-0.2.0 ]'
recorded() { # recorded NAME: versions.json says NAME's current version is 0.2.0
    python3 -c 'import json,sys; r=json.load(open("/opt/svc/versions.json")); sys.exit(r.get(sys.argv[1],{}).get("current")!="0.2.0")' "$1"
}
lab_wait 60 "versions.json records svc-server 0.2.0" recorded svc-server
lab_check "versions.json records svc-agent 0.2.0" recorded svc-agent
lab_wait 120 "svc-server 0.2.0 runs" sh -c 'p=$(pgrep -x svc-server | head -n1); [ -n "$p" ] && [ "$(readlink "/proc/$p/exe")" = /opt/svc/cache/svc-server-0.2.0 ]'
journalctl --sync
if journalctl -b -u svc-agent -o cat | grep -E "update failed"; then
    lab_fail "an update failed on the way (above)"
fi
lab_log "ok: both updates succeeded the first time"
lab_check "no temp file left in /opt/svc" sh -c '! find /opt/svc -name "*.tmp.*" | grep -q .'
