# shellcheck shell=bash
# Helpers for scenario scripts; sourced by the guest runner and by every scenario
# (`. "$LAB/lab-lib.sh"`). Scenarios run under bash with `set -euo pipefail`; a non-zero
# exit fails the scenario.

# The serial console the harness reads: the kernel's console= (ttyS0 on amd64, ttyAMA0 on arm64).
LAB_TTY="/dev/$(sed -n 's/.*console=\([a-zA-Z0-9]*\).*/\1/p' /proc/cmdline)"
[ "$LAB_TTY" != /dev/ ] || LAB_TTY=/dev/ttyS0
console() { echo "$*" > "$LAB_TTY"; }

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

# --- Wi-Fi lab helpers (mac80211_hwsim, NetworkManager, hostapd, netns) ---

# lab_radios N: N simulated radios, all managed by NetworkManager.
lab_radios() {
    lab_check "load mac80211_hwsim with $1 radios" modprobe mac80211_hwsim radios="$1"
    lab_wait 90 "NetworkManager manages the radios" sh -c \
        "[ \"\$(nmcli -t -f TYPE,STATE dev | grep -Ec '^wifi:(disconnected|connected)')\" -ge $1 ]"
}

# lab_no_ethernet: takes the guest's ethernet (qemu user networking, the default route) down,
# so that "the internet" (192.168.200.1) is reachable only through a Wi-Fi access point.
lab_no_ethernet() {
    local dev
    for dev in $(nmcli -t -f DEVICE,TYPE dev | sed -n 's/:ethernet$//p'); do
        nmcli dev disconnect "$dev" >/dev/null
    done
    lab_check "no default route left" sh -c '! ip route show default | grep -q .'
}

# lab_netns_radio IFACE NETNS: moves IFACE's radio into a namespace of its own (another host).
lab_netns_radio() {
    local phy
    phy="$(basename "$(readlink -f "/sys/class/net/$1/phy80211")")"
    ip netns add "$2"
    iw phy "$phy" set netns name "$2"
    ip netns exec "$2" ip link set lo up
}

# lab_ap NETNS IFACE SSID PSK NET [internet]: a WPA2 access point (hostapd) at NET.1/24 with
# DHCP (dnsmasq, router NET.1). With "internet", the check URL host 192.168.200.1:8080 is
# reachable through it (an address on the namespace's loopback and an HTTP server there).
# LAB_AP_EXTRA: more lines for hostapd's configuration (a control interface, say).
lab_ap() {
    local ns="$1" ifc="$2" ssid="$3" psk="$4" net="$5"
    cat > "/tmp/ap-$ns.conf" <<CONF
interface=$ifc
driver=nl80211
ssid=$ssid
hw_mode=g
channel=6
wpa=2
wpa_key_mgmt=WPA-PSK
rsn_pairwise=CCMP
wpa_passphrase=$psk
${LAB_AP_EXTRA:-}
CONF
    lab_ap_start "$ns" "$ifc" "$ssid" "$net" "${6:-}"
}

# lab_ap_start NETNS IFACE SSID NET [internet]: starts the access point of /tmp/ap-NETNS.conf
# (hostapd) with lab_ap's address, DHCP and "internet" (lab_ap; an enterprise AP writes
# its own configuration first).
lab_ap_start() {
    local ns="$1" ifc="$2" ssid="$3" net="$4"
    ip netns exec "$ns" ip addr add "$net.1/24" dev "$ifc"
    ip netns exec "$ns" hostapd -B -P "/run/ap-$ns.pid" "/tmp/ap-$ns.conf" > "/tmp/ap-$ns.log"
    ip netns exec "$ns" dnsmasq --conf-file=/dev/null --port=0 --interface="$ifc" --bind-interfaces \
        --dhcp-range="$net.10,$net.50,1h" --dhcp-option=3,"$net.1" --pid-file="/run/dhcp-$ns.pid"
    if [ "${5:-}" = internet ]; then
        ip netns exec "$ns" ip addr add 192.168.200.1/32 dev lo
        mkdir -p "/tmp/www-$ns" && echo "online via $ssid" > "/tmp/www-$ns/index.html"
        ip netns exec "$ns" python3 -m http.server 8080 --bind 192.168.200.1 --directory "/tmp/www-$ns" \
            > "/tmp/www-$ns.log" 2>&1 &
    fi
}

