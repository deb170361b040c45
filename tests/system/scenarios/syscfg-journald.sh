#!/bin/bash
# agent-syscfg journald limits on a real systemd 252: the drop-in is applied (cat-config shows
# it, journald restarts once and reports the new limit), the journal survives the restart, a
# second apply does nothing, and disabling the subsystem removes the drop-in and restores
# journald's own limits.
# Needs: `svc-agent syscfg-apply --root / --config FILE` (src/syscfg/cli.rs).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"

dropin=/etc/systemd/journald.conf.d/60-svc-agent.conf
journald_pid() { systemctl show -p MainPID --value systemd-journald; }
cat_config() { systemd-analyze cat-config systemd/journald.conf --no-pager; }

# Why the agent restarts journald instead of reloading it (documented in docs/syscfg.md).
lab_log "journald: $(systemctl show -p CanReload -p FileDescriptorStoreMax -p NFileDescriptorStore systemd-journald | tr '\n' ' ')"
sighup_bit=$(( 1 << 0 )) # SIGHUP is signal 1: bit 0 of the masks
pid="$(journald_pid)"
cgt=$(( 16#$(sed -n 's/^SigCgt:\t*//p' "/proc/$pid/status") ))
blk=$(( 16#$(sed -n 's/^SigBlk:\t*//p' "/proc/$pid/status") ))
lab_log "journald SIGHUP caught: $(( (cgt & sighup_bit) != 0 )), blocked: $(( (blk & sighup_bit) != 0 ))"
lab_check "journald 252 cannot be reloaded (CanReload=no)" test "$(systemctl show -p CanReload --value systemd-journald)" = no

lab_check "no agent drop-in before the test" test ! -e "$dropin"
token="syscfg-before-$(lab_run_id)"
echo "$token" | systemd-cat -t lab-syscfg -p info
lab_wait 30 "the marker line is in the journal" sh -c "journalctl -t lab-syscfg -o cat --no-pager | grep -qx '$token'"

cat > /tmp/on.json <<'JSON'
{"components": [], "modules": [],
 "agent": {"agent-syscfg": {"attributes": {"logging": {"system_max_use": "64M", "runtime_max_use": "16M"}}}}}
JSON
cat > /tmp/off.json <<'JSON'
{"components": [], "modules": [], "agent": {"agent-syscfg": {"disable_subsystem": true}}}
JSON

pid_before="$(journald_pid)"
since="$(date '+%Y-%m-%d %H:%M:%S')"
out="$(svc-agent syscfg-apply --root / --config /tmp/on.json)"; echo "$out"
lab_check "apply reports logging applied" grep -q '^logging: applied' <<<"$out"
lab_check "apply restarted journald" grep -qx 'services: systemctl restart systemd-journald.service' <<<"$out"
lab_log "drop-in:"; cat "$dropin"
cat_config | tail -n 8
lab_check "cat-config shows SystemMaxUse=64M" sh -c "systemd-analyze cat-config systemd/journald.conf --no-pager | grep -qx 'SystemMaxUse=64M'"
lab_check "cat-config shows RuntimeMaxUse=16M" sh -c "systemd-analyze cat-config systemd/journald.conf --no-pager | grep -qx 'RuntimeMaxUse=16M'"
lab_check "journald is active" systemctl is-active --quiet systemd-journald
lab_check "journald was restarted (new PID)" test "$(journald_pid)" != "$pid_before"
lab_wait 60 "journald reports the new 64M system limit" sh -c "journalctl -u systemd-journald --since '$since' -o cat --no-pager | grep -q 'System Journal.*max 64.0M'"
journalctl -u systemd-journald --since "$since" -o cat --no-pager | grep 'Journal' || true
lab_check "the line written before the restart is still in the journal" sh -c "journalctl -t lab-syscfg -o cat --no-pager | grep -qx '$token'"
token2="syscfg-after-$(lab_run_id)"
echo "$token2" | systemd-cat -t lab-syscfg -p info
lab_wait 30 "a line written after the restart is stored" sh -c "journalctl -t lab-syscfg -o cat --no-pager | grep -qx '$token2'"
lab_check "the record lists the drop-in" grep -q "$dropin" /opt/svc/syscfg-state.json

pid_applied="$(journald_pid)"
out="$(svc-agent syscfg-apply --root / --config /tmp/on.json)"; echo "$out"
lab_check "second apply: logging unchanged" grep -q '^logging: unchanged' <<<"$out"
lab_check "second apply restarted nothing" test "$(journald_pid)" = "$pid_applied"

since="$(date '+%Y-%m-%d %H:%M:%S')"
out="$(svc-agent syscfg-apply --root / --config /tmp/off.json)"; echo "$out"
lab_check "disable reports logging reverted" grep -q '^logging: reverted' <<<"$out"
lab_check "the drop-in is gone" test ! -e "$dropin"
lab_check "cat-config no longer shows the limits" sh -c "! systemd-analyze cat-config systemd/journald.conf --no-pager | grep -Eq '^(SystemMaxUse=64M|RuntimeMaxUse=16M)$'"
lab_check "journald is active" systemctl is-active --quiet systemd-journald
lab_check "journald was restarted on revert" test "$(journald_pid)" != "$pid_applied"
lab_wait 60 "journald reports its system journal again" sh -c "journalctl -u systemd-journald --since '$since' -o cat --no-pager | grep -q 'System Journal.*max'"
limit_line="$(journalctl -u systemd-journald --since "$since" -o cat --no-pager | grep 'System Journal.*max' | tail -n1)"
lab_log "after revert: $limit_line"
lab_check "journald's own limit applies again (not 64M)" bash -c '! grep -q "max 64.0M" <<<"$0"' "$limit_line"
lab_check "both marker lines survived" sh -c "journalctl -t lab-syscfg -o cat --no-pager | grep -cx 'syscfg-.*-$(lab_run_id)' | grep -qx 2"
lab_check "the record is empty" python3 -c "import json,sys; d=json.load(open('/opt/svc/syscfg-state.json')); sys.exit(0 if d['files']==[] and not d['journald_restart_pending'] else 1)"
