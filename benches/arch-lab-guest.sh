#!/bin/bash
# The guest half of benches/arch-lab.sh (a lab scenario run by path: tests/system/run.sh
# benches/arch-lab-guest.sh, on either machine). Installs the agent with a file:// app that
# offers the lab's own svc-server, then prints `FIGURE key=value` lines: the boot (kernel
# to multi-user.target and to this runner), the time from the unit's start to svc-server
# running (three restarts: ExecMainStartTimestampMonotonic to svc-server's start time in
# /proc/PID/stat, both on the guest's monotonic clock), and the idle PSS of both after 20 s.
# lab-timeout: 600
# lab-needs: fresh-boot
set -euo pipefail
. "$LAB/lab-lib.sh"

fig() { echo "FIGURE $1=$2"; }
fig machine "$(uname -m)"
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

sleep 20 # idle on purpose: the figure is the resting footprint, nothing is awaited
pss() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup"; }
fig agent_pss_kib "$(pss "$(systemctl show -p MainPID --value svc-agent)")"
fig server_pss_kib "$(pss "$(server_pid)")"

# The release-profile agent (benches/arch-lab.sh, ARCH_LAB_RELEASE_*) beside this dist one,
# each alone and idle in a sandbox, as benches/profile-size.sh measures on the host (both
# already stripped: STRIP=true).
if [ -f "$LAB_SHARE/profile/svc-agent-release" ]; then
    STRIP=true sh "$LAB_SHARE/profile/profile-size.sh" "$LAB_SHARE/profile/svc-agent-release" /lab/bin/svc-agent > /tmp/profile.md
    cat /tmp/profile.md
    fig release_pss_kib "$(awk -F'|' 'NR == 3 {print $5 + 0}' /tmp/profile.md)"
    fig dist_pss_kib "$(awk -F'|' 'NR == 4 {print $5 + 0}' /tmp/profile.md)"
fi
