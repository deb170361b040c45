#!/usr/bin/env bash
# Idle footprint of svc-agent next to mender-client (Debian's package, a real OTA agent
# running as a daemon), in one run: PSS after warm-up, and CPU over DURATION seconds
# (default 600). svc-agent runs from a file:// management directory polling every 60 s, with
# a stand-in svc-server (`sleep`) so that only the agent itself is measured.
# Usage: benches/idle.sh [AGENT_BINARY]   (default: the dist musl build if present, else release)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-600}
agent=${1:-}
if [ -z "$agent" ]; then
  agent=target/x86_64-unknown-linux-musl/dist/svc-agent
  [ -x "$agent" ] || { cargo build --release --locked --bins >/dev/null 2>&1; agent=target/release/svc-agent; }
fi
command -v mender >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mender-client >/dev/null
systemctl stop mender-client 2>/dev/null || true

work=$(mktemp -d)
trap 'kill $apid $mpid 2>/dev/null || true; rm -rf "$work"' EXIT
root=$work/root app=$work/app
mkdir -p "$root/etc" "$root/opt/svc/bin" "$app" "$work/mender"
printf '#!/bin/sh\nexec sleep 100000\n' > "$root/opt/svc/bin/svc-server"; chmod 755 "$root/opt/svc/bin/svc-server"
printf '{"cloud":{"app_address":"file://%s","id":"bench","secret":"bench-secret"}}' "$app" > "$root/etc/svc.json"
chmod 600 "$root/etc/svc.json"
echo '{"poll_interval_secs": 60, "config": {"agent": {}}}' > "$app/poll.json"
# mender: a loopback server address that refuses, so it idles in its retry/wait states.
cat > "$work/mender/mender.conf" <<'JSON'
{"ServerURL": "https://127.0.0.1:9", "UpdatePollIntervalSeconds": 1800, "InventoryPollIntervalSeconds": 28800, "RetryPollIntervalSeconds": 300}
JSON
mkdir -p /etc/mender; [ -f /etc/mender/artifact_info ] || echo "artifact_name=bench" > /etc/mender/artifact_info

"$agent" run --root "$root" 2>"$work/agent.log" & apid=$!
mender --config "$work/mender/mender.conf" --data "$work/mender" daemon >"$work/mender.log" 2>&1 & mpid=$!
sleep 30

pss() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup"; }
rss() { awk '/^Rss:/ {print $2}' "/proc/$1/smaps_rollup"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
a0=$(ticks $apid) m0=$(ticks $mpid)
sleep "$DURATION"
a1=$(ticks $apid) m1=$(ticks $mpid)
hz=$(getconf CLK_TCK)
pct() { awk -v d="$1" -v t="$DURATION" -v hz="$hz" 'BEGIN {printf "%.4f", 100 * d / hz / t}'; }
echo "| agent | PSS | RSS | CPU over ${DURATION} s (% of one core) |"
echo "|---|---|---|---|"
echo "| svc-agent ($(basename "$(dirname "$agent")")/$(basename "$agent"), $(stat -c %s "$agent") B) | $(( $(pss $apid) )) KiB | $(rss $apid) KiB | $(pct $((a1 - a0))) % |"
echo "| mender-client 3.4 daemon | $(pss $mpid) KiB | $(rss $mpid) KiB | $(pct $((m1 - m0))) % |"
