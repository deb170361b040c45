#!/bin/bash
# Bad input (issue 42): a build for the other architecture (x86_64 on the arm64 machine,
# aarch64 on the amd64 one) offered as svc-server 0.2.0, with a correct sha256 and size, is
# refused before activation with a clear error naming both machines; svc-server 0.1.x keeps
# running (the same process), the link and versions.json stay and the download is removed.
# lab-timeout: 480
# lab-needs: other-arch
# lab-arches: amd64
# On the arm64 machine on demand (`scripts/test-system.sh arm64:update-wrong-arch`), not in every run: the tier's time.
set -euo pipefail
. "$LAB/lab-lib.sh"

other="$(cat /lab/share/other-arch/machine)"
lab_log "this machine: $(uname -m); offered: an $other build"
mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
offer() { # offer FILE VERSION: poll.json offering FILE as svc-server VERSION
    cp "$1" "$mgmt/svc-server-$2"
    cat > "$mgmt/poll.json.tmp" <<JSON
{"config": {"components": [], "modules": [], "agent": {}},
 "poll_interval_secs": 5,
 "targets": {"svc-server": {"version": "$2", "url": "svc-server-$2",
   "sha256": "$(sha256sum "$mgmt/svc-server-$2" | cut -d' ' -f1)", "size": $(stat -c %s "$mgmt/svc-server-$2")}}}
JSON
    mv "$mgmt/poll.json.tmp" "$mgmt/poll.json"
}
ver=$(svc-server version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
offer /lab/bin/svc-server "$ver"
lab_credentials "$mgmt"
rm -rf /opt/svc
lab_check "svc-agent install" svc-agent install
runs() { # runs VERSION: svc-server VERSION is the link target and the running process
    [ "$(readlink /opt/svc/bin/svc-server)" = "../cache/svc-server-$1" ] || return 1
    p=$(pgrep -x svc-server | head -n1)
    [ -n "$p" ] && [ "$(readlink "/proc/$p/exe")" = "/opt/svc/cache/svc-server-$1" ]
}
lab_wait 240 "svc-server $ver runs" runs "$ver"
pid_before=$(pgrep -x svc-server | head -n1)
cache_before=$(ls /opt/svc/cache)

offer /lab/share/other-arch/svc-server 0.2.0
journal_has() { journalctl -b -u svc-agent -o cat | grep -qF "$1"; }
want="svc-server update failed: ELF for the wrong architecture"
lab_wait 240 "the $other build refused" journal_has "$want"
line="$(journalctl -b -u svc-agent -o cat | grep -F "$want" | head -n1)"
lab_log "journal: $line"
lab_check "the error names both machines" sh -c "echo '$line' | grep -q '($other)' && echo '$line' | grep -q '($(uname -m))'"
lab_check "svc-server $ver still runs" runs "$ver"
lab_check "the same svc-server process (never stopped)" test "$(pgrep -x svc-server | head -n1)" = "$pid_before"
lab_check "nothing new in the cache (the download removed)" test "$(ls /opt/svc/cache)" = "$cache_before"
lab_check "versions.json: current $ver" python3 -c 'import json,sys; sys.exit(json.load(open("/opt/svc/versions.json"))["svc-server"]["current"] != sys.argv[1])' "$ver"
lab_log "ok: the $other build was refused before activation; $ver kept running"
