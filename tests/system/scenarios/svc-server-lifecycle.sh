#!/bin/bash
# svc-server under the installed agent, under real systemd: a crash (SIGKILL) is restarted
# by the agent; an agent restart restarts svc-server with no orphan left; a clean stop stops
# it; then the machine reboots (phase 2: svc-server-lifecycle.after.sh).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"

mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
cat > "$mgmt/poll.json" <<'JSON'
{"config": {"components": [], "modules": [], "agent": {}}, "poll_interval_secs": 5}
JSON
lab_credentials "$mgmt"
# An image with svc-server pre-installed, as the Yocto and Buildroot recipes make it.
ver=$(svc-server version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
mkdir -p /opt/svc/cache /opt/svc/bin
cp /lab/bin/svc-server "/opt/svc/cache/svc-server-$ver"
ln -sfn "../cache/svc-server-$ver" /opt/svc/bin/svc-server
lab_check "svc-agent install" svc-agent install

server_pid() { pgrep -x svc-server | head -n1; }
lab_wait 120 "svc-server running under the agent" sh -c '[ -n "$(pgrep -x svc-server)" ]'
first=$(server_pid)
kill -9 "$first"
lab_wait 60 "svc-server restarted after SIGKILL" sh -c "p=\$(pgrep -x svc-server | head -n1); [ -n \"\$p\" ] && [ \"\$p\" != $first ]"
lab_wait 30 "the crash in the journal" sh -c 'journalctl -b -u svc-agent -o cat | grep -q "svc-server stopped pid=.*signal 9"'

second=$(server_pid)
lab_check "systemctl restart svc-agent" systemctl restart svc-agent
lab_wait 120 "svc-server back after the agent restart" sh -c "p=\$(pgrep -x svc-server | head -n1); [ -n \"\$p\" ] && [ \"\$p\" != $second ]"
lab_check "the old svc-server is gone" sh -c "! kill -0 $second 2>/dev/null"
lab_check "one svc-server only" test "$(pgrep -xc svc-server)" = 1

lab_check "systemctl stop svc-agent" systemctl stop svc-agent
lab_check "svc-server stopped with the agent" sh -c '! pgrep -x svc-server'
lab_check "the stop was clean" sh -c 'journalctl -b -u svc-agent -o cat | grep -q "svc-agent stopping"'
echo "$ver" > /var/lib/lab/server-version
rm -f "$mgmt/status.json"
# A clean shutdown happened above; the power goes now and the machine boots again.
lab_powercut
