#!/bin/bash
# A power cut during an agent self-update. The installed agent (0.1.x, under systemd) is
# offered svc-agent 0.2.0 through its file:// app; the power goes right after the link
# /opt/svc/bin/svc-agent moves to 0.2.0 (the new agent is installed, not yet run: the agent
# never restarts itself for an update). Phase 2 (update-agent-powercut.after.sh): the boot
# guard runs from the known-good binary, 0.2.0 starts, proves healthy and becomes the stable
# version.
# lab-timeout: 480
# lab-arches: amd64 arm64
# lab-needs: v2
set -euo pipefail
. "$LAB/lab-lib.sh"

mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
cp /lab/share/v2/svc-agent "$mgmt/svc-agent-0.2.0"
sha=$(sha256sum "$mgmt/svc-agent-0.2.0" | cut -d' ' -f1)
size=$(stat -c %s "$mgmt/svc-agent-0.2.0")
cat > "$mgmt/poll.json" <<JSON
{"config": {"components": [], "modules": [],
            "agent": {"svc-server": {"disable_subsystem": true}}},
 "poll_interval_secs": 5,
 "targets": {"svc-agent": {"version": "0.2.0", "url": "svc-agent-0.2.0", "sha256": "$sha", "size": $size}}}
JSON
lab_credentials "$mgmt"
v1=$(svc-agent version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
echo "$v1" > /var/lib/lab/v1
lab_check "svc-agent install" svc-agent install
lab_wait 120 "svc-agent.service active" systemctl is-active --quiet svc-agent.service
lab_wait 120 "the agent link moved to 0.2.0" sh -c '[ "$(readlink /opt/svc/bin/svc-agent)" = ../cache/svc-agent-0.2.0 ]'
pid=$(systemctl show -p MainPID --value svc-agent.service)
lab_check "the running agent is still $v1 (no self-restart)" \
    test "$(readlink "/proc/$pid/exe")" = "/opt/svc/cache/svc-agent-$v1"
lab_check "the known-good link is still $v1" test "$(readlink /opt/svc/bin/svc-agent.stable)" = "../cache/svc-agent-$v1"
lab_powercut
