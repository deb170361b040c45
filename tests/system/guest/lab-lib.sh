# shellcheck shell=bash
# Helpers for scenario scripts; sourced by the guest runner and by every scenario
# (`. "$LAB/lab-lib.sh"`). Scenarios run under bash with `set -euo pipefail`; a non-zero
# exit fails the scenario.

console() { echo "$*" > /dev/ttyS0; }

lab_log() { echo "[lab $(cut -d' ' -f1 /proc/uptime)] $*"; }

lab_fail() { echo "LAB-FAIL: $*" >&2; exit 1; }

# lab_check DESCRIPTION COMMAND...: run COMMAND, fail the scenario with DESCRIPTION if it fails.
lab_check() {
    local desc="$1"; shift
    if "$@"; then lab_log "ok: $desc"; else lab_fail "$desc (command: $*)"; fi
}

# lab_wait SECONDS DESCRIPTION COMMAND...: poll COMMAND until it succeeds. The bound only
# stops a hung scenario; it is not a performance assertion, so keep it generous.
lab_wait() {
    local limit="$1" desc="$2"; shift 2
    local end=$(( $(date +%s) + limit ))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || lab_fail "timed out after ${limit}s waiting for: $desc"
        sleep 0.5
    done
    lab_log "ok: $desc"
}

# The run's random id, shared by both phases of a power-cut scenario.
lab_run_id() { cat "$LAB/run-id"; }

# lab_credentials MGMT_DIR: /etc/svc.json (0600) for a file:// management directory, with
# this run's secret (`lab-secret-<run id>`: scenarios check it never reaches the journal).
lab_credentials() {
    ( umask 077
      printf '{"cloud": {"app_address": "file://%s", "id": "lab-part-%s", "secret": "lab-secret-%s"}}\n' \
          "$1" "$(lab_run_id)" "$(lab_run_id)" > /etc/svc.json )
}

# Make everything written so far durable, then ask the harness to cut the power. Never returns.
lab_powercut() {
    journalctl --sync 2>/dev/null || true
    sync
    lab_log "power cut requested"
    console "@@POWERCUT@@"
    sleep infinity
}

# What the harness prints when a scenario fails: the agent's unit, files and failed units.
lab_agent_state() {
    echo "== systemctl --failed"; systemctl --failed --no-pager --no-legend || true
    echo "== systemctl status svc-agent"; systemctl status svc-agent --no-pager -l 2>&1 || true
    echo "== /opt/svc"; ls -laR /opt/svc 2>&1 | head -n 100 || true
    echo "== /etc/svc*.json (names only; the credentials are secret)"; ls -la /etc/svc*.json 2>&1 || true
    echo "== processes"; ps -eo pid,ppid,stat,etime,args --forest 2>&1 | grep -v '\[' | head -n 80 || true
    echo "== addresses"; ip -br addr 2>&1 || true
    echo "== nmcli"; nmcli -t dev 2>&1 || true
}
