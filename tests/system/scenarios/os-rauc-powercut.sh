#!/bin/bash
# Real RAUC (issue 43), two power cuts on the way to a new OS. Main phase, slot A: the file://
# app offers the good OS 2.0.0-lab; the app's log file is a folder, so the agent's lines stay
# in its queue on the data partition; the power is cut while RAUC writes slot B (the agent's
# state says installing, slot B's disk has taken 128 MiB). After phase (slot A): the boot
# loader kept slot A, the agent reports the interrupted install and installs again, the queued
# lines arrive; the app is taken away and the machine reboots into slot B. Final phase: the
# first boot of slot B, the power cut while the gate waits for the app. Fourth phase: slot B
# again, the app back, the gate passes, marked good, reported; every queued line arrived once,
# in order (lab_rauc_log_whole).
# lab-timeout: 1200
# lab-needs: data-disk
# lab-data-size: 1G
# lab-needs: slot-b
set -euo pipefail
. "$LAB/lab-lib.sh"
app=$LAB_RAUC_APP
lab_check "booted slot A (/dev/vda)" lab_booted_from a /dev/vda
lab_rauc_slot_a
mkdir "$app/logs.jsonl"   # a folder: every append fails, the agent's lines stay queued
written0=$(lab_rauc_slot_b_written_mib)
lab_check "start the image's agent" systemctl start svc-agent.service
pid=$(systemctl show -p MainPID --value svc-agent.service)
echo "$pid" > /data/lab/pid-main && sync /data/lab/pid-main
lab_wait 900 "RAUC writes slot B (the agent's state: installing; 128 MiB written)" sh -c "
    grep -qi '\"installing\"' /data/svc/os.json &&
    [ \$(( \$(awk '{print \$7}' /sys/block/${LAB_SLOT_B_DEV#/dev/}/stat) / 2048 - $written0 )) -ge 128 ]"
lab_log "slot B: $(( $(lab_rauc_slot_b_written_mib) - written0 )) MiB written; os.json: $(cat /data/svc/os.json)"
lab_check "no reboot asked for yet" sh -c '! test -s "/var/lib/lab/reboot-$(cat /proc/sys/kernel/random/boot_id)"'
lab_rauc_powercut_now
