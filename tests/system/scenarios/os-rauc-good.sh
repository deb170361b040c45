#!/bin/bash
# Real RAUC (issue 43), a good OS image through the agent's own protocol. Slot A (/dev/vda) is
# the lab's image with Debian's rauc, the lab's `custom` boot loader backend over the slot
# switch and the agent's data-partition layout (lab_rauc_slot_a); the file:// app offers
# svc-server and OS 2.0.0-lab, a bundle that `rauc bundle` made on the host from the lab's own
# slot image. The agent downloads and verifies it (sha256, size, the vendor's signature) into
# /data, RAUC checks its own signature and writes slot B (/dev/vdd), the agent asks for the
# reboot, the lab cuts the power and boots the slot the boot loader chose. Phase 2
# (os-rauc-good.after.sh): the health gate passes, slot B is marked good, reported; then the
# machine joins gooseBit on the host (board: RAUC's compatible) and takes the same good image
# as gooseBit's deployment (OS 2.0.2-lab) into slot A. Phase 3 (os-rauc-good.final.sh): slot
# A's gate passes, and only then gooseBit hears closed + success (Finished).
# lab-timeout: 1200
# lab-needs: data-disk
# lab-data-size: 1G
# lab-needs: slot-b
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_check "booted slot A (/dev/vda)" lab_booted_from a /dev/vda
lab_rauc_slot_a
rauc status --detailed --output-format=json || true
lab_check "RAUC: booted rootfs.0" test "$(lab_rauc_slot_field rootfs.0 state)" = booted
lab_check "RAUC: compatible svc-lab-amd64" test "$(lab_rauc_slot_field "" compatible)" = svc-lab-amd64
date +%s > /data/lab/t-offer
lab_check "start the image's agent" systemctl start svc-agent.service
lab_wait 900 "the agent asked for the reboot into the new slot" lab_rauc_reboot_asked
date +%s > /data/lab/t-reboot
journalctl -b -u svc-agent -o short-unix --no-pager | grep -E 'OS |rebooting' || true
lab_check "the agent's state: rebooting into rootfs.1" python3 -c '
import json, sys
p = json.load(open("/data/svc/os.json"))["phase"]
print(p); sys.exit(0 if "rebooting" in json.dumps(p).lower() and "rootfs.1" in json.dumps(p) else 1)'
lab_check "RAUC made slot B primary" test "$(/usr/lib/lab/rauc-lab-boot get-primary)" = b
lab_check "no bundle left in /data/svc/os" sh -c '! ls /data/svc/os/bundle-* 2>/dev/null'
lab_rauc_reboot
