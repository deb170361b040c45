#!/bin/bash
# The agent's idle memory on a real systemd machine (the lead's measuring script, from
# benches/arch-lab-guest.sh): a lab scenario run by path, one guest at a time:
#   LAB_CACHE=/work/main/tests/system/.cache LAB_ARCH=amd64|arm64 LAB_AGENT=<dist svc-agent> \
#   LAB_SERVER=<dist svc-server> tests/system/run.sh benches/pss-guest.sh
# (dist binaries: scripts/build-static.sh x86_64|aarch64 --profile dist). Log:
# $LAB_CACHE/runs/pss-guest.*/out/main/log.txt. Besides the figures below it lists the
# agent's threads and every mapping with its Rss, Pss, Anonymous and AnonHugePages.
# Installs the agent with a file:// app that offers the lab's own svc-server and prints
# `FIGURE key=value` lines (kernel, THP mode, boot, unit start to svc-server running over
# three restarts), then the agent's memory 0, 20, 60 and 120 s after the last restart
# (a poll every 60 s) and svc-server's PSS; then 20 s after a start with the page cache
# dropped, as after a reboot.
# lab-timeout: 900
# lab-needs: fresh-boot
set -euo pipefail
. "$LAB/lab-lib.sh"

fig() { echo "FIGURE $1=$2"; }
fig machine "$(uname -m)"
fig kernel "$(uname -r)"
# Transparent huge pages: `always` backs any 2 MiB-aligned range of an anonymous mapping
# with one page on its first touch (the agent's thread stacks, sys::thread).
fig thp "$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
fig runner_s "$(cut -d' ' -f1 /proc/uptime)"
fig multi_user_s "$(systemctl show -p ActiveEnterTimestampMonotonic --value multi-user.target | awk '{printf "%.1f", $1/1000000}')"

mgmt=/var/lib/lab/mgmt
mkdir -p "$mgmt"
ver=$(svc-server version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
cp /lab/bin/svc-server "$mgmt/svc-server-$ver"
cat > "$mgmt/poll.json" <<JSON
{"config": {"components": [], "modules": [], "agent": {}},
 "poll_interval_secs": 60,
 "targets": {"svc-server": {"version": "$ver", "url": "svc-server-$ver",
   "sha256": "$(sha256sum "$mgmt/svc-server-$ver" | cut -d' ' -f1)", "size": $(stat -c %s "$mgmt/svc-server-$ver")}}}
JSON
lab_credentials "$mgmt"
rm -rf /opt/svc
lab_check "svc-agent install" svc-agent install
server_pid() { pgrep -x svc-server | head -n1; }
lab_wait 300 "svc-server runs" sh -c '[ -n "$(pgrep -x svc-server)" ]'

hz=$(getconf CLK_TCK)
for i in 1 2 3; do
    old=$(server_pid)
    systemctl restart svc-agent
    # A new svc-server process (the agent stops its child when it stops).
    lab_wait 300 "svc-server runs again (restart $i)" sh -c "p=\$(pgrep -x svc-server | head -n1); [ -n \"\$p\" ] && [ \"\$p\" != '$old' ]"
    p=$(server_pid)
    unit_us=$(systemctl show -p ExecMainStartTimestampMonotonic --value svc-agent)
    # Field 22 of /proc/PID/stat: start time in clock ticks since boot (comm has no spaces).
    ticks=$(awk '{print $22}' "/proc/$p/stat")
    fig "unit_to_server_ms_$i" "$(awk -v t="$ticks" -v hz="$hz" -v u="$unit_us" 'BEGIN{printf "%d", (t/hz - u/1000000)*1000}')"
done
a=$(systemctl show -p MainPID --value svc-agent)
show() {
    echo "== $1 s: agent pid $a"
    grep -E "^(Rss|Pss|Pss_Anon|Pss_File|Anonymous|AnonHugePages|Private_Dirty|Shared_Clean)" "/proc/$a/smaps_rollup"
    grep -E "^(Threads|VmRSS|VmHWM|RssAnon|RssFile)" "/proc/$a/status"
    echo "   svc-server $(grep '^Pss:' "/proc/$(server_pid)/smaps_rollup")"
    awk '/^[0-9a-f]+-[0-9a-f]+ /{name=$6; if(name=="")name="[anon]"} /^Pss:/{pss[name]+=$2} END{for(n in pss) if(pss[n]>50) print "   pss", pss[n], n}' "/proc/$a/smaps" | sort -k2 -n -r | head -12
}
show 0
echo "== threads: $(cat /proc/$a/task/*/comm | tr '\n' ' ')"
# Every mapping with its Rss/Pss/Anonymous (which segment of the binary, which anon region).
awk '/^[0-9a-f]+-[0-9a-f]+ /{m=$1" "$2" "$6} /^(Rss|Pss|Anonymous|AnonHugePages):/{v[$1]=$2} /^VmFlags/{print "   map", m, "rss", v["Rss:"], "pss", v["Pss:"], "anon", v["Anonymous:"], "huge", v["AnonHugePages:"]}' "/proc/$a/smaps"
sleep 20; show 20
sleep 40; show 60
sleep 60; show 120
# As after a reboot: the binary not in the page cache (only pages read since are mapped
# around a fault; `install` just wrote all of it). Stopped first: a mapped page is not dropped.
systemctl stop svc-agent
sync
echo 3 > /proc/sys/vm/drop_caches
systemctl start svc-agent
lab_wait 300 "svc-server runs (cold cache)" sh -c '[ -n "$(pgrep -x svc-server)" ]'
a=$(systemctl show -p MainPID --value svc-agent)
sleep 20; show "cold cache, 20"
ls -la /proc/$a/fd | wc -l
cat /opt/svc/config.json 2>/dev/null | head -c 300 || true
journalctl -u svc-agent --no-pager | tail -30
