#!/bin/bash
# install.sh for a running machine, for real: the spec's command (section 4) typed by an
# unprivileged user, through real sudo, against a release server on the host, under systemd.
#   sudo /bin/sh -c "SVC_API_KEY_ID=… SVC_API_KEY=… SVC_PART_ID=…; $(curl -fsSL <install_url>)"
#   sudo /bin/sh -c "$(curl -fsSL <install_url>)"          (credentials file placed first)
# The variables put before sudo (dropped by env_reset) fail loudly and install nothing. The
# agent ends installed and running with a 0600 root credentials file; the key is in no
# process's arguments except the two the spec's form itself creates (sudo and its sh -c), and
# not in the journal; a second run changes nothing; --uninstall leaves no file behind.
# Needs: install.sh, scripts/publish-install.sh, `svc-agent install`/`uninstall --purge`.
# lab-timeout: 600
# lab-arches: amd64 arm64
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

# A user with sudo rights (Debian's sudo and sudoers: env_reset on).
# Debian's sudo, unpacked by the host hook; what its postinst does that matters here: the
# sudoers file root's and 0440, sudo's tmpfiles line.
lab_check "sudo unpacked" tar -C / --keep-directory-symlink --no-overwrite-dir -xf /lab/share/sudo.tar
chown root:root /etc/sudoers && chmod 440 /etc/sudoers
lab_check "sudo's runtime directory" systemd-tmpfiles --create sudo.conf
lab_check "sudo installed, setuid root" sh -c 'test -u /usr/bin/sudo && test "$(stat -c %U:%G /usr/bin/sudo)" = root:root'
lab_check "sudoers 0440 root" test "$(stat -c '%a %U' /etc/sudoers)" = "440 root"
id lab >/dev/null 2>&1 || useradd -m -s /bin/sh lab
echo 'lab ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/lab
chmod 0440 /etc/sudoers.d/lab
lab_check "sudoers resets the environment" sh -c 'sudo -l -U lab | grep -q env_reset'

# as_user TEXT: what the user types at their shell, run from a file (so the typed text is
# no process's argument, as in an interactive shell).
as_user() {
    local f
    f="$(mktemp /tmp/typed.XXXXXX)"
    printf '%s\n' "$1" > "$f"
    chown lab "$f"
    chmod 0700 "$f"
    runuser -u lab -- /bin/sh "$f"
    local rc=$?
    rm -f "$f"
    return "$rc"
}
spec_with_vars="sudo /bin/sh -c \"SVC_API_KEY_ID=lab-key-id SVC_API_KEY=$secret SVC_PART_ID=lab-part; \$(curl -fsSL $release/install.sh)\""
spec_no_vars="sudo /bin/sh -c \"\$(curl -fsSL $release/install.sh)\""

# Watch every process's arguments while the installer runs (lab_argv_watch: one process
# that sweeps /proc every 20 ms and logs each line it has not logged yet).
lab_argv_watch /tmp/argv.log 0.02
watcher=$LAB_ARGV_WATCH

# 1. The variables before sudo: env_reset drops them. It must fail and install nothing.
if as_user "SVC_API_KEY_ID=lab-key-id SVC_API_KEY=misplaced-key SVC_PART_ID=lab-part sudo /bin/sh -c \"\$(curl -fsSL $release/install.sh)\"" 2> /tmp/misplaced.err; then
    lab_fail "variables before sudo: install.sh exited 0 (an unprovisioned install)"
fi
lab_check "variables before sudo: the error says where they go" grep -q "inside the root shell" /tmp/misplaced.err
lab_check "variables before sudo: nothing installed" test ! -e /opt/svc -a ! -e /etc/svc.json
lab_log "ok: variables before sudo fail loudly and install nothing"

# 2. The spec's command with the three variables.
lab_check "spec command with the variables (first run)" as_user "$spec_with_vars"
lab_wait 120 "svc-agent.service active" systemctl is-active --quiet svc-agent.service
lab_wait 120 "the agent polled (status.json)" test -s "$mgmt/status.json"
lab_check "credentials 0600 root" test "$(stat -c '%a %U' /etc/svc.json)" = "600 root"
# The pattern goes through a file (printf is a builtin): a check of our own that carried the
# key in its arguments was caught by the watcher above (a clean-clone run, session 8).
printf '"key":"%s"' "$secret" > /tmp/key.pattern
lab_check "credentials hold the api key" grep -qF -f /tmp/key.pattern /etc/svc.json
lab_check "credentials hold the published app address" grep -q "\"app_address\":\"file://$mgmt\"" /etc/svc.json
lab_check "link to the cached binary" test "$(readlink /opt/svc/bin/svc-agent)" = "../cache/svc-agent-$(svc-agent version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')"

