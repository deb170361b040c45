#!/bin/bash
# Offline → hotspot up, svc-agent against the floor (`nmcli dev wifi hotspot`, NetworkManager
# alone), side by side in the same lab guest: runs the VM scenario prov-hotspot-fast RUNS
# times (default 3; one guest at a time) and prints its figures as a table. Both are timed by
# the same poll (wlan0 an AP holding 10.42.0.1), then until a phone already looking for the
# hotspot has associated; the agent also until its portal page reached the phone (with the
# scanned networks listed: the scenario fails without them).
# Usage: benches/hotspot.sh [RUNS]   (LAB_CACHE as for scripts/test-system.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 "$runs"); do
    LAB_JOBS=1 bash "$root/scripts/test-system.sh" prov-hotspot-fast > "$out/run-$i.log" 2>&1 || {
        tail -n 60 "$out/run-$i.log"; echo "hotspot bench: run $i failed" >&2; exit 1; }
done
echo "| run | AP up: nmcli floor | AP up: svc-agent | ratio | phone associated: floor | phone associated: svc-agent | svc-agent start → portal page on the phone |"
echo "|---|---|---|---|---|---|---|"
for i in $(seq 1 "$runs"); do
    up=$(sed -n 's/.*figure: hotspot up (AP + 10.42.0.1): nmcli floor \([0-9]*\) ms, svc-agent \([0-9]*\) ms.*/\1 \2/p' "$out/run-$i.log")
    assoc=$(sed -n 's/.*figure: phone associated: nmcli floor \([0-9]*\) ms, svc-agent \([0-9]*\) ms.*/\1 \2/p' "$out/run-$i.log")
    portal=$(sed -n 's/.*figure: svc-agent start to portal page on the phone: \([0-9]*\) ms.*/\1/p' "$out/run-$i.log")
    read -r fu au <<<"$up"; read -r fa aa <<<"$assoc"
    ratio=$(awk -v a="$au" -v f="$fu" 'BEGIN { printf "%.2f", a / f }')
    echo "| $i | ${fu} ms | ${au} ms | ${ratio}x | ${fa} ms | ${aa} ms | ${portal} ms |"
done