# lab_ap_down NETNS / lab_ap_up NETNS: the access point disappears / comes back.
lab_ap_down() { kill "$(cat "/run/ap-$1.pid")"; }
lab_ap_up() { ip netns exec "$1" hostapd -B -P "/run/ap-$1.pid" "/tmp/ap-$1.conf" >> "/tmp/ap-$1.log"; }

# lab_phone_start SSID PSK [NAME]: the phone (wlan1 in namespace "phone") starts joining a
# WPA2-only (RSN, CCMP) network as a phone does: /tmp/NAME.conf, its log /tmp/NAME.log
# (NAME: phone). lab_phone_cli ARGS...: wpa_cli on the phone. lab_phone_associated: whether it
# is associated now. lab_phone_stop: its supplicant stopped.
lab_phone_start() {
    local name="${3:-phone}"
    cat > "/tmp/$name.conf" <<CONF
ctrl_interface=/run/wpa_supplicant-phone
network={
    ssid="$1"
    psk="$2"
    key_mgmt=WPA-PSK
    proto=RSN
    pairwise=CCMP
}
CONF
    ip netns exec phone wpa_supplicant -B -i wlan1 -D nl80211 -c "/tmp/$name.conf" -P /run/phone-wpa.pid -f "/tmp/$name.log"
}
lab_phone_cli() { ip netns exec phone wpa_cli -p /run/wpa_supplicant-phone -i wlan1 "$@"; }
lab_phone_associated() { lab_phone_cli status | grep -q wpa_state=COMPLETED; }
lab_phone_stop() {
    kill "$(cat /run/phone-wpa.pid)"
    lab_wait 20 "phone supplicant stopped" sh -c '! kill -0 $(cat /run/phone-wpa.pid)'
    rm -f /run/phone-wpa.pid
}

# lab_phone_join SSID PSK: the phone joins, waits until it is associated, and takes
# 10.42.0.50/24 (the hotspot's subnet).
lab_phone_join() {
    lab_phone_start "$1" "$2"
    lab_wait 120 "the phone associated with $1" lab_phone_associated
    ip netns exec phone ip addr add 10.42.0.50/24 dev wlan1
}

# lab_argv_watch OUT SECS: every process's arguments ("/proc/PID/cmdline:ARGS", NULs as
# spaces, one line per line of an argument) appended to OUT by one python3 process that sweeps
# /proc every SECS and writes each line it has not written yet; returns after the first sweep,
# the sweeper's pid in LAB_ARGV_WATCH. A shell loop forking ps (or grep, tr, sleep) per sweep
# kept an emulated core busy and slowed everything it watched (install-sh, prov-eap).
lab_argv_watch() {
    rm -f /tmp/argv-watch.ready
    python3 - /tmp/argv-watch.ready "$2" >> "$1" <<'PY' &
import os, sys, time
out, seen, ready, every = sys.stdout.buffer, set(), sys.argv[1], float(sys.argv[2])
while True:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read()
        except OSError:
            continue  # gone since the listing
        if not args:
            continue  # a kernel thread
        for line in args.replace(b"\0", b" ").split(b"\n"):
            line = b"/proc/%s/cmdline:%s\n" % (pid.encode(), line)
            if line not in seen:
                seen.add(line)
                out.write(line)
    out.flush()
    if ready:
        open(ready, "w").close()
        ready = None
    time.sleep(every)
PY
    # shellcheck disable=SC2034 # read by the scenarios that source this file
    LAB_ARGV_WATCH=$!
    lab_wait 120 "the argument watcher swept /proc once" test -e /tmp/argv-watch.ready
}

