#!/bin/bash
# Bad input through the real hotspot and portal: an oversized request, invalid UTF-8, a
# missing CSRF token and invalid credentials are refused and change nothing; an SSID and
# pass key full of quotes and shell metacharacters are stored literally (no shell ever sees
# them) and, the network being absent, the machine comes back to its hotspot. A wired
# neighbour routing to the portal's address gets no answer.
# Needs: `svc-agent provision` (portal input handling).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
hot_psk="hotspot-$(lab_run_id)"
lab_radios 2
lab_netns_radio wlan1 phone
rm -f /etc/svc.json /tmp/pwned /tmp/pwned2
cat > /etc/svc-defaults.json <<JSON
{"hotspot_prefix": "svc-lab", "hotspot_password": "$hot_psk", "check_url": "http://192.168.200.1:8080/",
 "offline_timeout_secs": 30, "retry_networks_secs": 600}
JSON
svc-agent provision > /tmp/provision.log 2>&1 &
lab_wait 120 "the hotspot is up" sh -c 'iw dev wlan0 info | grep -q "type AP"'
lab_phone_join "svc-lab-$(hostname)" "$hot_psk"
phone() { ip netns exec phone curl -sS -o /dev/null -w '%{http_code}' -b /tmp/jar -c /tmp/jar --max-time 30 "$@"; }
page=$(ip netns exec phone curl -fsS --retry 20 --retry-delay 1 --retry-all-errors -c /tmp/jar http://10.42.0.1/)
token=$(sed -n 's/.*name="csrf" value="\([0-9a-f]*\)".*/\1/p' <<<"$page" | head -n1)
lab_check "the page carries a CSRF token" test -n "$token"

big=$(head -c 30000 /dev/zero | tr '\0' x)
lab_check "an oversized form is refused (413)" test "$(phone --data "csrf=$token&ssid=home&psk=$big" http://10.42.0.1/connect)" = 413
lab_check "invalid UTF-8 is refused (400)" test "$(phone --data "csrf=$token&ssid=%FF%FE&psk=password1" http://10.42.0.1/connect)" = 400
lab_check "no CSRF token: refused (403)" test "$(phone --data "ssid=home&psk=password1" http://10.42.0.1/connect)" = 403
lab_check "a too-short pass key is refused (400)" test "$(phone --data "csrf=$token&ssid=home&psk=short" http://10.42.0.1/connect)" = 400
lab_check "invalid credentials are refused (400)" test "$(phone --data-urlencode "csrf=$token" --data-urlencode 'credentials={"cloud": {}}' http://10.42.0.1/credentials)" = 400
lab_check "a plain http:// app address is refused (400)" test "$(phone --data-urlencode "csrf=$token" --data-urlencode 'credentials={"cloud": {"app_address": "http://192.168.200.1:8080", "id": "p", "secret": "lab-secret-1234"}}' http://10.42.0.1/credentials)" = 400
lab_check "no credentials file was written" test ! -e /etc/svc.json
lab_check "no network was saved" sh -c '! ls /etc/NetworkManager/system-connections/svc-user-* 2>/dev/null'
lab_check "the hotspot stayed up" sh -c 'iw dev wlan0 info | grep -q "type AP"'

# A wired neighbour that routes the hotspot subnet through the machine gets nothing: Linux
# accepts packets for a local address on any interface, so the portal binds to the
# hotspot's interface (issue 15). Control: the neighbour does reach a listener on the
# machine's wired address.
ip netns add lan
ip link add lan0 type veth peer name nb0 netns lan
nmcli device set lan0 managed no 2>/dev/null || true
ip addr add 192.168.99.1/24 dev lan0
ip link set lan0 up
ip -n lan addr add 192.168.99.2/24 dev nb0
ip -n lan link set lo up
ip -n lan link set nb0 up
ip -n lan route add 10.42.0.0/24 via 192.168.99.1
mkdir -p /tmp/www-wired && echo wired > /tmp/www-wired/index.html
python3 -m http.server 8099 --bind 192.168.99.1 --directory /tmp/www-wired >/dev/null 2>&1 &
wired_http=$!
lab_wait 30 "the wired neighbour reaches the machine" \
    ip netns exec lan curl -fsS --max-time 5 -o /dev/null http://192.168.99.1:8099/
lab_check "the wired neighbour gets nothing from the portal" \
    sh -c '! ip netns exec lan curl -sS --max-time 10 http://10.42.0.1/api/status'
kill "$wired_http"
ip netns del lan

# Quotes and shell metacharacters: stored literally, executed never.
ssid='a"$(touch /tmp/pwned)'\'';`x`'
psk='p"; touch /tmp/pwned2 #'\''$HOME'
phone --data-urlencode "csrf=$token" --data-urlencode "ssid=$ssid" --data-urlencode "psk=$psk" \
    http://10.42.0.1/connect > /dev/null || true
lab_wait 60 "the network was saved" sh -c 'ls /etc/NetworkManager/system-connections/svc-user-* >/dev/null 2>&1'
keyfile=$(ls /etc/NetworkManager/system-connections/svc-user-* | head -n1)
want_ssid="$(printf '%s' "$ssid" | od -An -tu1 -v | tr -s ' \n' ';' | sed 's/^;//')"
lab_check "the SSID is stored byte for byte" grep -qF "ssid=$want_ssid" "$keyfile"
lab_check "the pass key is stored literally" test "$(nmcli -s -t -g 802-11-wireless-security.psk con show "user-$ssid")" = "$psk"
lab_check "nothing was executed" sh -c '[ ! -e /tmp/pwned ] && [ ! -e /tmp/pwned2 ]'
lab_wait 180 "the network is absent: the hotspot comes back" sh -c 'iw dev wlan0 info | grep -q "type AP"'
journalctl --sync
if grep -qF -- "$psk" /tmp/provision.log || journalctl -b -o cat | grep -qF -- "$psk"; then
    lab_fail "the pass key reached the logs"
fi
cat /tmp/provision.log
