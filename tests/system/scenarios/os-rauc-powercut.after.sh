#!/bin/bash
# Slot A after the cut during RAUC's write: the boot loader never chose the half-written slot;
# the agent says the install was interrupted and installs again; the lines queued before the
# cut arrive once. Then the app is taken away (the gate on slot B will wait for it) and the
# machine reboots into slot B.
set -euo pipefail
. "$LAB/lab-lib.sh"
app=$LAB_RAUC_APP
lab_data_mounted
lab_check "booted slot A (/dev/vda) after the cut" lab_booted_from a /dev/vda
lab_check "the cut came before RAUC finished" sh -c \
    '! journalctl -b -1 -u svc-agent -o cat | grep -q "installed by RAUC"'
lab_log "boot loader after the cut: primary $(/usr/lib/lab/rauc-lab-boot get-primary), slot B $(/usr/lib/lab/rauc-lab-boot get-state b)"
lab_check "the boot loader did not choose the half-written slot B" test "$(/usr/lib/lab/rauc-lab-boot next)" = a
rmdir "$app/logs.jsonl"   # the app takes logs again
lab_wait 180 "svc-agent.service active on slot A" systemctl is-active --quiet svc-agent.service
lab_wait 120 "the agent reports the interrupted install" sh -c \
    'journalctl -b -u svc-agent -o cat | grep -q "OS 2.0.0-lab: the install was interrupted"'
lab_wait 300 "the main phase's queued lines arrived" lab_rauc_shipped "$app" "starting (pid $(cat /data/lab/pid-main)," 1
lab_check "every line shipped so far arrived once, in order" lab_rauc_log_whole "$app"
lab_wait 900 "installed again, the agent asked for the reboot into the new slot" lab_rauc_reboot_asked
journalctl -b -u svc-agent -o short-unix --no-pager | grep -E 'OS |rebooting' || true
lab_check "RAUC made slot B primary" test "$(/usr/lib/lab/rauc-lab-boot get-primary)" = b
lab_check "RAUC: rootfs.1 holds bundle 2.0.0-lab" test "$(lab_rauc_slot_field rootfs.1 bundle.version)" = 2.0.0-lab
# The app away for slot B's first boot (the gate cannot pass before the next cut): its answer
# gone, its log file a folder (the lines stay queued). Not the directory itself: the agent
# makes it again to write its status. The agent is stopped first (its reboot is asked for
# already), so that no append races the swap.
lab_check "stop the agent for the swap" systemctl stop svc-agent.service
mv "$app/poll.json" "$app/poll.json.held"
mv "$app/logs.jsonl" "$app/logs.jsonl.1"
mkdir "$app/logs.jsonl"
sync
lab_rauc_reboot
