#!/bin/bash
# install.sh for a running machine (`curl -fsSL …/install.sh | sudo sh`), for real: from a
# release server on the host, under systemd. The agent ends installed and running as
# svc-agent.service with a 0600 credentials file; the secret is in no process argument and
# not in the journal; a second run changes nothing; --uninstall leaves no file behind.
# Needs: install.sh, `svc-agent install`/`uninstall --purge`, file:// protocol.
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
. "$LAB_SHARE/host.env"
release="http://10.0.2.2:$HOST_PORT"
secret="lab-key-$(lab_run_id)"
mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
cat > "$mgmt/poll.json" <<'JSON'
{"config": {"components": [], "modules": [],
            "agent": {"svc-server": {"disable_subsystem": true}}},
 "targets": {}, "poll_interval_secs": 5, "commands": []}
JSON
# Nothing from the image: the agent comes only from the release server.
rm -rf /opt/svc /etc/svc.json

# Watch every process's arguments while the installer runs: the key must never show.
( set +eo pipefail
  while :; do
      # One cat per sweep (a process per entry is too slow under TCG); NULs become spaces.
      cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' '
      echo
      sleep 0.02
  done ) > /tmp/argv.log &
watcher=$!

# As the README says: exported variables (builtins, so never in any argv), then the pipe.
install_once() (
    export SVC_RELEASE_URL="$release" SVC_PART_ID="lab-part" SVC_API_KEY_ID="lab-key-id" \
        SVC_API_KEY="$secret" SVC_APP_ADDRESS="file://$mgmt"
    curl -fsSL "$release/install.sh" | sh
)
lab_check "install.sh (first run)" install_once
lab_wait 120 "svc-agent.service active" systemctl is-active --quiet svc-agent.service
lab_wait 120 "the agent polled (status.json)" test -s "$mgmt/status.json"
lab_check "credentials 0600 root" test "$(stat -c '%a %U' /etc/svc.json)" = "600 root"
lab_check "credentials hold the api key" grep -q "\"key\":\"$secret\"" /etc/svc.json
lab_check "link to the cached binary" test "$(readlink /opt/svc/bin/svc-agent)" = "../cache/svc-agent-$(svc-agent version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')"

# Second run: nothing changes (same files, same contents, same service process).
state() {
    find /opt/svc/bin /opt/svc/cache /etc/svc.json /etc/systemd/system/svc-agent.service \
        -printf '%p %m %s %T@ %l\n' 2>/dev/null | sort
    sha256sum /etc/svc.json /etc/systemd/system/svc-agent.service
}
before="$(state)"; pid_before="$(systemctl show -p MainPID --value svc-agent.service)"
lab_check "install.sh (second run)" install_once
after="$(state)"; pid_after="$(systemctl show -p MainPID --value svc-agent.service)"
if [ "$before" != "$after" ]; then
    diff <(echo "$before") <(echo "$after") || true
    lab_fail "the second run changed files"
fi
lab_log "ok: the second run changed no file"
lab_check "the service was not restarted by the second run" test "$pid_before" = "$pid_after"

lab_check "the argument watcher ran through the installs" kill "$watcher"
wait "$watcher" 2>/dev/null || true
lab_check "the watcher saw the installer's processes" grep -q "curl -fsSL $release" /tmp/argv.log
if grep -q "$secret" /tmp/argv.log; then lab_fail "the api key appeared in a process's arguments"; fi
lab_log "ok: the api key was in no process's arguments"
journalctl --sync
if journalctl -b -o cat | grep -q "$secret"; then lab_fail "the api key reached the journal"; fi
lab_log "ok: the api key is not in the journal"

# Uninstall: everything it added goes.
lab_check "install.sh --uninstall" sh -c "curl -fsSL '$release/install.sh' | sh -s -- --uninstall"
lab_check "no /opt/svc" test ! -e /opt/svc
lab_check "no /etc/svc.json" test ! -e /etc/svc.json
lab_check "no unit file" test ! -e /etc/systemd/system/svc-agent.service
lab_check "no enablement link" test ! -e /etc/systemd/system/multi-user.target.wants/svc-agent.service
lab_check "service gone" sh -c '! systemctl is-active --quiet svc-agent.service'
if pgrep -x svc-agent >/dev/null; then lab_fail "an svc-agent process is left"; fi
lab_log "ok: uninstall left nothing behind"
