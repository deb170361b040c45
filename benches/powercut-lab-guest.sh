#!/bin/bash
# The guest half of the machine-level power-cut campaign (benches/powercut-lab.py). It runs
# as the lab disk's guest-run.sh, started by the image's lab.service on every boot, and
# never returns (the host cuts the power). On each boot it:
#   1. checks that the machine converged after the cut of the cut in flight (if any): every
#      link points at a byte-identical copy of a verified build, both binaries answer
#      `version --json`, svc-agent.service runs (through the boot guard when a new agent was
#      linked), the update in flight finishes, versions.json says so, the log queue's
#      acknowledged records are all in the app's logs.jsonl, and no .part or temp file is
#      left growing; then prints `@@CUT-RESULT@@ N KIND PASS|FAIL ...` on the console;
#   2. starts the next update (odd cuts: svc-server, even cuts: svc-agent, each flipping
#      between 0.1.x and 0.2.0, its cached copy removed so that it is downloaded again),
#      prints `@@CUT-GO@@ N KIND`, then one `@@PH@@ N PHASE` line per phase it sees, and
#      `@@CUT-DONE@@ N` once the update is complete. The host resets the machine at a random
#      moment of that.
# State of the campaign lives on the root file system (ext4, default mount options), in
# /var/lib/campaign: what the power cut hits is what it tests.
set -u
export PATH="/lab/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
C=/var/lib/campaign
M=/var/lib/lab/mgmt
S=/opt/svc
console() { echo "$*" > /dev/ttyS0; }
up() { cut -d' ' -f1 /proc/uptime; }
ver() { "$1" version --json 2>/dev/null | sed -n 's/.*"version":"\([^"]*\)".*/\1/p'; }
# atomic FILE: stdin to FILE through a synced temp file and a rename.
atomic() { cat > "$1.tmp" && sync "$1.tmp" && mv "$1.tmp" "$1" && sync "$(dirname "$1")"; }
# until_ok SECONDS CMD...: poll CMD; false when the bound (against a hang, not a timing
# assertion) passes.
until_ok() {
    local end=$(( $(date +%s) + $1 )); shift
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.2
    done
}
main_exe() {
    local p; p=$(systemctl show -p MainPID --value svc-agent.service 2>/dev/null)
    [ -n "$p" ] && [ "$p" != 0 ] && readlink "/proc/$p/exe"
}
server_exe() {
    local p; p=$(pgrep -x svc-server | head -n1)
    [ -n "$p" ] && readlink "/proc/$p/exe"
}

poll_json() { # poll_json SERVER_VERSION AGENT_VERSION
    local s a
    s=$(grep " $M/svc-server-$1\$" "$C/known" | cut -d' ' -f1)
    a=$(grep " $M/svc-agent-$2\$" "$C/known" | cut -d' ' -f1)
    # Each offer pins its versions: every other update of each binary goes back to 0.1.x, and
    # an offer older than the running version is refused unless `pin_version` names it (the
    # downgrade rule, docs/protocol.md; session 8's first --restore run stopped on it).
    cat <<JSON
{"config": {"components": [], "modules": [], "agent": {"svc-server": {"pin_version": "$1"}, "svc-agent": {"pin_version": "$2"}}}, "poll_interval_secs": 30,
 "targets": {"svc-server": {"version": "$1", "url": "svc-server-$1", "sha256": "$s", "size": $(stat -c %s "$M/svc-server-$1")},
             "svc-agent": {"version": "$2", "url": "svc-agent-$2", "sha256": "$a", "size": $(stat -c %s "$M/svc-agent-$2")}}}
JSON
}