# lab_ms: milliseconds since the epoch.
lab_ms() { date +%s%3N; }

# lab_usb plug|unplug NAME: asks the host (a `# lab-needs: usb` scenario whose host hook runs
# host_usb_media) to hot-plug $LAB_WORK/usb-NAME.img as a USB stick, or to pull it out. A
# plug waits until a file system labelled svc-NAME is visible; an unplug until it is gone.
lab_usb() {
    console "@@USB@@ $1 $2"
    if [ "$1" = plug ]; then
        lab_wait 90 "USB stick $2 plugged" sh -c "blkid -c /dev/null -L svc-$2 >/dev/null"
    else
        lab_wait 90 "USB stick $2 pulled out" sh -c "! blkid -c /dev/null -L svc-$2 >/dev/null"
    fi
}
# --- Read-only root with a data partition (issue 23; scenarios with `# lab-needs: data-disk`
# and a host hook that copies dist/'s unit and drop-in template into /lab/share) ---

LAB_RO_STATE=/data/svc
LAB_RO_CREDS=/data/etc
LAB_RO_AGENT=/usr/lib/svc-agent/svc-agent

# lab_ro_layout ROOT AGENT_BINARY ROOT_DEVICE: the data-partition image layout with
# SVC_STATE_DIR=/data/svc under ROOT ("" for the running system), as meta-svc or the Buildroot
# package make it (docs/packaging.md): the image's agent in /usr/lib/svc-agent, the unit and
# the drop-in filled in from dist/svc-agent-data-partition.conf.in, the unit enabled, /data on
# the svcdata disk, /var/lib/lab bind-mounted from it (the file:// management directory), the
# root (ROOT_DEVICE) read-only in fstab.
lab_ro_layout() {
    local r="$1" share=/lab/share unitdir=/usr/lib/systemd/system
    install -D -m 0755 "$2" "$r$LAB_RO_AGENT"
    install -D -m 0644 "$share/svc-agent.service" "$r$unitdir/svc-agent.service"
    # /lab: the lab disk's mount point, which the runner cannot make on a read-only root.
    mkdir -p "$r$unitdir/svc-agent.service.d" "$r/data" "$r/var/lib/lab" "$r/etc/profile.d" \
        "$r/etc/systemd/system/multi-user.target.wants" "$r/lab"
    sed -e "s#@STATE_DIR@#$LAB_RO_STATE#g" -e "s#@CREDENTIALS_DIR@#$LAB_RO_CREDS#g" \
        -e "s#@IMAGE_AGENT@#$LAB_RO_AGENT#g" "$share/svc-agent-data-partition.conf.in" \
        > "$r$unitdir/svc-agent.service.d/data-partition.conf"
    ln -sf "$unitdir/svc-agent.service" "$r/etc/systemd/system/multi-user.target.wants/svc-agent.service"
    printf 'SVC_STATE_DIR=%s\nSVC_CREDENTIALS_DIR=%s\nexport SVC_STATE_DIR SVC_CREDENTIALS_DIR\n' \
        "$LAB_RO_STATE" "$LAB_RO_CREDS" > "$r/etc/profile.d/svc-agent.sh"
    cat > "$r/etc/fstab" <<FSTAB
$3 / ext4 ro 0 1
LABEL=svcdata /data ext4 defaults 0 2
/data/lab /var/lib/lab none bind,x-systemd.requires-mounts-for=/data 0 0
FSTAB
}

# lab_ro_image AGENT_BINARY: turns the running guest (slot A, /dev/vda) into a read-only image
# with the data-partition layout (lab_ro_layout), mounts /data and /var/lib/lab, then makes
# the running root read-only too. Nothing is started.
lab_ro_image() {
    lab_ro_layout "" "$1" /dev/vda
    systemctl daemon-reload
    lab_check "the data partition is mounted" systemctl start data.mount
    mkdir -p /data/lab
    lab_check "/var/lib/lab is on the data partition" systemctl start var-lib-lab.mount
    lab_remount_ro
}

