#!/bin/bash
# Wi-Fi Easy Connect (DPP) without a hotspot or a portal: a machine with the hotspot disabled
# and DPP enabled listens through NetworkManager's own wpa_supplicant (its control socket),
# publishes its bootstrap URI and QR codes; a DPP configurator (wpa_supplicant on a second
# radio, netns conf, as Android's "Add device" does) scans the URI and hands over the home
# network; the machine saves it as a NetworkManager profile and ends online on the home AP.
# Needs: `svc-agent provision` with `dpp_enabled`, wpa_supplicant built with DPP (Debian's is).
# lab-timeout: 600
set -euo pipefail
. "$LAB/lab-lib.sh"
psk="home-$(lab_run_id)"
lab_radios 3
lab_netns_radio wlan1 conf
lab_netns_radio wlan2 home
lab_ap home wlan2 lab-home "$psk" 192.168.77 internet
lab_no_ethernet
rm -f /etc/svc.json
cat > /etc/svc-defaults.json <<JSON
{"hotspot_enabled": false, "dpp_enabled": true, "check_url": "http://192.168.200.1:8080/",
 "offline_timeout_secs": 600}
JSON
lab_wait 60 "NetworkManager's wpa_supplicant has a control socket for wlan0" test -S /run/wpa_supplicant/wlan0

# The radio's scans and listen periods, for the log of an exchange that fails.
iw event -t > /tmp/iw-events.log 2>&1 &
t_start=$(lab_ms)
svc-agent provision --until-online > /tmp/provision.log 2>&1 &
prov=$!
lab_wait 120 "the bootstrap URI is published" test -s /opt/svc/dpp/uri.txt
t_listen=$(lab_ms)
uri=$(cat /opt/svc/dpp/uri.txt)
lab_log "bootstrap URI: $uri"
# No MAC: NetworkManager's random scan address changes (each boot, each failed activation),
# and a configurator sends to the URI's MAC when it has one.
lab_check "the URI names channel 81/1 and no MAC" sh -c \
    "grep -q '^DPP:.*C:81/1;' /opt/svc/dpp/uri.txt && ! grep -q ';M:' /opt/svc/dpp/uri.txt"