setup() {
    mkdir -p "$C" "$M"
    local v1 v2 b
    v1=$(ver /lab/bin/svc-agent); v2=$(ver /lab/share/v2/svc-agent)
    for b in svc-agent svc-server; do
        cp "/lab/bin/$b" "$M/$b-$v1"; cp "/lab/share/v2/$b" "$M/$b-$v2"
    done
    sha256sum "$M"/svc-* > "$C/known"
    echo "$v1" > "$C/v1"; echo "$v2" > "$C/v2"
    ( umask 077
      printf '{"cloud": {"app_address": "file://%s", "id": "campaign", "secret": "campaign-secret-%s"}}\n' \
          "$M" "$(cat /lab/run-id)" > /etc/svc.json )
    poll_json "$v1" "$v1" | atomic "$M/poll.json"
    mkdir -p "$S/cache" "$S/bin"
    cp /lab/bin/svc-server "$S/cache/svc-server-$v1"
    ln -sfn "../cache/svc-server-$v1" "$S/bin/svc-server"
    # Units the campaign does not need, so that each boot is shorter (the network included:
    # the app is file://); stopped before the install, whose systemd reload is slow enough
    # with them under a starved TCG guest (one try ran out of its 180 s systemctl deadline).
    local units="NetworkManager.service NetworkManager-wait-online.service NetworkManager-dispatcher.service
        wpa_supplicant.service cron.service unattended-upgrades.service systemd-timesyncd.service
        ModemManager.service e2scrub_reap.service hostapd.service"
    # shellcheck disable=SC2086
    { systemctl mask $units; systemctl stop $units; } > /dev/null 2>&1 || true
    # Every later boot (each one after a cut) goes to campaign.target, not multi-user.target:
    # the kernel, the initrd, the journal replay of the cut ext4 root, systemd's sysinit and
    # basic targets, svc-agent.service (through its boot guard) and this runner; nothing else.
    # The boot of the cut disk stays real; it only starts less.
    cat > /etc/systemd/system/campaign.target <<'UNIT'
[Unit]
Description=power-cut campaign: svc-agent and the campaign runner only
Requires=basic.target
After=basic.target
Wants=svc-agent.service lab.service
AllowIsolate=yes
UNIT
    # A guest restored from the one the driver saved in the initrd (--restore) has the clock
    # of the moment it was saved; the initrd leaves the host's clock here, set before
    # anything else starts (a boot without it, not restored, keeps its own clock).
    cat > /etc/systemd/system/campaign-clock.service <<'UNIT'
[Unit]
Description=power-cut campaign: the host's clock in a restored guest
DefaultDependencies=no
Before=sysinit.target svc-agent.service
ConditionPathExists=/var/lib/campaign/host-epoch
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'date -s "@$(cat /var/lib/campaign/host-epoch)" > /dev/null; rm -f /var/lib/campaign/host-epoch'
[Install]
WantedBy=sysinit.target
UNIT
    systemctl enable campaign-clock.service > /dev/null 2>&1 || true
    systemctl set-default campaign.target > /dev/null 2>&1 || { console "@@CUT-SETUP-FAIL@@ campaign.target"; sleep infinity; }
    local try=1 err
    until err=$(svc-agent install 2>&1 >/dev/null); do
        console "@@CUT-SETUP@@ svc-agent install, try $try: $(printf '%s' "$err" | tail -n 3 | tr '\n' ' ')"
        [ "$try" -lt 3 ] || { console "@@CUT-SETUP-FAIL@@ svc-agent install"; sleep infinity; }
        try=$((try + 1))
    done
    until_ok 600 systemctl is-active --quiet svc-agent.service || { console "@@CUT-SETUP-FAIL@@ agent not active"; sleep infinity; }
    until_ok 600 pgrep -x svc-server || { console "@@CUT-SETUP-FAIL@@ svc-server not running"; sleep infinity; }
    echo "0 none $v1 $v1" | atomic "$C/state"
    console "@@CUT-SETUP@@ v1=$v1 v2=$v2 root: $(findmnt -no FSTYPE,OPTIONS /)"
}

# known_sound LINK NAME: the link's target is byte-identical to a verified build of NAME and
# runs.
known_sound() {
    local t sha
    t=$(readlink -f "$1") || return 1
    [ -f "$t" ] || return 1
    sha=$(sha256sum "$t" | cut -d' ' -f1)
    grep -q "^$sha  $M/$2-" "$C/known" || return 1
    [ -n "$(ver "$1")" ]
}

logs_ok() {
    python3 - "$S/logqueue/state.json" "$M/logs.jsonl" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
acked = st["acked"]
ids = set()
try:
    # One batch a line ({"records": [...]}); a torn last line (never acknowledged) is skipped.
    for line in open(sys.argv[2], errors="replace"):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        for rec in doc.get("records", [doc]) if isinstance(doc, dict) else []:
            if isinstance(rec, dict) and isinstance(rec.get("id"), int):
                ids.add(rec["id"])
except FileNotFoundError:
    pass
lost = [i for i in range(1, acked + 1) if i not in ids]
print(f"acked={acked} shipped={len(ids)} lost={len(lost)}")
sys.exit(1 if lost else 0)
PY
}

