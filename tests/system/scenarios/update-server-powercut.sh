#!/bin/bash
# A power cut in the middle of an svc-server update. The agent (installed under systemd)
# runs svc-server 0.1.x; the app offers 0.2.0 from a slow release server (explicit http://);
# the power goes while /opt/svc/cache holds a partial download. Phase 2
# (update-server-powercut.after.sh): the link always pointed at a complete binary, the
# download resumes, svc-server ends on 0.2.0 and runs.
# lab-timeout: 480
# lab-needs: v2
set -euo pipefail
. "$LAB/lab-lib.sh"
. "$LAB_SHARE/host.env"

mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
v2=/lab/share/v2/svc-server
sha=$(sha256sum "$v2" | cut -d' ' -f1)
size=$(stat -c %s "$v2")
cat > "$mgmt/poll.json" <<JSON
{"config": {"components": [], "modules": [], "agent": {}}, "poll_interval_secs": 5,
 "targets": {"svc-server": {"version": "0.2.0", "url": "http://10.0.2.2:$HOST_PORT/svc-server-0.2.0",
                            "sha256": "$sha", "size": $size}}}
JSON
lab_credentials "$mgmt"
ver=$(svc-server version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
echo "$ver" > /var/lib/lab/v1
mkdir -p /opt/svc/cache /opt/svc/bin
cp /lab/bin/svc-server "/opt/svc/cache/svc-server-$ver"
ln -sfn "../cache/svc-server-$ver" /opt/svc/bin/svc-server
lab_check "svc-agent install" svc-agent install
lab_wait 120 "svc-server $ver running under the agent" sh -c '[ -n "$(pgrep -x svc-server)" ]'
lab_wait 120 "the 0.2.0 download in progress (a growing .part)" \
    sh -c 'f=$(ls /opt/svc/cache/svc-server-0.2.0.part 2>/dev/null) && [ "$(stat -c %s "$f")" -gt 200000 ]'
lab_check "still on $ver (nothing activated mid-download)" \
    test "$(readlink /opt/svc/bin/svc-server)" = "../cache/svc-server-$ver"
stat -c 'part at the cut: %s bytes' /opt/svc/cache/svc-server-0.2.0.part
lab_powercut