# lab_remount_ro: makes the running root read-only. Files open for writing on it keep the
# kernel from that (EBUSY): journald's in /var/log/journal (sent back to /run) and
# unattended-upgrades' shutdown log (its service stopped), as a read-only image has neither.
lab_remount_ro() {
    journalctl --relinquish-var 2>/dev/null || true
    systemctl stop unattended-upgrades.service 2>/dev/null || true
    sync
    local tries=0
    until mount -o remount,ro / || [ "$tries" -ge 10 ]; do
        tries=$((tries + 1))
        # Who still writes to /: every descriptor open for writing on a regular file of it.
        for fd in /proc/[0-9]*/fd/*; do
            t=$(readlink "$fd" 2>/dev/null) || continue
            case "$t" in /dev/*|/proc/*|/sys/*|/run/*|/lab/*|/data/*|/var/lib/lab/*|socket:*|pipe:*|anon_inode:*|/memfd:*) continue ;; esac
            flags=$(sed -n 's/^flags:\t*//p' "${fd%/fd/*}/fdinfo/${fd##*/}" 2>/dev/null)
            case "$flags" in *[1-3]) echo "open for writing: $fd -> $t ($(cat "${fd%/fd/*}/comm" 2>/dev/null))" ;; esac
        done
        sleep 1
    done
    lab_check "the root file system is read-only" lab_root_ro
}

# lab_root_ro: the root file system is mounted read-only (and writing to it fails).
lab_root_ro() {
    findmnt -no OPTIONS / | tr ',' '\n' | grep -qx ro && ! touch /.lab-rw-probe 2>/dev/null && return 0
    echo "root: $(findmnt -no SOURCE,OPTIONS /)" >&2
    return 1
}

# Slot B of an A/B pair (`# lab-needs: slot-b`): a second root disk, another overlay of the
# guest image, after the lab and data disks.
LAB_SLOT_B_DEV=/dev/vdd

# lab_ro_install_slot AGENT_BINARY: what an A/B updater (RAUC, SWUpdate, Mender) does with a
# new system image: writes the inactive slot B (the second root disk, never the running
# root) with the data-partition layout and AGENT_BINARY as the image's agent. The disk is
# unmounted again; nothing on the running system or the data partition changes.
lab_ro_install_slot() {
    local mnt=/run/lab-slot-b
    lab_check "slot B ($LAB_SLOT_B_DEV) is not the running root" \
        sh -c "[ \"\$(findmnt -no SOURCE /)\" != $LAB_SLOT_B_DEV ]"
    mkdir -p "$mnt"
    lab_check "mount slot B" mount -t ext4 "$LAB_SLOT_B_DEV" "$mnt"
    lab_ro_layout "$mnt" "$1" "$LAB_SLOT_B_DEV"
    lab_check "slot B's image agent is $("$1" version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')" \
        cmp "$1" "$mnt$LAB_RO_AGENT"
    sync
    lab_check "unmount slot B" umount "$mnt"
}

# lab_boot_slot a|b: the slot the next boot starts from, as a boot loader's variable that the
# A/B updater sets (the harness reads the console line; the power cut or reboot follows).
lab_boot_slot() {
    console "@@SLOT@@ $1"
}

# lab_booted_slot: the slot this boot came from (a or b).
lab_booted_slot() {
    sed -n 's/.*svc\.lab\.slot=\([ab]\).*/\1/p' /proc/cmdline
}

# lab_root_is DEVICE: the running root file system is DEVICE.
lab_root_is() { [ "$(findmnt -no SOURCE /)" = "$1" ]; }

# lab_image_agent_version: the version of the booted image's own agent.
lab_image_agent_version() {
    "$LAB_RO_AGENT" version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p'
}