records_ok() { # records_ok SERVER AGENT
    python3 - "$S/versions.json" "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
# The agent installed by `svc-agent install` has no record until its first update.
agent = r.get("svc-agent", {}).get("current") or open("/var/lib/campaign/v1").read().strip()
ok = r["svc-server"]["current"] == sys.argv[2] and agent == sys.argv[3]
sys.exit(0 if ok else 1)
PY
}

# Temp files: .part downloads, their sidecars, temp links and temp writes anywhere under /opt/svc.
temps() { find "$S" -xdev \( -name '*.part' -o -name '*.part.json' -o -name '.*' -o -name '*.tmp*' \) \
    ! -path "$S/logqueue/*" -printf '%s %p\n' 2>/dev/null; }

# The convergence bound, against a hang only: in a guest starved to a few CPU-seconds a minute
# the agent's own download and verify of a 5.6 MB build took over 600 s (session 7, cut 2: the
# machine converged, the 600 s bound did not wait for it).
BOUND=2400
converge() { # converge N KIND SERVER AGENT
    local n="$1" kind="$2" ts="$3" ta="$4" fail="" t0 why restarted=0 tmp tmpn tmpb maxb
    t0=$(up)
    # Right after the boot, before anything had time to repair: the links are sound.
    known_sound "$S/bin/svc-server" svc-server || fail="$fail svc-server-link-unsound"
    known_sound "$S/bin/svc-agent" svc-agent || fail="$fail svc-agent-link-unsound"
    known_sound "$S/bin/svc-agent.stable" svc-agent || fail="$fail stable-link-unsound"
    until_ok "$BOUND" systemctl is-active --quiet svc-agent.service || fail="$fail agent-not-active"
    if [ "$kind" = agent ]; then
        # The agent never restarts itself for an update: once the link moved, the operator
        # (here the campaign) restarts the service, through the boot guard.
        until_ok "$BOUND" test "$(readlink "$S/bin/svc-agent")" = "../cache/svc-agent-$ta" || fail="$fail agent-link-not-$ta"
        if [ "$(main_exe)" != "$S/cache/svc-agent-$ta" ]; then
            systemctl restart svc-agent.service; restarted=1
        fi
        until_ok "$BOUND" test "$(main_exe)" = "$S/cache/svc-agent-$ta" || fail="$fail agent-not-running-$ta"
        until_ok "$BOUND" test "$(readlink "$S/bin/svc-agent.stable")" = "../cache/svc-agent-$ta" || fail="$fail agent-not-stable-$ta"
    fi
    until_ok "$BOUND" test "$(readlink "$S/bin/svc-server")" = "../cache/svc-server-$ts" || fail="$fail server-link-not-$ts"
    until_ok "$BOUND" test "$(server_exe)" = "$S/cache/svc-server-$ts" || fail="$fail server-not-running-$ts"
    until_ok 60 records_ok "$ts" "$ta" || fail="$fail versions-json"
    why=$(logs_ok 2>&1) || fail="$fail log-lost($why)"
    tmp=$(temps)
    tmpn=$(printf '%s' "$tmp" | grep -c . || true)
    tmpb=$(printf '%s\n' "$tmp" | awk '{s+=$1} END {print s+0}')
    maxb=$(stat -c %s "$M"/svc-* | sort -n | tail -n1)
    if [ "$tmpn" -gt 2 ] || [ "$tmpb" -gt "$maxb" ]; then fail="$fail temps($tmpn files, $tmpb bytes)"; fi
    local res=PASS; [ -n "$fail" ] && res=FAIL
    echo "$n $kind $res$fail" >> "$C/results"; sync "$C/results"
    console "@@CUT-RESULT@@ $n $kind $res$fail conv_s=$(awk -v a="$t0" -v b="$(up)" 'BEGIN{printf "%.1f", b-a}') restarted=$restarted temps=$tmpn/$tmpb $why"
    if [ -n "$fail" ]; then
        { echo "== cut $n"; ls -la "$S" "$S/bin" "$S/cache"; cat "$S/versions.json"; systemctl status svc-agent --no-pager -l | tail -n 20; journalctl -b -u svc-agent -o short-precise --no-pager | tail -n 40; } > /dev/ttyS0 2>&1
    fi
}

