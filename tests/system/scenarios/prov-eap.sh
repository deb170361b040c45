#!/bin/bash
# Enterprise Wi-Fi (#45): five WPA2-Enterprise access points, each hostapd with its own
# internal EAP server (eap_server=1, an eap_user file; the certificates from the host hook)
# on a mac80211_hwsim radio. The machine's networks come from the manufacturer defaults
# (/etc/svc-defaults.json), as a vendor would set them, by priority with roaming:
#   40 lab-eap-pw       PEAP with a wrong password
#   30 lab-eap-rogue    EAP-TLS; the access point's RADIUS certificate is from another CA
#   20 lab-eap-expired  EAP-TLS with an expired client certificate
#   10 lab-eap-tls      EAP-TLS (internet)
#    5 lab-eap-peap     PEAP/MSCHAPv2 (internet)
# The daemon (`svc-agent run`) runs provisioning. Each of the first three fails with its
# own reason in the agent's status (`svc-agent status --json`: subsystems.agent-provisioning
# .networks) and the machine falls back to lab-eap-tls; lab-eap-tls goes away: it falls back
# to lab-eap-peap. No password or key in the journal, in any argv, in the status; the
# keyfiles, certificates and keys 0600.
# Needs: the daemon with networks[].eap, roaming, failure reasons from wpa_supplicant.
# lab-timeout: 720
set -euo pipefail
. "$LAB/lab-lib.sh"
E=/lab/share/eap
pw="corp-$(lab_run_id)"
lab_radios 6
aps=(pw rogue expired tls peap)
for i in "${!aps[@]}"; do lab_netns_radio "wlan$((i + 1))" "${aps[$i]}"; done
( umask 077
  printf '"machine.lab.example"\tTLS\n*\tPEAP\n"alice"\tMSCHAPV2\t"%s"\t[2]\n' "$pw" > /tmp/eap_user )

# eap_ap NETNS IFACE SSID NET SERVER_CERT [internet]: a WPA2-Enterprise access point whose
# RADIUS server (hostapd's own) shows SERVER_CERT and takes client certificates of the lab CA.
eap_ap() {
    cat > "/tmp/ap-$1.conf" <<CONF
interface=$2
driver=nl80211
ssid=$3
hw_mode=g
channel=6
wpa=2
wpa_key_mgmt=WPA-EAP
rsn_pairwise=CCMP
ieee8021x=1
eapol_version=2
eap_server=1
eap_user_file=/tmp/eap_user
ca_cert=$E/ca.pem
server_cert=$E/$5.pem
private_key=$E/$5.key
CONF
    lab_ap_start "$1" "$2" "$3" "$4" "${6:-}"
}
eap_ap pw wlan1 lab-eap-pw 192.168.71 server
eap_ap rogue wlan2 lab-eap-rogue 192.168.72 rogue-server
eap_ap expired wlan3 lab-eap-expired 192.168.73 server
eap_ap tls wlan4 lab-eap-tls 192.168.74 server internet
eap_ap peap wlan5 lab-eap-peap 192.168.75 server internet