# lab_booted_from SLOT DEVICE: this boot came from SLOT, and its root is DEVICE.
lab_booted_from() {
    [ "$(lab_booted_slot)" = "$1" ] && lab_root_is "$2" && return 0
    echo "booted slot '$(lab_booted_slot)', root $(findmnt -no SOURCE /)" >&2
    return 1
}

# lab_image_agent_is VERSION: the booted image's own agent is VERSION.
lab_image_agent_is() {
    local v
    v="$(lab_image_agent_version)" && [ "$v" = "$1" ] && return 0
    echo "the image's agent says: $("$LAB_RO_AGENT" version --json 2>&1 | head -c 300)" >&2
    return 1
}

# lab_data_mounted: waits for the data partition (an after or final phase reads the state a
# phase before left there; the runner's unit is ordered after multi-user.target, which mounts
# it, but the phase says so itself rather than trust that).
lab_data_mounted() { lab_wait 180 "the data partition is mounted" mountpoint -q /data; }

# lab_ro_credentials MGMT_DIR: the credentials on the data partition (0600), as the portal
# or a factory step writes them there.
lab_ro_credentials() {
    ( umask 077; mkdir -p "$LAB_RO_CREDS"
      printf '{"cloud": {"app_address": "file://%s", "id": "lab-part-%s", "secret": "lab-secret-%s"}}\n' \
          "$1" "$(lab_run_id)" "$(lab_run_id)" > "$LAB_RO_CREDS/svc.json" )
}

# lab_running_agent: the file the running agent was started from.
lab_running_agent() {
    readlink "/proc/$(systemctl show -p MainPID --value svc-agent.service)/exe"
}

# lab_agent_is FILE: the running agent was started from FILE.
lab_agent_is() { [ "$(lab_running_agent)" = "$1" ]; }

# --- Real RAUC (issue 43; os-rauc-* scenarios, `# lab-needs: data-disk`, `slot-b`; the host
# hook's tests/system/rauc-lab.sh puts the overlay in /lab/share/rauc/overlay) ---

# lab_rauc_slot_a: makes the running slot A what the bundles' slot image is: the overlay (rauc
# 1.8 from Debian's package, its service, D-Bus policy, system.conf, keyring, the lab's
# `custom` backend and reboot, the agent's data-partition layout and vendor key), /data
# mounted, RAUC's service started, the host's management directory copied to
# $LAB_RAUC_APP (/var/lib/lab/mgmt on the data partition: the agent's sandbox may write
# there, not on /lab) and the credentials for it. The agent is not started.
LAB_RAUC_APP=/var/lib/lab/mgmt
lab_rauc_slot_a() {
    cp -a /lab/share/rauc/overlay/. /
    echo "${LAB_RAUC_OS_A:-1.0.0-lab}" > /etc/lab-os-version
    systemctl daemon-reload
    lab_check "the D-Bus policy for RAUC is loaded" systemctl reload dbus.service
    lab_check "the data partition is mounted" systemctl start data.mount
    mkdir -p /data/lab
    lab_check "/var/lib/lab is on the data partition" systemctl start var-lib-lab.mount
    lab_check "the management directory on the data partition" cp -a /lab/share/app "$LAB_RAUC_APP"
    lab_ro_credentials "$LAB_RAUC_APP"
    lab_check "RAUC's service runs" systemctl start rauc.service
}

# lab_rauc_reboot_asked: the agent asked for a reboot during this boot (the lab's systemctl).
lab_rauc_reboot_asked() { test -s "/var/lib/lab/reboot-$(cat /proc/sys/kernel/random/boot_id)"; }

# lab_rauc_reboot: the reboot the agent asked for, as the lab makes one: the boot loader's
# choice (rauc-lab-boot next) on the console, then the power cut.
lab_rauc_reboot() {
    lab_boot_slot "$(/usr/lib/lab/rauc-lab-boot next)"
    lab_powercut
}

