#!/bin/bash
# agent-provisioning end to end on real NetworkManager and mac80211_hwsim radios: a fresh
# machine (no credentials) opens its WPA2 hotspot; a wpa_supplicant phone (netns phone)
# joins it, gets every name resolved to the portal, loads the page, pastes the machine
# credentials and submits the home network; the machine joins the home AP (hostapd in netns
# home, with DHCP and the check URL behind it) and reaches the check URL. Then the power is
# cut; phase 2 (prov-portal-join.after.sh): the provisioned network and the credentials
# survive, and the machine joins the home network again by itself.
# Needs: `svc-agent provision` (hotspot, DNS redirect, portal, join).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
ms() { date +%s%3N; }

home_ssid="lab-home"
home_psk="home-$(lab_run_id)"
hot_psk="hotspot-$(lab_run_id)"
secret="lab-secret-$(lab_run_id)"

lab_check "load mac80211_hwsim with 3 radios" modprobe mac80211_hwsim radios=3
lab_wait 90 "NetworkManager manages the radios" sh -c \
    '[ "$(nmcli -t -f TYPE,STATE dev | grep -Ec "^wifi:(disconnected|connected)")" -ge 3 ]'
to_netns() { # to_netns IFACE NETNS: move the radio of IFACE into its own namespace
    local phy
    phy="$(basename "$(readlink -f "/sys/class/net/$1/phy80211")")"
    ip netns add "$2"
    iw phy "$phy" set netns name "$2"
    ip netns exec "$2" ip link set lo up
}
to_netns wlan1 phone
to_netns wlan2 home

# The home network: hostapd (WPA2), DHCP, and "the internet" (the check URL) behind it.
cat > /tmp/home-ap.conf <<CONF
interface=wlan2
driver=nl80211
ssid=$home_ssid
hw_mode=g
channel=6
wpa=2
wpa_key_mgmt=WPA-PSK
rsn_pairwise=CCMP
wpa_passphrase=$home_psk
CONF
ip netns exec home ip addr add 192.168.77.1/24 dev wlan2
ip netns exec home hostapd -B -P /run/home-ap.pid /tmp/home-ap.conf > /tmp/home-ap.log
ip netns exec home dnsmasq --conf-file=/dev/null --port=0 --interface=wlan2 --bind-interfaces \
    --dhcp-range=192.168.77.10,192.168.77.50,1h --pid-file=/run/home-dhcp.pid
mkdir -p /tmp/www && echo "online-$(lab_run_id)" > /tmp/www/index.html
ip netns exec home python3 -m http.server 8080 --bind 192.168.77.1 --directory /tmp/www > /tmp/check.log 2>&1 &

# Manufacturer defaults of this image; no /etc/svc.json: a fresh machine.
rm -f /etc/svc.json
cat > /etc/svc-defaults.json <<JSON
{"hotspot_prefix": "svc-lab", "hotspot_password": "$hot_psk", "check_url": "http://192.168.77.1:8080/",
 "offline_timeout_secs": 30, "retry_networks_secs": 600, "manufacturer": "Lab", "model": "VM"}
JSON

t_start=$(ms)
svc-agent provision --until-online > /tmp/provision.log 2>&1 &
prov=$!
lab_wait 120 "the hotspot is up (NetworkManager AP on wlan0)" sh -c 'iw dev wlan0 info | grep -q "type AP"'
lab_check "the hotspot is WPA2-PSK/CCMP, never open" sh -c \
    'nmcli -t -g 802-11-wireless-security.key-mgmt,802-11-wireless-security.proto con show svc-hotspot | tr "\n" " " | grep -q "wpa-psk rsn"'
hot_ssid="svc-lab-$(hostname)"

# The phone joins the hotspot.
lab_phone_join "$hot_ssid" "$hot_psk"
t_joinable=$(ms)

