#!/bin/bash
# An air-gapped machine updated from USB sticks (issue 21; docs/releases.md). Its app address
# is file:///media/svc-update, a mount point; the vendor's key is /etc/svc-signing.pub. Each
# stick (made on the host by air-gap-usb.host.sh with svc-release) is hot-plugged through the
# QEMU monitor, mounted read-only, and the agent told with a SIGHUP (what a udev rule does):
#   good      svc-server 0.2.0 is installed and runs;
#   tampered  a changed binary with an edited answer: refused (bad signature), nothing changes;
#   old       a validly signed 0.1.0, older than the running 0.2.0: refused as a replay,
#             nothing changes.
# lab-timeout: 600
# lab-needs: v2
# lab-needs: usb
set -euo pipefail
. "$LAB/lab-lib.sh"

media=/media/svc-update
mkdir -p "$media"
install -m 0644 /lab/share/vendor.pub /etc/svc-signing.pub
lab_credentials "$media"
# An image with svc-server 0.1.0 pre-installed, as the Yocto and Buildroot recipes make it.
ver=$(svc-server version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
mkdir -p /opt/svc/cache /opt/svc/bin
cp /lab/bin/svc-server "/opt/svc/cache/svc-server-$ver"
ln -sfn "../cache/svc-server-$ver" /opt/svc/bin/svc-server
# No stick at the first start: the agent's wait for first contact (docs/agent.md, at most 60 s)
# would only delay svc-server's start and `svc-agent install`'s return by its whole bound
# (93 s of the scenario, 59 of them that wait). Its documented setting bounds it to 5 s here;
# every stick is then read on the SIGHUP, as before.
mkdir -p /etc/systemd/system/svc-agent.service.d
printf '[Service]\nEnvironment=SVC_AGENT_FIRST_CONTACT_SECS=5\n' > /etc/systemd/system/svc-agent.service.d/lab-first-contact.conf
lab_check "svc-agent install" svc-agent install

insert() { # insert NAME: plug the stick, mount it read-only, tell the agent to look now
    lab_usb plug "$1"
    lab_check "mount stick $1" mount -o ro "$(blkid -c /dev/null -L "svc-$1")" "$media"
    lab_check "SIGHUP to the agent" kill -HUP "$(systemctl show -p MainPID --value svc-agent)"
}
remove() { # remove NAME
    lab_check "umount stick $1" umount "$media"
    lab_usb unplug "$1"
}
runs() { # runs VERSION: svc-server VERSION is the link target and the running process
    [ "$(readlink /opt/svc/bin/svc-server)" = "../cache/svc-server-$1" ] || return 1
    p=$(pgrep -x svc-server | head -n1)
    [ -n "$p" ] && [ "$(readlink "/proc/$p/exe")" = "/opt/svc/cache/svc-server-$1" ]
}
journal_has() { journalctl -b -u svc-agent -o cat | grep -qF "$1"; }

insert good
lab_wait 240 "svc-server 0.2.0 from the stick runs" runs 0.2.0
remove good
cache_before=$(ls /opt/svc/cache)

insert tampered
lab_wait 180 "the tampered stick refused" journal_has \
    "svc-server update failed: signature check failed: bad signature for svc-server 0.3.0"
lab_check "svc-server 0.2.0 still runs" runs 0.2.0
lab_check "nothing new in the cache" test "$(ls /opt/svc/cache)" = "$cache_before"
remove tampered

insert old
lab_wait 180 "the replayed older release refused" journal_has \
    "svc-server: refusing $ver, older than the running 0.2.0"
lab_check "svc-server 0.2.0 still runs" runs 0.2.0
lab_check "nothing new in the cache" test "$(ls /opt/svc/cache)" = "$cache_before"
lab_check "versions.json: current 0.2.0" python3 -c 'import json,sys; sys.exit(json.load(open("/opt/svc/versions.json"))["svc-server"]["current"] != "0.2.0")'
remove old
lab_log "ok: updated from the good stick; the tampered and the replayed ones changed nothing"
