#!/bin/bash
# comitup #24: a network whose access point hides its SSID, saved as hidden (`"hidden": true`
# in the network entry), is joined by NetworkManager itself (before: never, the hotspot came up
# and only its retries' explicit `nmcli connection up` found it), and rejoined after the
# access point dropped out: the
# machine opens its hotspot after the offline timeout, the access point comes back (still
# hidden), the hotspot's retries of the known networks find it by name.
# Needs: `svc-agent provision` (hidden networks probed for by name).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
psk="attic-$(lab_run_id)"
lab_radios 3
lab_netns_radio wlan1 home
lab_netns_radio wlan2 probe
# lab_ap's access point, hidden from its first beacon (ignore_broadcast_ssid=1: beacons carry
# an empty SSID, probes by name are answered), with DHCP and the check URL behind it.
cat > /tmp/ap-home.conf <<CONF
interface=wlan1
driver=nl80211
ssid=lab-attic
ignore_broadcast_ssid=1
hw_mode=g
channel=6
wpa=2
wpa_key_mgmt=WPA-PSK
rsn_pairwise=CCMP
wpa_passphrase=$psk
CONF
ip netns exec home ip addr add 192.168.77.1/24 dev wlan1
lab_ap_up home
ip netns exec home dnsmasq --conf-file=/dev/null --port=0 --interface=wlan1 --bind-interfaces \
    --dhcp-range=192.168.77.10,192.168.77.50,1h --dhcp-option=3,192.168.77.1 --pid-file=/run/dhcp-home.pid
ip netns exec home ip addr add 192.168.200.1/32 dev lo
mkdir -p /tmp/www-home && echo "online via lab-attic" > /tmp/www-home/index.html
ip netns exec home python3 -m http.server 8080 --bind 192.168.200.1 --directory /tmp/www-home \
    > /tmp/www-home.log 2>&1 &
lab_credentials /var/lib/lab/mgmt
lab_no_ethernet
# A radio of its own (netns probe) scans: the access point is there, its SSID is not.
ap_mac=$(ip netns exec home cat /sys/class/net/wlan1/address)
ip netns exec probe ip link set wlan2 up
lab_wait 60 "a scan sees the hidden access point ($ap_mac)" sh -c \
    "ip netns exec probe iw dev wlan2 scan > /tmp/probe-scan.txt && grep -qi 'BSS $ap_mac' /tmp/probe-scan.txt"
lab_check "its beacons do not carry the SSID" sh -c '! grep -q "SSID: lab-attic" /tmp/probe-scan.txt'
# A vendor's short timers (prov-flaps' values): what is proven is the order of events, not
# the defaults' lengths; the figure below names the values.
offline=8 retry=12
cat > /etc/svc-defaults.json <<JSON
{"hotspot_prefix": "svc-lab", "hotspot_password": "hotspot-$(lab_run_id)",
 "check_url": "http://192.168.200.1:8080/", "offline_timeout_secs": $offline, "retry_networks_secs": $retry,
 "networks": [{"type": "wifi", "ssid": "lab-attic", "psk": "$psk", "priority": 10, "hidden": true}]}
JSON
svc-agent provision > /tmp/provision.log 2>&1 &
prov=$!
lab_wait 180 "online through the hidden lab-attic" sh -c \
    'curl -fsS --max-time 5 http://192.168.200.1:8080/ | grep -q lab-attic'
lab_check "NetworkManager joined it by itself: the hotspot was never needed" sh -c \
    '! grep -q "state: hotspot" /tmp/provision.log'
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
lab_log "figure: hidden AP back to rejoined: $(( t_rejoin - t_back )) ms (retry every ${retry} s; AP lost at +0, $(( t_back - t_loss )) ms before)"