# Every name resolves to the portal (the captive-portal sign-in of phones relies on it).
cat > /tmp/dns_a.py <<'PY'
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in sys.argv[1].split(".")) + b"\0"
q += struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, ("10.42.0.1", 53))
print(socket.inet_ntoa(s.recv(512)[-4:]))
PY
lab_wait 60 "any name resolves to the portal" sh -c \
    '[ "$(ip netns exec phone python3 /tmp/dns_a.py connectivitycheck.example.com)" = 10.42.0.1 ]'
page=$(ip netns exec phone curl -fsS --retry 20 --retry-delay 1 --retry-all-errors -c /tmp/jar http://10.42.0.1/)
lab_check "the portal page lists the form" grep -q 'action="/connect"' <<<"$page"
token=$(sed -n 's/.*name="csrf" value="\([0-9a-f]*\)".*/\1/p' <<<"$page" | head -n1)
lab_check "the page carries a CSRF token" test -n "$token"
lab_check "captive-portal checks are redirected" sh -c \
    "ip netns exec phone curl -s -o /dev/null -w '%{http_code}' -H 'Host: connectivitycheck.gstatic.com' http://10.42.0.1/generate_204 | grep -q 302"

# The person pastes the machine credentials, then picks the home network.
# (An https app: the portal refuses http:// and file:// addresses. Never contacted here.)
creds="{\"cloud\": {\"app_address\": \"https://app.lab.example\", \"id\": \"lab-part\", \"secret\": \"$secret\"}}"
ip netns exec phone curl -fsS -o /dev/null -b /tmp/jar --data-urlencode "csrf=$token" \
    --data-urlencode "credentials=$creds" http://10.42.0.1/credentials
lab_check "credentials written 0600" test "$(stat -c %a /etc/svc.json)" = 600
lab_check "credentials hold what was pasted" grep -q "$secret" /etc/svc.json
lab_check "a second paste is refused now that the machine has credentials (403)" test "$(ip netns exec phone \
    curl -sS -o /dev/null -w '%{http_code}' -b /tmp/jar --data-urlencode "csrf=$token" \
    --data-urlencode "credentials=${creds/lab-part/other-part}" http://10.42.0.1/credentials)" = 403
lab_check "the credentials are still the first ones" grep -q '"lab-part"' /etc/svc.json
pss=$(awk '/^Pss:/ {print $2}' "/proc/$prov/smaps_rollup")
t_submit=$(ms)
ip netns exec phone curl -sS -o /dev/null -b /tmp/jar --max-time 30 --data-urlencode "csrf=$token" \
    --data-urlencode "ssid=$home_ssid" --data-urlencode "psk=$home_psk" http://10.42.0.1/connect || true

lab_check "provisioning ends online" wait "$prov"
t_online=$(ms)
lab_check "wlan0 is a client of $home_ssid" sh -c "iw dev wlan0 link | grep -q 'SSID: $home_ssid'"
lab_check "the machine reaches the check URL" curl -fsS --max-time 10 http://192.168.77.1:8080/
keyfile=/etc/NetworkManager/system-connections/svc-user-lab-home.nmconnection
lab_check "the home network is saved 0600 with the portal's priority" sh -c \
    "[ \"\$(stat -c %a $keyfile)\" = 600 ] && grep -q '^autoconnect-priority=999' $keyfile"
lab_check "the hotspot is down" sh -c '! iw dev wlan0 info | grep -q "type AP"'
journalctl --sync
for s in "$home_psk" "$hot_psk" "$secret"; do
    if grep -q -- "$s" /tmp/provision.log || journalctl -b -o cat | grep -q -- "$s"; then
        lab_fail "a secret reached the logs"
    fi
done
lab_log "ok: no secret in the provisioning log or the journal"
cat /tmp/provision.log
lab_log "figure: offline to hotspot joinable (phone associated): $(( t_joinable - t_start )) ms"
lab_log "figure: form submit to online: $(( t_online - t_submit )) ms"
lab_log "figure: provisioning PSS with the portal up: $pss KiB"
lab_powercut
