#!/bin/bash
# After the power cut: what the portal provisioned survives (the credentials, 0600; the home
# network's profile), and the machine joins the home network again without the hotspot.
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_check "the credentials survived, 0600" test "$(stat -c %a /etc/svc.json)" = 600
lab_check "the home network's profile survived" \
    test -s /etc/NetworkManager/system-connections/svc-user-lab-home.nmconnection
lab_radios 3
lab_netns_radio wlan1 phone
lab_netns_radio wlan2 home
lab_ap home wlan2 lab-home "home-$(lab_run_id)" 192.168.77
lab_wait 180 "the machine joined lab-home again by itself" sh -c 'iw dev wlan0 link | grep -q "SSID: lab-home"'
lab_check "as a client, not a hotspot" sh -c '! iw dev wlan0 info | grep -q "type AP"'
