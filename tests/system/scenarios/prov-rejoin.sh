#!/bin/bash
# The home access point disappears: after the offline timeout the machine opens its hotspot;
# the access point comes back: the machine rejoins it by itself (the hotspot retries its
# known networks while no phone uses the portal), and the hotspot goes down.
# Needs: `svc-agent provision` (offline timeout, retries while the hotspot is up).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
psk="home-$(lab_run_id)"
lab_radios 2
lab_netns_radio wlan1 home
lab_ap home wlan1 lab-home "$psk" 192.168.77 internet
lab_credentials /var/lib/lab/mgmt
lab_no_ethernet
# A vendor's short timers (prov-flaps' values): what is proven is the order of events, not
# the defaults' lengths; the figures below name the values.
offline=8 retry=12
cat > /etc/svc-defaults.json <<JSON
{"hotspot_prefix": "svc-lab", "hotspot_password": "hotspot-$(lab_run_id)",
 "check_url": "http://192.168.200.1:8080/", "offline_timeout_secs": $offline, "retry_networks_secs": $retry,
 "networks": [{"type": "wifi", "ssid": "lab-home", "psk": "$psk", "priority": 10}]}
JSON
svc-agent provision > /tmp/provision.log 2>&1 &
prov=$!
lab_wait 180 "online through lab-home" sh -c 'curl -fsS --max-time 5 http://192.168.200.1:8080/ | grep -q lab-home'
t_loss=$(lab_ms)
lab_ap_down home
lab_wait 180 "the hotspot opens after the offline timeout" sh -c 'iw dev wlan0 info | grep -q "type AP"'
t_hotspot=$(lab_ms)
lab_ap_up home
t_back=$(lab_ms)
lab_wait 240 "the machine rejoined lab-home by itself" sh -c \
    'iw dev wlan0 link | grep -q "SSID: lab-home" && curl -fsS --max-time 5 http://192.168.200.1:8080/ | grep -q lab-home'
t_rejoin=$(lab_ms)
lab_check "the hotspot is down again" sh -c '! iw dev wlan0 info | grep -q "type AP"'
kill "$prov"; wait "$prov" || true
cat /tmp/provision.log
lab_log "figure: AP lost to hotspot up: $(( t_hotspot - t_loss )) ms (offline timeout ${offline} s)"
lab_log "figure: AP back to rejoined: $(( t_rejoin - t_back )) ms (retry every ${retry} s)"
