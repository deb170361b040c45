#!/bin/bash
# Real RAUC (issue 43): two bundles that must not be installed, then an OS image whose
# svc-server fails the health gate. Main phase, slot A (lab_rauc_slot_a):
# - OS 2.1.0-lab, vendor-signed but signed for RAUC by a key outside its keyring: the agent's
#   checks pass, RAUC refuses it; then OS 2.2.0-lab, the same bundle with a wrong vendor
#   signature: the agent refuses it before RAUC sees it. Each reported in the status; slot A
#   keeps running and stays primary, slot B is not written, no reboot is asked for. (These two
#   were os-rauc-refused, a boot of its own; os-rauc-bad-gate.host.sh.)
# - The app then offers OS 2.0.1-lab, a bundle that `rauc bundle` made from the lab's slot image
#   with one mistake of the image's own (rauc-lab.sh, rauc_lab_bad_overlay: svc-server is
#   handed a machine id it refuses). The agent downloads and verifies it, RAUC writes slot B,
#   the reboot goes there.
# After phase (slot B): svc-server crashes, the gate fails, RAUC marks rootfs.1 bad, the agent
# asks for the reboot back. Final phase (slot A): the old slot runs svc-server, the status
# reports 2.0.1-lab bad with the reason, not retried.
# lab-timeout: 1200
# lab-needs: data-disk
# The management directory's two bundles (575 MB), its copy on /data and the downloads.
# lab-data-size: 2G
# lab-needs: slot-b
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_check "booted slot A (/dev/vda)" lab_booted_from a /dev/vda
lab_rauc_slot_a
lab_check "RAUC: booted rootfs.0" test "$(lab_rauc_slot_field rootfs.0 state)" = booted
app=$LAB_RAUC_APP
agent_log() { journalctl -b -u svc-agent -o cat --no-pager; }
rauc_installs() { journalctl -b -u rauc -o cat --no-pager | grep -c 'installing' || true; }
os_status() { # os_status PYTHON_CONDITION_ON_o (status.json is written when the status changes)
    python3 -c "
import json, sys
o = json.load(open('$app/status.json')).get('os') or {}
print(o); sys.exit(0 if ($1) else 1)"
}
answer() { cp "$app/$1" "$app/.poll.json.tmp" && mv "$app/.poll.json.tmp" "$app/poll.json"; }

lab_check "start the image's agent" systemctl start svc-agent.service
lab_wait 900 "RAUC refused the bundle signed with another key" sh -c \
    "journalctl -b -u svc-agent -o cat | grep 'OS 2.1.0-lab refused' | grep -qi 'signature\|keyring\|verif'"
agent_log | grep 'OS ' || true
journalctl -b -u rauc -o cat --no-pager | tail -n 20 || true
lab_check "RAUC was asked (the agent's own checks passed)" test "$(rauc_installs)" -ge 1
lab_wait 120 "the status reports 2.1.0-lab not installed" os_status \
    "str(o.get('last_result')).startswith('refused 2.1.0-lab') and 'signature' in str(o.get('last_result'))"
before=$(rauc_installs)

# The same bundle with a wrong vendor signature.
answer poll-badsig.json
lab_wait 300 "the agent refused 2.2.0-lab's vendor signature" sh -c \
    "journalctl -b -u svc-agent -o cat | grep 'OS 2.2.0-lab refused' | grep -qi 'signature'"
agent_log | grep '2.2.0-lab' || true
lab_check "RAUC never saw 2.2.0-lab" test "$(rauc_installs)" = "$before"
lab_check "RAUC's log never names 2.2.0-lab's bundle" sh -c '! journalctl -b -u rauc -o cat | grep -q 2.2.0-lab'
lab_wait 120 "the status reports 2.2.0-lab refused" os_status \
    "str(o.get('last_result')).startswith('refused 2.2.0-lab') and 'signature' in str(o.get('last_result'))"

lab_check "still slot A, primary A" test "$(lab_rauc_slot_field rootfs.0 state)/$(lab_rauc_slot_field "" boot_primary)" = booted/rootfs.0
lab_check "slot B not written (no bundle recorded)" test -z "$(lab_rauc_slot_field rootfs.1 bundle.version)"
lab_check "no reboot asked for" test ! -e "/var/lib/lab/reboot-$(cat /proc/sys/kernel/random/boot_id)"
lab_check "svc-agent.service still active" systemctl is-active --quiet svc-agent.service

# The image that fails its gate.
answer poll-bad-gate.json
lab_wait 900 "the agent asked for the reboot into the new slot" lab_rauc_reboot_asked
journalctl -b -u svc-agent -o short-unix --no-pager | grep -E 'OS |rebooting' || true
lab_check "RAUC made slot B primary" test "$(/usr/lib/lab/rauc-lab-boot get-primary)" = b
lab_rauc_reboot