install -d -m 0700 /var/lib/lab/mgmt
lab_credentials /var/lib/lab/mgmt
lab_no_ethernet
( umask 077
  python3 - "$pw" "$(lab_run_id)" > /etc/svc-defaults.json <<'PY'
import json, sys
pw, rid = sys.argv[1], sys.argv[2]
def pem(f):
    return open("/lab/share/eap/" + f).read()
server = {"ca_cert": pem("ca.pem"), "domain": "radius.lab.example"}
def tls(cert, key):
    return {"method": "tls", "identity": "machine.lab.example", "client_cert": pem(cert),
            "private_key": pem(key), **server}
def peap(password):
    return {"method": "peap", "identity": "alice", "password": password, **server}
nets = [("lab-eap-pw", 40, peap("wrong-" + pw)),
        ("lab-eap-rogue", 30, tls("client.pem", "client.key")),
        ("lab-eap-expired", 20, tls("expired.pem", "expired.key")),
        ("lab-eap-tls", 10, tls("client.pem", "client.key")),
        ("lab-eap-peap", 5, peap(pw))]
json.dump({"hotspot_prefix": "svc-lab", "hotspot_password": "hotspot-" + rid,
           "check_url": "http://192.168.200.1:8080/", "roaming_mode": True,
           "offline_timeout_secs": 900, "retry_networks_secs": 900,
           "networks": [{"ssid": s, "priority": p, "eap": e} for s, p, e in nets]}, sys.stdout)
PY
)
# Every argv while the machine joins: no secret may be in one.
lab_argv_watch /tmp/argv.txt 0.3
argv_watch=$LAB_ARGV_WATCH
# A failed check ends the scenario: these must not outlive it (nor hold its output open).
trap 'kill "$argv_watch" ${agent:+"$agent"} 2>/dev/null || true' EXIT
t0=$(lab_ms)
# The agent's own first-contact wait (up to 60 s) stays: provisioning starts before it (#39).
svc-agent run > /tmp/agent.log 2>&1 &
agent=$!
online_via() {
    iw dev wlan0 link | grep -q "SSID: $1" && curl -fsS --max-time 5 http://192.168.200.1:8080/ | grep -q "$1"
}
lab_wait 420 "online through lab-eap-tls (EAP-TLS), after 40, 30 and 20 failed" online_via lab-eap-tls
t_tls=$(lab_ms)
# status_reason NET: the agent's status says why net-NET failed (empty: it does not).
status_reason() {
    svc-agent status --json | python3 -c 'import json, sys
n = json.load(sys.stdin)["subsystems"]["agent-provisioning"].get("networks", {})
print(n.get(sys.argv[1], {}).get("reason", ""))' "net-$1"
}
status_is() { status_reason "$1" | grep -qF "$2"; }
for n in pw:"user name or password" rogue:"certificate is not trusted" expired:"client certificate has expired"; do
    net="lab-eap-${n%%:*}" want="${n#*:}"
    lab_log "log for $net: $(grep -m1 "\"net-$net\" not available: " /tmp/agent.log | sed 's/.*not available: //')"
    lab_log "status for $net: $(status_reason "$net")"
    lab_wait 60 "the status says why $net failed: $want" status_is "$net" "$want"
done
lab_check "the status lists no network that works" sh -c \
    "svc-agent status --json | python3 -c 'import json,sys; n=json.load(sys.stdin)[\"subsystems\"][\"agent-provisioning\"][\"networks\"]; sys.exit(\"net-lab-eap-tls\" in n)'"

lab_ap_down tls
t_down=$(lab_ms)
lab_wait 420 "online through lab-eap-peap (PEAP) after lab-eap-tls went away" online_via lab-eap-peap
t_peap=$(lab_ms)
svc-agent status --json > /tmp/status.json
kill "$agent"; wait "$agent" || true
kill "$argv_watch"; wait "$argv_watch" 2>/dev/null || true
grep provisioning /tmp/agent.log

for f in /etc/NetworkManager/system-connections/svc-net-lab-eap-*.nmconnection /opt/svc/eap/*/*.pem; do
    lab_check "$f is 0600" sh -c "[ \"\$(stat -c %a '$f')\" = 600 ]"
done
lab_check "the client key is in its file" sh -c "ls /opt/svc/eap/svc-net-lab-eap-tls/key.pem"
secrets=("$pw" "wrong-$pw" "$(sed -n 2p $E/client.key)" "$(sed -n 2p $E/expired.key)")
journalctl -b --no-pager > /tmp/journal.txt
for s in "${secrets[@]}"; do
    for f in /tmp/journal.txt /tmp/argv.txt /tmp/agent.log /tmp/status.json; do
        if grep -qF -- "$s" "$f"; then lab_fail "a secret (${s:0:6}...) is in $f"; fi
    done
done
lab_log "ok: no password or key in the journal, any argv ($(wc -l < /tmp/argv.txt) lines), the log or the status"
lab_log "figure: start to online through EAP-TLS (after 3 failures): $(( t_tls - t0 )) ms"
lab_log "figure: EAP-TLS gone to online through PEAP: $(( t_peap - t_down )) ms"
