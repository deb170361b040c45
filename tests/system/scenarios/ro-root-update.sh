#!/bin/bash
# A read-only root with the agent's state on a data partition (issue 23). The image (made by
# lab_ro_image as meta-svc/Buildroot make it with SVC_STATE_DIR=/data/svc) ships the agent in
# /usr/lib/svc-agent; the data disk is empty. First start: `svc-agent seed` makes the image's
# agent the first current version on /data and it runs; then it updates itself to 0.2.0 on
# /data and the power goes right after the link moves. Phase 2 (ro-root-update.after.sh):
# the root is still read-only, the image's older agent does not downgrade the data
# partition's 0.2.0.
# lab-timeout: 480
# lab-needs: v2
# lab-needs: data-disk
# lab-root: ro
set -euo pipefail
. "$LAB/lab-lib.sh"

v1=$(svc-agent version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
lab_ro_image /lab/bin/svc-agent
lab_check "no agent state on the data partition yet" test ! -e /data/svc

mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
cp /lab/share/v2/svc-agent "$mgmt/svc-agent-0.2.0"
sha=$(sha256sum "$mgmt/svc-agent-0.2.0" | cut -d' ' -f1)
size=$(stat -c %s "$mgmt/svc-agent-0.2.0")
# First only the config (no target), so that the seeded agent proves healthy first.
cat > "$mgmt/poll.json" <<JSON
{"config": {"components": [], "modules": [], "agent": {"svc-server": {"disable_subsystem": true}}},
 "poll_interval_secs": 5}
JSON
lab_ro_credentials "$mgmt"
echo "$v1" > /data/lab/v1

lab_check "start the image's unit" systemctl start svc-agent.service
lab_wait 120 "svc-agent.service active" systemctl is-active --quiet svc-agent.service
lab_check "seeded: the image's agent is the first current version on /data" \
    test "$(readlink /data/svc/bin/svc-agent)" = "../cache/svc-agent-$v1"
lab_check "the seed said so" sh -c "journalctl -u svc-agent -o cat | grep -q 'seeded /data/svc with the image.s svc-agent $v1'"
lab_wait 120 "the seeded agent proved healthy (known-good link)" test -L /data/svc/bin/svc-agent.stable
lab_check "it runs from the data partition" lab_agent_is "/data/svc/cache/svc-agent-$v1"
lab_check "doctor: the state directory is writable" sh -c \
    '. /etc/profile.d/svc-agent.sh && svc-agent doctor --json | grep -q "/data/svc is writable"'
lab_check "nothing in /opt/svc (read-only image)" test ! -e /opt/svc

cat > "$mgmt/poll.json" <<JSON
{"config": {"components": [], "modules": [], "agent": {"svc-server": {"disable_subsystem": true}}},
 "poll_interval_secs": 5,
 "targets": {"svc-agent": {"version": "0.2.0", "url": "svc-agent-0.2.0", "sha256": "$sha", "size": $size}}}
JSON
lab_wait 180 "the agent link on /data moved to 0.2.0" sh -c \
    '[ "$(readlink /data/svc/bin/svc-agent)" = ../cache/svc-agent-0.2.0 ]'
lab_check "the root is still read-only" lab_root_ro
lab_powercut
