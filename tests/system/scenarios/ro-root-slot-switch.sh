#!/bin/bash
# A simulated A/B slot switch on a read-only root (issue 23), with two root disks and one data
# disk. Slot A (/dev/vda) is an image whose agent is 0.1.x, seeded onto the empty data
# partition at the first start. Then the A/B updater writes slot B (the second root disk,
# /dev/vdd: another overlay of the guest image) with an image whose agent is 0.2.0, switches
# the boot slot and the power goes. Phase 2 (ro-root-slot-switch.after.sh) boots slot B: its
# newer image agent becomes current on probation and proves healthy. Phase 3
# (ro-root-slot-switch.final.sh) boots slot A again (a fallback): its older image agent does
# not downgrade 0.2.0, and the state on the data partition is untouched.
# lab-timeout: 480
# lab-needs: v2
# lab-needs: data-disk
# lab-root: ro
# lab-needs: slot-b
set -euo pipefail
. "$LAB/lab-lib.sh"

v1=$(svc-agent version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
lab_check "booted slot A (/dev/vda)" lab_booted_from a /dev/vda
lab_ro_image /lab/bin/svc-agent
mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
cat > "$mgmt/poll.json" <<JSON
{"config": {"components": [], "modules": [], "agent": {"svc-server": {"disable_subsystem": true}}},
 "poll_interval_secs": 5}
JSON
lab_ro_credentials "$mgmt"
echo "$v1" > /data/lab/v1

lab_check "start the image's unit (slot A)" systemctl start svc-agent.service
lab_wait 120 "the image's agent $v1 runs from /data" lab_agent_is "/data/svc/cache/svc-agent-$v1"
lab_wait 120 "it proved healthy (known-good link)" test -L /data/svc/bin/svc-agent.stable
lab_wait 60 "status.json reached the app" test -s "$mgmt/status.json"
sha256sum /data/etc/svc.json > /data/lab/creds.sha

# The A/B updater: slot B gets an image whose agent is 0.2.0; the next boot is from slot B.
lab_ro_install_slot /lab/share/v2/svc-agent
lab_check "slot A's image is unchanged (agent $v1)" lab_image_agent_is "$v1"
lab_boot_slot b
lab_powercut
