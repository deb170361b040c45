#!/bin/bash
# Host services for scenarios: the guest reaches a server the host hook started on host
# loopback (qemu user networking: 10.0.2.2 is the host's 127.0.0.1), and files the hook put
# in /lab/share as file:// URLs. Needs: nothing from the agent (the update and protocol
# scenarios build on it).
# lab-timeout: 300
set -euo pipefail
. "$LAB/lab-lib.sh"

. "$LAB_SHARE/host.env"
token="$(cat "$LAB_SHARE/host-token")"
url="http://10.0.2.2:$HOST_PORT/index.html"
lab_wait 120 "NetworkManager brought the guest's ethernet up" sh -c 'ip -4 -br addr | grep -q "^e.* UP .*10\.0\.2\."'
page="$(curl -fsS --retry 20 --retry-delay 1 --retry-all-errors --max-time 120 "$url")"
lab_check "fetched $url from the host" test "$page" = "$token"
lab_check "read file:///lab/share/host-token" test "$(curl -fsS file:///lab/share/host-token)" = "$token"