# lab_rauc_powercut_now: the power cut while RAUC writes slot B. lab_powercut's global sync
# would wait for RAUC's own writes (hundreds of MB under TCG) and could let the install end
# first; this one makes only the journal durable (the scenario's own files are synced by
# name), then asks for the cut.
lab_rauc_powercut_now() {
    journalctl --sync 2>/dev/null || true
    lab_log "power cut requested while RAUC writes"
    console "@@POWERCUT@@"
    sleep infinity
}

# lab_rauc_slot_b_written_mib: MiB written to slot B's disk since boot (the block layer's count).
lab_rauc_slot_b_written_mib() {
    echo $(( $(awk '{print $7}' "/sys/block/${LAB_SLOT_B_DEV#/dev/}/stat") / 2048 ))
}

# lab_rauc_shipped MGMT TEXT N: N shipped lines in MGMT's log files (logs.jsonl.1, moved aside
# by a scenario, then logs.jsonl) contain TEXT.
lab_rauc_shipped() {
    [ "$(cat "$1"/logs.jsonl.1 "$1"/logs.jsonl 2>/dev/null | grep -c "$2")" -ge "$3" ]
}

# lab_rauc_log_whole MGMT: every line the agent queued and shipped so far arrived exactly once
# and in order: the queue's ids run 1, 2, ... N without a gap or a repeat (pids repeat across
# boots of a deterministic guest; the ids do not).
lab_rauc_log_whole() {
    # Each file only if it is there: a missing one would fail the pipe (pipefail).
    { [ ! -f "$1/logs.jsonl.1" ] || cat "$1/logs.jsonl.1"; [ ! -f "$1/logs.jsonl" ] || cat "$1/logs.jsonl"; } | python3 -c '
import json, sys
ids = [json.loads(l)["id"] for l in sys.stdin if l.strip()]
print(f"{len(ids)} lines shipped, ids {ids[:1]}..{ids[-1:]}")
sys.exit(0 if ids == list(range(1, len(ids) + 1)) else 1)'
}

# lab_rauc_slot_field SLOT KEY: a field of `rauc status --output-format=json` for slot SLOT
# (rootfs.0|rootfs.1): boot_status, state, bundle version (KEY bundle.version), or of the
# system (SLOT "": booted (its device), boot_primary (a slot name), compatible).
lab_rauc_slot_field() {
    rauc status --detailed --output-format=json 2>/dev/null | python3 -c '
import json, sys
slot, key = sys.argv[1], sys.argv[2]
s = json.load(sys.stdin)
if slot:
    s = next(d for x in s["slots"] for n, d in x.items() if n == slot)
    if key.startswith("bundle."):
        s = (s.get("slot_status") or {}).get("bundle") or {}
        key = key[7:]
    elif key not in s:
        s = s.get("slot_status") or {}
print(s.get(key) if s.get(key) is not None else "")' "$1" "$2"
}

# lab_goosebit_device [FIELD VALUE]: the device lab-rauc as the host's gooseBit lists it (JSON,
# {} when not there; GB_PORT and GB_TOKEN from /lab/share/goosebit.env, os-rauc-good's hawkBit
# phase); with FIELD (a dotted path, e.g. hardware.model) and VALUE, it succeeds only when
# that field has that value.
# shellcheck disable=SC2120
lab_goosebit_device() {
    curl -sf -H "Authorization: Bearer $GB_TOKEN" "http://10.0.2.2:$GB_PORT/api/v1/devices" | python3 -c '
import json, sys
d = next((d for d in json.load(sys.stdin)["devices"] if d["id"] == "lab-rauc"), {})
print(json.dumps(d))
if len(sys.argv) > 2:
    v = d
    for k in sys.argv[1].split("."):
        v = (v or {}).get(k)
    sys.exit(0 if v == sys.argv[2] else 1)' "$@"
}
