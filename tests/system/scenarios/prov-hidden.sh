#!/bin/bash
# comitup #24: a network whose access point hides its SSID, saved as hidden (`"hidden": true`
# in the network entry), is joined, and rejoined after the access point dropped out: the
# machine opens its hotspot after the offline timeout, the access point comes back (still
# hidden), the hotspot's retries of the known networks find it by name.
# Needs: `svc-agent provision` (hidden networks probed for by name).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
psk="attic-$(lab_run_id)"
lab_radios 2
lab_netns_radio wlan1 home
lab_ap home wlan1 lab-attic "$psk" 192.168.77 internet
# The access point hides its SSID (beacons carry an empty one; probes by name are answered).
echo "ignore_broadcast_ssid=1" >> /tmp/ap-home.conf
lab_ap_down home
lab_wait 20 "the access point stopped" sh -c '! kill -0 "$(cat /run/ap-home.pid)" 2>/dev/null'
lab_ap_up home
lab_credentials /var/lib/lab/mgmt
lab_no_ethernet
lab_check "NetworkManager's scan does not show the hidden SSID" sh -c \
    '! nmcli -t -f SSID dev wifi list --rescan yes | grep -qx lab-attic'
cat > /etc/svc-defaults.json <<JSON
{"hotspot_prefix": "svc-lab", "hotspot_password": "hotspot-$(lab_run_id)",
 "check_url": "http://192.168.200.1:8080/", "offline_timeout_secs": 20, "retry_networks_secs": 30,
 "networks": [{"type": "wifi", "ssid": "lab-attic", "psk": "$psk", "priority": 10, "hidden": true}]}
JSON
svc-agent provision > /tmp/provision.log 2>&1 &
prov=$!
lab_wait 180 "online through the hidden lab-attic" sh -c \
    'curl -fsS --max-time 5 http://192.168.200.1:8080/ | grep -q lab-attic'
lab_check "the profile probes for it by name" grep -qx 'hidden=true' \
    /etc/NetworkManager/system-connections/svc-net-lab-attic.nmconnection
t_loss=$(lab_ms)
lab_ap_down home
lab_wait 180 "the hotspot opens after the offline timeout" sh -c 'iw dev wlan0 info | grep -q "type AP"'
lab_ap_up home
t_back=$(lab_ms)
lab_wait 240 "the machine rejoined the hidden lab-attic by itself" sh -c \
    'iw dev wlan0 link | grep -q "SSID: lab-attic" && curl -fsS --max-time 5 http://192.168.200.1:8080/ | grep -q lab-attic'
t_rejoin=$(lab_ms)
lab_check "the hotspot is down again" sh -c '! iw dev wlan0 info | grep -q "type AP"'
kill "$prov"; wait "$prov" || true
cat /tmp/provision.log
lab_log "figure: hidden AP back to rejoined: $(( t_rejoin - t_back )) ms (retry every 30 s; AP lost at +0, $(( t_back - t_loss )) ms before)"
