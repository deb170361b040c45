#!/bin/bash
# The Wi-Fi lab: simulated radios (mac80211_hwsim) driven by the real NetworkManager,
# hostapd-less NM hotspot (WPA2), and a wpa_supplicant "phone" in its own network namespace
# that associates and fetches a page from the hotspot address. A phone with a wrong password
# must not get in. Proves the lab the provisioning scenarios build on.
# Needs: nothing from the agent (it is the ground the provisioning scenarios stand on).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"

ssid=svc-lab-setup
psk="lab-$(lab_run_id)"
ms() { date +%s%3N; }

lab_check "load mac80211_hwsim with 3 radios" modprobe mac80211_hwsim radios=3
nm_sees_all() {
    local i
    for i in 0 1 2; do
        nmcli -t -f DEVICE,TYPE,STATE dev | grep -Eq "^wlan$i:wifi:(disconnected|connected)" || return 1
    done
}
lab_wait 90 "NetworkManager manages wlan0, wlan1, wlan2" nm_sees_all
nmcli -t -f DEVICE,TYPE,STATE dev

# The phone: wlan1's radio moves into its own namespace, out of NetworkManager's reach.
phy="$(basename "$(readlink -f /sys/class/net/wlan1/phy80211)")"
ip netns add phone
lab_check "move $phy (wlan1) into netns phone" iw phy "$phy" set netns name phone
lab_wait 30 "wlan1 visible in netns phone" ip netns exec phone ip link show wlan1
ip netns exec phone ip link set lo up

# The hotspot, as agent-provisioning will raise it.
t0=$(ms)
lab_check "nmcli hotspot on wlan0" nmcli dev wifi hotspot ifname wlan0 con-name lab-hotspot ssid "$ssid" password "$psk"
lab_wait 60 "hotspot connection activated" sh -c 'nmcli -t -g GENERAL.STATE con show lab-hotspot | grep -q activated'
lab_log "hotspot up in $(( $(ms) - t0 )) ms (informational)"
lab_log "hotspot security: $(nmcli -t -g 802-11-wireless-security.key-mgmt,802-11-wireless-security.proto,802-11-wireless-security.pairwise con show lab-hotspot | tr '\n' ' ')"
lab_check "hotspot is an AP on wlan0" sh -c 'iw dev wlan0 info | grep -q "type AP"'
ap_addr="$(nmcli -g IP4.ADDRESS dev show wlan0 | head -n1)"
ap_ip="${ap_addr%/*}"
lab_log "hotspot address $ap_addr"
lab_check "hotspot has an address" test -n "$ap_ip"

# "The internet" as far as the phone is concerned: a page served on the hotspot address.
www="$(mktemp -d)"
echo "lab-page-$(lab_run_id)" > "$www/index.html"
python3 -m http.server 8080 --bind "$ap_ip" --directory "$www" > /tmp/http.log 2>&1 &
lab_wait 30 "HTTP server on $ap_ip:8080" curl -fsS "http://$ap_ip:8080/"

# A phone with the wrong password must be refused.
lab_phone_start "$ssid" "wrong-$(lab_run_id)" phone-wrong
lab_wait 90 "wrong-password phone refused (WRONG_KEY)" grep -q 'reason=WRONG_KEY' /tmp/phone-wrong.log
if lab_phone_associated; then lab_fail "wrong-password phone associated"; fi
lab_phone_stop

# The right password gets in over WPA2 and reaches the page.
t0=$(ms)
lab_phone_start "$ssid" "$psk"
lab_wait 90 "phone associated" lab_phone_associated
lab_log "phone associated in $(( $(ms) - t0 )) ms (informational)"
status="$(lab_phone_cli status)"
echo "$status"
lab_check "phone uses WPA2-PSK" grep -q '^key_mgmt=WPA2-PSK' <<<"$status"
lab_check "phone uses CCMP" grep -q '^pairwise_cipher=CCMP' <<<"$status"
ip netns exec phone ip addr add 10.42.0.50/24 dev wlan1
page="$(ip netns exec phone curl -fsS --retry 10 --retry-delay 1 --retry-all-errors --max-time 60 "http://$ap_ip:8080/index.html")"
lab_check "phone fetched the page over the hotspot" test "$page" = "lab-page-$(lab_run_id)"
lab_check "the page was served to the phone's address" grep -q '10.42.0.50' /tmp/http.log

t0=$(ms)
lab_check "hotspot goes down" nmcli connection down lab-hotspot
lab_log "hotspot down in $(( $(ms) - t0 )) ms (informational)"
lab_phone_stop