# watch N KIND NAME TARGET: phase markers until the update of NAME to TARGET is complete.
watch_update() {
    local n="$1" kind="$2" name="$3" t="$4" last="" ph
    local cached="$S/cache/$name-$t"
    while :; do
        if [ -e "$cached.part" ]; then ph=download
        elif [ "$(readlink "$S/bin/$name")" != "../cache/$name-$t" ]; then
            if [ -e "$cached" ]; then ph=verified; else ph=poll; fi
        elif [ "$kind" = server ]; then
            if [ "$(server_exe)" = "$cached" ]; then ph="done"; else ph=linked; fi
        else
            if [ "$(main_exe)" != "$cached" ]; then
                ph=linked
                [ "$last" = linked ] || { console "@@PH@@ $n linked t=$(up)"; last=linked; }
                systemctl restart --no-block svc-agent.service
                ph=restart
                until_ok 120 test "$(main_exe)" = "$cached"
            elif [ "$(readlink "$S/bin/svc-agent.stable")" != "../cache/svc-agent-$t" ]; then ph=probation
            else ph="done"
            fi
        fi
        [ "$ph" = "$last" ] || { console "@@PH@@ $n $ph t=$(up)"; last=$ph; }
        [ "$ph" = "done" ] && break
        sleep 0.1
    done
}

next_cut() { # next_cut N SERVER AGENT
    local n="$1" ts="$2" ta="$3" kind name t v1 v2
    v1=$(cat "$C/v1"); v2=$(cat "$C/v2")
    if [ $((n % 2)) = 1 ]; then kind=server; name=svc-server; t=$ts; else kind=agent; name=svc-agent; t=$ta; fi
    if [ "$t" = "$v1" ]; then t=$v2; else t=$v1; fi
    if [ "$kind" = server ]; then ts=$t; else ta=$t; fi
    # Downloaded again each time: the cached copy goes unless a link uses it.
    if ! readlink "$S/bin/"* | grep -qx "../cache/$name-$t"; then rm -f "$S/cache/$name-$t"; sync; fi
    echo "$n $kind $ts $ta" | atomic "$C/state"
    # The offer is durable before the host may cut: a cut that loses the offer itself
    # would test the harness, not the machine.
    poll_json "$ts" "$ta" | atomic "$M/poll.json"
    console "@@CUT-GO@@ $n $kind $t t=$(up)"
    systemctl kill -s HUP --kill-who=main svc-agent.service
    local t0; t0=$(up)
    watch_update "$n" "$kind" "$name" "$t"
    console "@@CUT-DONE@@ $n s=$(awk -v a="$t0" -v b="$(up)" 'BEGIN{printf "%.1f", b-a}')"
}

# Where a boot's time goes: systemd's start (kernel + initrd before it), multi-user.target,
# lab.service (this script), from the guest's clock; the host adds the time from the cut.
mono() { # mono UNIT|"" PROPERTY: a monotonic timestamp of a unit (or of the manager), in s
    local u
    if [ -n "$1" ]; then u=$(systemctl show -p "$2" --value "$1" 2>/dev/null); else u=$(systemctl show -p "$2" --value 2>/dev/null); fi
    awk -v u="${u:-0}" 'BEGIN{printf "%.1f", u/1e6}'
}
slowest() { # the services and mounts that took longest to become active
    systemctl list-units --all --no-legend --plain --type=service,mount,socket 2>/dev/null | awk '$1 ~ /\./ {print $1}' |
        xargs -r systemctl show -p Id -p InactiveExitTimestampMonotonic -p ActiveEnterTimestampMonotonic 2>/dev/null |
        awk -F= 'function out() { if (s > 0 && e > s) printf "%.1f %s\n", (e - s) / 1e6, id; id = ""; s = 0; e = 0 }
             /^Id=/ {id = $2} /^InactiveExitTimestampMonotonic=/ {s = $2 + 0}
             /^ActiveEnterTimestampMonotonic=/ {e = $2 + 0} /^$/ {out()} END {out()}' |
        sort -rn | head -n 8 | tr '\n' ' '
}
console "@@CUT-BOOT@@ uptime=$(up) userspace=$(mono "" UserspaceTimestampMonotonic) target=$(mono "$(systemctl get-default)" ActiveEnterTimestampMonotonic) agent=$(mono svc-agent.service ActiveEnterTimestampMonotonic) lab=$(mono lab.service ExecMainStartTimestampMonotonic) default=$(systemctl get-default)"
[ -f "$C/state" ] || setup
read -r n kind ts ta < "$C/state"
[ "$n" -gt 3 ] || console "@@CUT-UNITS@@ slowest to start: $(slowest)"
[ "$kind" = none ] || converge "$n" "$kind" "$ts" "$ta"
next_cut $((n + 1)) "$ts" "$ta"
sleep infinity