# Second run: nothing changes (same files, same contents, same service process).
state() {
    find /opt/svc/bin /opt/svc/cache /etc/svc.json /etc/systemd/system/svc-agent.service \
        -printf '%p %m %s %T@ %l\n' 2>/dev/null | sort
    sha256sum /etc/svc.json /etc/systemd/system/svc-agent.service
}
before="$(state)"; pid_before="$(systemctl show -p MainPID --value svc-agent.service)"
lab_check "spec command with the variables (second run)" as_user "$spec_with_vars"
after="$(state)"; pid_after="$(systemctl show -p MainPID --value svc-agent.service)"
if [ "$before" != "$after" ]; then
    diff <(echo "$before") <(echo "$after") || true
    lab_fail "the second run changed files"
fi
lab_log "ok: the second run changed no file"
lab_check "the service was not restarted by the second run" test "$pid_before" = "$pid_after"
lab_check "install.sh --uninstall" sh -c "curl -fsSL '$release/install.sh' | sh -s -- --uninstall"
lab_check "uninstalled" test ! -e /opt/svc -a ! -e /etc/svc.json

# 3. The spec's command without variables, the credentials file placed beforehand (here
#    carelessly 0644: the installer makes it 0600 root and keeps its content).
printf '{"cloud":{"app_address":"file://%s","id":"lab-part","api_key":{"id":"lab-key-id","key":"%s"}}}\n' "$mgmt" "$secret" > /etc/svc.json
chmod 0644 /etc/svc.json
placed="$(sha256sum < /etc/svc.json)"
rm -f "$mgmt/status.json"
lab_check "spec command with a placed credentials file" as_user "$spec_no_vars"
lab_wait 120 "svc-agent.service active (placed file)" systemctl is-active --quiet svc-agent.service
lab_wait 120 "the agent polled (placed file)" test -s "$mgmt/status.json"
lab_check "placed credentials kept" test "$(sha256sum < /etc/svc.json)" = "$placed"
lab_check "placed credentials now 0600 root" test "$(stat -c '%a %U' /etc/svc.json)" = "600 root"

lab_check "the argument watcher ran through the installs" kill "$watcher"
wait "$watcher" 2>/dev/null || true
lab_check "the watcher saw the installer's processes" grep -q "curl -fsSL $release" /tmp/argv.log
# The spec's form itself puts the key into sudo's and its shell's arguments; no other process
# (curl, sed, cat, svc-agent, ...) may ever carry it.
if grep -a "$secret" /tmp/argv.log | grep -av -E '^/proc/[0-9]+/cmdline:(sudo /bin/sh|/bin/sh) -c SVC_API_KEY_ID=lab-key-id SVC_API_KEY='"$secret"' SVC_PART_ID=lab-part; '; then
    lab_fail "the api key appeared in the arguments of a process other than sudo and its sh -c"
fi
lab_check "the watcher saw the spec's sh -c" grep -aq "^/proc/[0-9]*/cmdline:/bin/sh -c SVC_API_KEY_ID=" /tmp/argv.log
lab_log "ok: the api key was in no process's arguments but the spec's sudo and sh -c"
journalctl --sync
# sudo itself logs the command it runs (the spec's form puts the key there: docs/packaging.md
# says so); nothing else may log it, the installer and the agent least of all.
lab_check "sudo logged the spec's command" sh -c 'journalctl -b -o short _COMM=sudo | grep -q "COMMAND=/bin/sh -c"'
if journalctl -b -o short | grep -v ' sudo\[[0-9]*\]: ' | grep -q "$secret"; then lab_fail "the api key reached the journal (other than sudo's own log)"; fi
lab_log "ok: the api key is not in the journal (other than sudo's own log of its command)"

# Uninstall: everything it added goes.
lab_check "install.sh --uninstall" sh -c "curl -fsSL '$release/install.sh' | sh -s -- --uninstall"
lab_check "no /opt/svc" test ! -e /opt/svc
lab_check "no /etc/svc.json" test ! -e /etc/svc.json
lab_check "no unit file" test ! -e /etc/systemd/system/svc-agent.service
lab_check "no enablement link" test ! -e /etc/systemd/system/multi-user.target.wants/svc-agent.service
lab_check "service gone" sh -c '! systemctl is-active --quiet svc-agent.service'
if pgrep -x svc-agent >/dev/null; then lab_fail "an svc-agent process is left"; fi
lab_log "ok: uninstall left nothing behind"
