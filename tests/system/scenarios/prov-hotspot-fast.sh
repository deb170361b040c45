#!/bin/bash
# How fast the hotspot comes up, against the floor, in the same guest: `nmcli dev wifi hotspot`
# (NetworkManager alone, no scan) and then `svc-agent provision` on a fresh machine, each timed
# from its start until wlan0 is an access point holding 10.42.0.1 (the same poll for both),
# and until a phone that was already looking for it has associated. The agent's portal must
# still list the networks around (a home AP on channel 6): a faster hotspot must not lose the
# scanned list. benches/hotspot.sh runs this scenario and tabulates its figures.
# Needs: `svc-agent provision` (hotspot, portal).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_radios 3
lab_netns_radio wlan1 phone
lab_netns_radio wlan2 home
lab_ap home wlan2 lab-nearby "nearby-$(lab_run_id)" 192.168.77
lab_no_ethernet
hot_psk="hotspot-$(lab_run_id)"
hot_ssid="svc-lab-$(hostname)"
rm -f /etc/svc.json
cat > /etc/svc-defaults.json <<JSON
{"hotspot_prefix": "svc-lab", "hotspot_password": "$hot_psk", "check_url": "http://192.168.200.1:8080/",
 "offline_timeout_secs": 30, "retry_networks_secs": 600}
JSON
ap_up() { iw dev wlan0 info | grep -q "type AP" && ip -4 addr show wlan0 | grep -q 10.42.0.1/; }
# until_up T0: milliseconds from T0 until the AP is up (polled every 200 ms, bounded at 120 s).
until_up() {
    local end=$(( $(date +%s) + 120 ))
    until ap_up; do
        [ "$(date +%s)" -lt "$end" ] || lab_fail "timed out waiting for the access point"
        sleep 0.2
    done
    echo $(( $(lab_ms) - $1 ))
}
settle() { # the radio is a client again, idle, and NetworkManager knows lab-nearby
    lab_wait 60 "wlan0 is a disconnected client" sh -c \
        '! iw dev wlan0 info | grep -q "type AP" && nmcli -t -f DEVICE,STATE dev | grep -q "^wlan0:disconnected"'
    lab_wait 90 "NetworkManager's list has lab-nearby" sh -c 'nmcli -t -f SSID dev wifi list --rescan no | grep -qx lab-nearby'
    sleep 5
}

# 1. The floor: NetworkManager's own hotspot.
settle
lab_phone_start svc-lab-floor "$hot_psk"
t0=$(lab_ms)
nmcli dev wifi hotspot ifname wlan0 con-name lab-floor ssid svc-lab-floor password "$hot_psk" > /dev/null &
floor_up=$(until_up "$t0")
lab_wait 120 "the phone associated with the floor's hotspot" lab_phone_associated
floor_assoc=$(( $(lab_ms) - t0 ))
wait
lab_phone_stop
lab_check "the floor's hotspot goes down" nmcli connection delete lab-floor

# 2. The agent, on a machine without credentials (hotspot at once).
settle
lab_phone_start "$hot_ssid" "$hot_psk"
t0=$(lab_ms)
svc-agent provision > /tmp/provision.log 2>&1 &
prov=$!
agent_up=$(until_up "$t0")
lab_wait 120 "the phone associated with the agent's hotspot" lab_phone_associated
agent_assoc=$(( $(lab_ms) - t0 ))
ip netns exec phone ip addr add 10.42.0.50/24 dev wlan1
page=$(ip netns exec phone curl -fsS --retry 30 --retry-delay 1 --retry-all-errors --max-time 60 http://10.42.0.1/)
agent_portal=$(( $(lab_ms) - t0 ))
lab_check "the portal page lists the form" grep -q 'action="/connect"' <<<"$page"
lab_check "the portal still lists the network around (lab-nearby)" grep -q 'lab-nearby' <<<"$page"
nets=$(ip netns exec phone curl -fsS --max-time 30 http://10.42.0.1/api/networks)
lab_check "the API lists lab-nearby too" grep -q '"lab-nearby"' <<<"$nets"
kill "$prov"; wait "$prov" || true
cat /tmp/provision.log
lab_log "figure: hotspot up (AP + 10.42.0.1): nmcli floor $floor_up ms, svc-agent $agent_up ms"
lab_log "figure: phone associated: nmcli floor $floor_assoc ms, svc-agent $agent_assoc ms"
lab_log "figure: svc-agent start to portal page on the phone: $agent_portal ms"