lab_check "the URI is logged" grep -qF "$uri" /tmp/provision.log
lab_check "the bootstrap key is 0600" test "$(stat -c %a /opt/svc/dpp/bootstrap.key)" = 600
lab_check "the QR codes are a PNG and an SVG" python3 - <<'PY'
import struct, zlib
b = open("/opt/svc/dpp/qr.png", "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat, w = 8, b"", 0
while pos < len(b):
    n, kind = struct.unpack(">I4s", b[pos:pos + 8]); data = b[pos + 8:pos + 8 + n]
    assert zlib.crc32(kind + data) == struct.unpack(">I", b[pos + 8 + n:pos + 12 + n])[0], kind
    if kind == b"IHDR": w, h = struct.unpack(">II", data[:8])
    if kind == b"IDAT": idat += data
    pos += 12 + n
raw = zlib.decompress(idat)
assert len(raw) == h * (1 + (w + 7) // 8), (len(raw), w, h)
assert open("/opt/svc/dpp/qr.svg").read().startswith("<?xml")
PY

pss=$(awk '/^Pss:/ {print $2}' "/proc/$prov/smaps_rollup")

# The configurator (a phone): its own wpa_supplicant on wlan1 in netns conf.
printf 'ctrl_interface=/run/wpa_supplicant-conf\n' > /tmp/conf.conf
ip netns exec conf wpa_supplicant -B -t -i wlan1 -D nl80211 -c /tmp/conf.conf -P /run/conf-wpa.pid -f /tmp/conf.log
lab_wait 30 "the configurator's control socket" test -S /run/wpa_supplicant-conf/wlan1
wcli() { ip netns exec conf wpa_cli -p /run/wpa_supplicant-conf -i wlan1 "$@"; }
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
conf_id=$(wcli dpp_configurator_add)
peer=$(wcli dpp_qr_code "$uri")
lab_check "the configurator accepts the machine's URI" sh -c "[ '$peer' -ge 1 ] 2>/dev/null"
t_scan=$(lab_ms)
online() { iw dev wlan0 link | grep -q 'SSID: lab-home' && curl -fsS --max-time 10 http://192.168.200.1:8080/ | grep -q lab-home; }
# An exchange can fail on either side under TCG (the configurator's 2 s wait for the
# enrollee's answer; a scan NetworkManager queued behind the listen, run between the
# authentication and the configuration request): each failure ends one attempt.
failed() { grep -c "DPP exchange ended" /tmp/provision.log; grep -c "DPP-AUTH-INIT-FAILED\|DPP-CONF-FAILED\|DPP-FAIL" /tmp/conf.log; }
received=0
for attempt in 1 2 3 4 5 6 7 8; do
    # A loaded host can make the configurator's wpa_cli time out or answer FAIL (the radio
    # busy): that is one attempt, not the end of the scenario.
    if ! out=$(wcli dpp_auth_init peer="$peer" conf=sta-psk ssid="$(hex lab-home)" pass="$(hex "$psk")" configurator="$conf_id" 2>&1) \
        || [ "$out" = FAIL ]; then
        lab_log "DPP attempt $attempt: the configurator did not start the exchange (${out:-no answer})"
        sleep 5
        continue
    fi
    # lab_wait would end the scenario at its limit; this attempt's wait only ends the attempt,
    # at 60 s or when either side logs that the exchange failed.
    end=$(( $(date +%s) + 60 ))
    before=$(failed || true)
    until grep -q 'DPP: network "lab-home" received' /tmp/provision.log 2>/dev/null; do
        [ "$(date +%s)" -lt "$end" ] || break
        [ "$(failed || true)" = "$before" ] || break
        sleep 0.5
    done
    if grep -q 'DPP: network "lab-home" received' /tmp/provision.log 2>/dev/null; then
        lab_log "ok: DPP attempt $attempt: the machine received the network"
        received=1
        break
    fi
    lab_log "DPP attempt $attempt: no network received; the configurator's and the radio's last events:"
    grep "DPP-" /tmp/conf.log | tail -4
    grep -v "wlan1\|wlan2\|p2p-dev" /tmp/iw-events.log | tail -6
    sleep 3
done
[ "$received" = 1 ] || lab_fail "eight DPP exchanges and the machine received no network"
# Bounded, so that a provisioning that never ends shows why, not a bare scenario timeout.
end=$(( $(date +%s) + 180 ))
while kill -0 "$prov" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$end" ]; then
        cat /tmp/provision.log
        nmcli -f NAME,AUTOCONNECT,ACTIVE,DEVICE con show || true
        nmcli dev || true
        lab_fail "provisioning still running 180 s after the network arrived"
    fi
    sleep 0.5
done
lab_check "provisioning ends online" wait "$prov"
t_online=$(lab_ms)
lab_wait 120 "online through lab-home" online
keyfile=/etc/NetworkManager/system-connections/svc-user-lab-home.nmconnection
lab_check "the network is a NetworkManager profile, 0600" test "$(stat -c %a $keyfile)" = 600
lab_check "no hotspot was ever started" sh -c '! grep -q "state: hotspot" /tmp/provision.log && ! nmcli -t -f NAME con show | grep -qx svc-hotspot'
journalctl --sync
# In clear or as wpa_supplicant's hex (its DPP-CONFOBJ-PASS event).
for s in "$psk" "$(hex "$psk")"; do
    if grep -qi -- "$s" /tmp/provision.log || journalctl -b -o cat | grep -qi -- "$s"; then
        journalctl -b -o cat | grep -i -- "$s" | sed "s/$s/<SECRET>/gI" | head -5
        lab_fail "the network's pass key reached the logs"
    fi
done
lab_check "the bootstrap key is in no log" sh -c \
    "! journalctl -b -o cat | grep -qi -- \"\$(cat /opt/svc/dpp/bootstrap.key)\" && ! grep -qi -- \"\$(cat /opt/svc/dpp/bootstrap.key)\" /tmp/provision.log"
cat /tmp/provision.log
lab_log "figure: provisioning start to DPP listening: $(( t_listen - t_start )) ms"
lab_log "figure: DPP scan (configurator has the URI) to online: $(( t_online - t_scan )) ms"
lab_log "figure: provisioning PSS with the DPP enrollee listening: $pss KiB"
