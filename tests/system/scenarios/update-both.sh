#!/bin/bash
# A device running svc-server 0.1.x under a freshly installed svc-agent 0.1.x, whose
# management app offers svc-server 0.2.0 and svc-agent 0.2.0 in the same answer (issue 27):
# the two update workers stage at once and share the version records. Both must end active
# and recorded the first time, with no failed update and no retry: versions.json names 0.2.0
# as current for both, svc-server 0.2.0 runs, and the journal has no "update failed".
# Both by delta (issue 44): the answer names, beside each full artifact on the host's release
# server, a delta from the running binary (update-both.host.sh, `svc-release targets
# --delta-from`). The agent fetches the deltas and never the full artifacts (the server's
# request log), makes both binaries from them, checks what they made against the signed
# targets (this device has the vendor key) and says so (the journal; versions.json's
# `delta.outcome` "applied"); the new agent then starts through the boot guard, as after a
# full download.
# lab-timeout: 480
# lab-arches: amd64 arm64
# lab-needs: v2
set -euo pipefail
. "$LAB/lab-lib.sh"
. "$LAB_SHARE/host.env"

mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
cp -a /lab/share/app/. "$mgmt/"
install -m 0644 /lab/share/vendor.pub /etc/svc-signing.pub
lab_credentials "$mgmt"
# svc-server 0.1.x (the build under test) runs before the update, as in the field: a delta
# starts from the running binary.
rm -rf /opt/svc
v1=$(svc-server version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
mkdir -p /opt/svc/cache /opt/svc/bin
cp /lab/bin/svc-server "/opt/svc/cache/svc-server-$v1"
ln -sfn "../cache/svc-server-$v1" /opt/svc/bin/svc-server
lab_check "svc-agent install" svc-agent install
lab_wait 300 "svc-server 0.2.0 active" sh -c '[ "$(readlink /opt/svc/bin/svc-server)" = ../cache/svc-server-0.2.0 ]'
lab_wait 300 "svc-agent 0.2.0 active" sh -c '[ "$(readlink /opt/svc/bin/svc-agent)" = ../cache/svc-agent-0.2.0 ]'
recorded() { # recorded NAME: versions.json says NAME's current version is 0.2.0
    python3 -c 'import json,sys; r=json.load(open("/opt/svc/versions.json")); sys.exit(r.get(sys.argv[1],{}).get("current")!="0.2.0")' "$1"
}
lab_wait 60 "versions.json records svc-server 0.2.0" recorded svc-server
lab_check "versions.json records svc-agent 0.2.0" recorded svc-agent
lab_wait 120 "svc-server 0.2.0 runs" sh -c 'p=$(pgrep -x svc-server | head -n1); [ -n "$p" ] && [ "$(readlink "/proc/$p/exe")" = /opt/svc/cache/svc-server-0.2.0 ]'
# The agent's self-update runs at the agent's next start (docs/updates.md): a restart, through
# the boot guard, as update-agent-powercut checks it after a reboot.
lab_wait 60 "svc-agent 0.2.0 is installed, waiting for a restart" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "svc-agent 0.2.0 installed; it runs after the agent restarts"'
lab_check "restart svc-agent.service" systemctl restart svc-agent.service
lab_wait 120 "the running agent is 0.2.0" sh -c \
    'p=$(systemctl show -p MainPID --value svc-agent.service) && [ "$(readlink /proc/$p/exe)" = /opt/svc/cache/svc-agent-0.2.0 ]'
lab_wait 120 "0.2.0 proved healthy: the stable link moved" \
    sh -c '[ "$(readlink /opt/svc/bin/svc-agent.stable)" = ../cache/svc-agent-0.2.0 ]'
lab_check "no boot record left (probation over)" test ! -e /opt/svc/agent-boot.json
journalctl --sync
lab_check "the guard started 0.2.0 on probation" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "svc-agent 0.2.0 on probation: start 1 of 3"'
if journalctl -b -u svc-agent -o cat | grep -E "update failed"; then
    lab_fail "an update failed on the way (above)"
fi
for b in svc-server svc-agent; do
    lab_check "the journal says $b 0.2.0 was made by a delta" sh -c \
        "journalctl -b -u svc-agent -o cat | grep -F '$b 0.2.0: made from the running binary by a delta'"
    lab_check "versions.json notes $b 0.2.0's delta as applied" python3 -c '
import json, sys
d = json.load(open("/opt/svc/versions.json")).get(sys.argv[1], {}).get("delta")
sys.exit(d != {"version": "0.2.0", "outcome": "applied"})' "$b"
done
# What went over the wire: each delta, never a full artifact.
curl -fsS -o /tmp/requests.log "http://10.0.2.2:$HOST_PORT/requests.log"
lab_check "the release server sent each delta and no full artifact" python3 -c '
import json, sys
from urllib.parse import urlparse
gets = [l.split()[1] for l in open("/tmp/requests.log") if l.startswith("GET ")]
bad = False
for name, t in json.load(open("/lab/share/targets.json")).items():
    full = urlparse(t["url"]).path
    deltas = [urlparse(d["url"]).path for d in t.get("deltas", [])]
    got = [p for p in deltas if p in gets]
    print(name, "full", full, "fetched", gets.count(full), "times; deltas", deltas, "fetched", [gets.count(p) for p in deltas], "times")
    bad |= gets.count(full) != 0 or len(got) != 1
sys.exit(bad)'
lab_log "ok: both updates arrived by delta and succeeded the first time"
lab_check "no temp file left in /opt/svc" sh -c '! find /opt/svc -name "*.tmp.*" -o -name "*.delta.part" | grep -q .'
