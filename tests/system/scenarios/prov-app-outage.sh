#!/bin/bash
# An outage of the management app is not an outage of the network (issue 15 item 4): a
# machine online through its access point, whose app answers nothing at all, keeps its Wi-Fi
# for three offline timeouts and never raises its hotspot. Before, without a check URL,
# "online" meant "the last poll succeeded", so an app outage raised the hotspot of every
# machine of a fleet (a single-radio machine then drops its uplink).
# Needs: the daemon (`svc-agent run`) running agent-provisioning from the manufacturer
# defaults, with no check_url.
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
psk="home-$(lab_run_id)"
lab_radios 2
lab_netns_radio wlan1 home
lab_ap home wlan1 lab-home "$psk" 192.168.77 internet
lab_no_ethernet
# An https app on the access point's side that refuses every connection.
( umask 077
  printf '{"cloud": {"app_address": "https://192.168.200.1:8443", "id": "lab-part-%s", "secret": "lab-secret-%s"}}\n' \
      "$(lab_run_id)" "$(lab_run_id)" > /etc/svc.json )
# A vendor's short offline timeout: what is proven is that no number of them raises the
# hotspot while the network is up, not the default's length.
offline=8
cat > /etc/svc-defaults.json <<JSON
{"hotspot_prefix": "svc-lab", "hotspot_password": "hotspot-$(lab_run_id)",
 "offline_timeout_secs": $offline, "retry_networks_secs": 12,
 "networks": [{"type": "wifi", "ssid": "lab-home", "psk": "$psk", "priority": 10}]}
JSON
# The agent's own first-contact wait (up to 60 s, the app refuses) stays: provisioning
# starts before it (#39).
svc-agent run > /tmp/agent.log 2>&1 &
agent=$!
lab_wait 180 "online through lab-home" sh -c 'curl -fsS --max-time 5 http://192.168.200.1:8080/ | grep -q lab-home'
lab_wait 120 "the app's outage is seen by the agent" grep -q "poll failed" /tmp/agent.log
# Three offline timeouts with the app down and the network up: no hotspot, ever.
end=$(( $(date +%s) + 3 * offline ))
while [ "$(date +%s)" -lt "$end" ]; do
    if iw dev wlan0 info | grep -q "type AP"; then
        grep provisioning /tmp/agent.log || true
        lab_fail "the hotspot came up during an app outage"
    fi
    sleep 1
done
lab_check "still on lab-home" sh -c 'iw dev wlan0 link | grep -q "SSID: lab-home"'
lab_check "the app is still down" sh -c '! curl -ksS --max-time 5 https://192.168.200.1:8443/ >/dev/null 2>&1'
kill "$agent"; wait "$agent" || true
grep -E "provisioning|poll failed" /tmp/agent.log | tail -n 20 || true
lab_log "the hotspot stayed down through $(( 3 * offline )) s of app outage (offline timeout ${offline} s)"
