#!/bin/bash
# Real RAUC (issue 43), an OS image whose svc-server fails the health gate. Main phase, slot A
# (lab_rauc_slot_a): the file:// app offers OS 2.0.1-lab, a bundle that `rauc bundle` made from
# the lab's slot image with one mistake of the image's own (rauc-lab.sh, rauc_lab_bad_overlay:
# svc-server is handed a machine id it refuses). The agent downloads and verifies it, RAUC
# writes slot B, the reboot goes there. After phase (slot B): svc-server crashes, the gate
# fails, RAUC marks rootfs.1 bad, the agent asks for the reboot back. Final phase (slot A): the
# old slot runs svc-server, the status reports 2.0.1-lab bad with the reason, not retried.
# lab-timeout: 1200
# lab-needs: data-disk
# lab-data-size: 1G
# lab-needs: slot-b
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_check "booted slot A (/dev/vda)" lab_booted_from a /dev/vda
lab_rauc_slot_a
lab_check "RAUC: booted rootfs.0" test "$(lab_rauc_slot_field rootfs.0 state)" = booted
lab_check "start the image's agent" systemctl start svc-agent.service
lab_wait 900 "the agent asked for the reboot into the new slot" lab_rauc_reboot_asked
journalctl -b -u svc-agent -o short-unix --no-pager | grep -E 'OS |rebooting' || true
lab_check "RAUC made slot B primary" test "$(/usr/lib/lab/rauc-lab-boot get-primary)" = b
lab_rauc_reboot
