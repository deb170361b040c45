#!/bin/bash
# comitup #84: another service holds port 53 (here a dnsmasq on 0.0.0.0:53, as a DNS cache or
# an ad blocker would), so NetworkManager's shared-mode dnsmasq cannot serve the hotspot:
# phones get no address and no name, the portal looks dead. The service must say so, naming
# the culprit and its pid, in its log (an error) and in the portal's status; when the culprit
# is gone and the hotspot is up again, it says the ports are free.
# Needs: `svc-agent provision` (conflicts::check while the hotspot is up).
# lab-timeout: 480
set -euo pipefail
. "$LAB/lab-lib.sh"
lab_radios 2
lab_netns_radio wlan1 phone
lab_no_ethernet
rm -f /etc/svc.json
cat > /etc/svc-defaults.json <<JSON
{"hotspot_prefix": "svc-lab", "hotspot_password": "hotspot-$(lab_run_id)",
 "check_url": "http://192.168.200.1:8080/", "offline_timeout_secs": 10, "retry_networks_secs": 30}
JSON
# The rogue: a DNS server on every address (no --bind-interfaces: it binds the wildcard).
dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --pid-file=/run/rogue-dns.pid
rogue=$(cat /run/rogue-dns.pid)
lab_check "the rogue dnsmasq holds 0.0.0.0:53" sh -c "ss -lunpH 'sport = :53' | grep -q 'pid=$rogue,'"
svc-agent provision > /tmp/provision.log 2>&1 &
prov=$!
lab_wait 120 "the service reports the culprit (port 53 held by dnsmasq, its pid)" \
    grep -q "hotspot: port 53 (DNS: udp, udp6, tcp, tcp6) is held by dnsmasq (pid $rogue)" /tmp/provision.log
lab_check "it is reported as an error" grep -qE "(ERROR|<3>).*hotspot: port 53 \(DNS" /tmp/provision.log
kill "$rogue"
lab_wait 180 "the hotspot serves again after its next retry: the service says the ports are free" \
    grep -q "hotspot: DNS and DHCP free again" /tmp/provision.log
hot_ssid="svc-lab-$(hostname)"
lab_phone_join "$hot_ssid" "hotspot-$(lab_run_id)"
status=$(ip netns exec phone curl -fsS --retry 30 --retry-delay 1 --retry-all-errors --max-time 60 http://10.42.0.1/api/status)
lab_check "the portal's status says the hotspot is up, nothing in its way" grep -q '"step":"hotspot","state":"up"}' <<<"$status"
kill "$prov"; wait "$prov" || true
cat /tmp/provision.log
