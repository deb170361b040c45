#!/usr/bin/env bash
# The system test tier: real systemd, journald, NetworkManager and Wi-Fi stack in a qemu
# guest (see docs/lab.md).
#
#   scripts/test-system.sh [SCENARIO | arm64:SCENARIO ...]
#
# Installs the host prerequisites when missing (idempotent), builds the static x86_64 and
# aarch64 binaries, builds or reuses the cached guest images (amd64 and arm64), runs the
# scenarios (all by default: every scenario on the amd64 machine, and on the arm64 machine
# those that say `# lab-arches: ... arm64`) and exits non-zero on any failure. A
# prerequisite that cannot be had fails the run loudly.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
log() { echo "test-system: $*" >&2; }
die() { echo "test-system: ERROR: $*" >&2; echo "system: 0 passed, 1 failed"; exit 1; }
t0=$SECONDS

[ "$(id -u)" = 0 ] || die "must run as root (apt, mmdebstrap, chroot)"
[ "$(uname -m)" = x86_64 ] || die "the lab host must be x86_64 (the guest is amd64 under TCG)"

"$root/scripts/lab-prereqs.sh" || die "the lab's host prerequisites could not be installed (see above)"
log "prerequisites ready ($((SECONDS - t0)) s)"

# Scenarios: the ones named, or every scenario (the same rule as run.sh), and `arm64:NAME`
# for each that also runs on the arm64 machine.
if [ $# -gt 0 ]; then
    scenarios=("$@")
else
    scenarios=()
    for f in "$root"/tests/system/scenarios/*.sh; do
        b="$(basename "$f" .sh)"
        case "$b" in *.host|*.after|*.final|*.fourth) continue ;; esac
        scenarios+=("$b")
        grep -q -E '^# lab-arches:.* arm64( |$)' "$f" && scenarios+=("arm64:$b")
    done
fi
# file ENTRY: the scenario file of a queue entry (NAME or arm64:NAME).
file() { echo "$root/tests/system/scenarios/${1#arm64:}.sh"; }
on_arm64() { case "$1" in arm64:*) return 0 ;; esac; return 1; }

# Longest first (a two-phase scenario boots twice, a three-phase one three times; then by
# its time limit), so that the last scenario to start is a short one and both guests finish near the same time.
weight() {
    local f w
    f="$(file "$1")"
    w="$(sed -n 's/^# lab-timeout: *\([0-9]\+\).*/\1/p' "$f" 2>/dev/null | head -n1)"
    w="${w:-480}"
    [ -f "${f%.sh}.after.sh" ] && w=$((w + 1000))
    [ -f "${f%.sh}.final.sh" ] && w=$((w + 1000))
    [ -f "${f%.sh}.fourth.sh" ] && w=$((w + 1000))
    # The arm64 machine weighs as the amd64 one: with kpti=0 (run.sh) its install-sh took as
    # many CPU seconds as amd64's (BENCHMARKS.md, "arm64 beside x86_64").
    echo "$w"
}
# Scenarios that boot (other devices: a USB controller, a data disk, slot B; or fresh-boot) go first,
# while the guest the others restore is being saved (tests/system/run.sh --snapshot).
# The arm64 machine always boots (the saved guest is an amd64 one).
boots() { on_arm64 "$1" || grep -q -E '^# lab-needs: (usb|data-disk|slot-b|fresh-boot)' "$(file "$1")" 2>/dev/null; }
mapfile -t scenarios < <(for s in "${scenarios[@]}"; do
    b=1; boots "$s" && b=0
    echo "$b $(weight "$s") $s"
done | sort -s -k1,1n -k2,2nr | cut -d' ' -f3-)

t2=$SECONDS
image="$("$root/tests/system/guest/build-image.sh")" || die "guest image build failed"
log "guest image ready ($((SECONDS - t2)) s): $image"

# Which machines and builds this run needs.
arm64=0 needs_other=0
for s in "${scenarios[@]}"; do
    on_arm64 "$s" && arm64=1
    grep -q '^# lab-needs: other-arch' "$(file "$s")" 2>/dev/null && needs_other=1
done

# Everything started in the background is a process group of its own (set -m), so that
# stopping this script stops its guests and host servers too.
pids=(); snap=""; q=""; arm64_state=""; v2dir=""
stop_workers() { for p in "${pids[@]}"; do kill -- -"$p" 2>/dev/null || true; done; }
trap 'stop_workers; rm -rf ${q:+"$q"} ${snap:+"$snap" "$snap.log"} ${arm64_state:+"$arm64_state"} ${v2dir:+"$v2dir"}' EXIT
trap 'exit 130' INT TERM

# One guest, booted once and saved up and idle; each scenario's main phase restores it in
# seconds instead of booting (about 40 s under TCG). LAB_RESTORE=0 boots every scenario.
# It needs only the image, so it boots while the binaries build.
cache="${LAB_CACHE:-$root/tests/system/.cache}"
set -m
if [ "${LAB_RESTORE:-1}" != 0 ]; then
    mkdir -p "$cache"
    snap="$(mktemp -d "$cache/snapshot.XXXXXX")"
    export LAB_SNAPSHOT="$snap"
    { "$root/tests/system/run.sh" --snapshot "$snap" > "$snap.log" 2>&1 \
        || [ -f "$snap/status" ] || echo "failed: the harness exited (see $snap.log)" > "$snap/status"; } &
    pids+=($!)
fi
# The arm64 machine's image (guest/build-image-arm64.sh: minutes, cold), while the binaries
# build and the amd64 scenarios run; its first scenario's run.sh waits for it on the cache's
# lock (or builds it itself, saying why, if this one failed).
# $arm64_state/image exists once that build has ended, either way (worker, below).
arm64_state="$(mktemp -d)"
if [ "$arm64" = 1 ]; then
    mkdir -p "$cache"
    {
        if "$root/tests/system/guest/build-image-arm64.sh" > "$cache/arm64-image.log" 2>&1; then
            log "arm64 guest image ready: $(tail -n 1 "$cache/arm64-image.log")"
        else
            log "the arm64 image build failed here (the arm64 scenarios try again): $(tail -n 3 "$cache/arm64-image.log")"
        fi
        : > "$arm64_state/image"
    } &
    pids+=($!)
fi
set +m

# LAB_JOBS guests side by side (default 3). A TCG guest spends much of a scenario waiting
# (polls, timers, boots' I/O): two on two cores left a sixth of the cores idle (2714 CPU s in
# 1651 s), so three keep them busy; each run.sh has its own run folders and qemu, and host
# hooks pick free ports.
jobs="${LAB_JOBS:-3}"
case "$jobs" in ''|*[!0-9]*|0) die "LAB_JOBS must be a positive number, not '$jobs'" ;; esac
[ "$jobs" -le ${#scenarios[@]} ] || jobs=${#scenarios[@]}

# The static builds, once, before the workers start (run.sh takes them from LAB_*): x86_64
# always; aarch64 for the arm64 machine and for the wrong-machine builds of `other-arch`.
t1=$SECONDS
mapfile -t built < <("$root/scripts/build-static.sh" x86_64 --profile dist)
[ ${#built[@]} -eq 2 ] || die "scripts/build-static.sh x86_64 failed"
export LAB_AGENT="${built[0]}" LAB_SERVER="${built[1]}"
if [ "$arm64" = 1 ] || [ "$needs_other" = 1 ]; then
    mapfile -t built_a64 < <("$root/scripts/build-static.sh" aarch64 --profile dist)
    [ ${#built_a64[@]} -eq 2 ] || die "scripts/build-static.sh aarch64 failed"
fi
log "static binaries ready ($((SECONDS - t1)) s): ${built[*]} ${built_a64[*]:-}"

# The 0.2.0 binaries, per machine, only when a scenario of this run on that machine updates to
# it: copies of the builds above that say 0.2.0 (tests/system/stamp-version.py: about a second,
# where a second compile took 54 s x86_64 and 86 s aarch64 of the guests' two cores).
v2_amd64=0 v2_arm64=0
for s in "${scenarios[@]}"; do
    grep -q '^# lab-needs: v2' "$(file "$s")" 2>/dev/null || continue
    if on_arm64 "$s"; then v2_arm64=1; else v2_amd64=1; fi
done
v2dir="$(mktemp -d)" v2=() v2_a64=()
if [ "$v2_amd64" = 1 ]; then
    mapfile -t v2 < <("$root/tests/system/stamp-version.py" 0.2.0 "$v2dir/x86_64" "${built[@]}")
    [ ${#v2[@]} -eq 2 ] || die "the 0.2.0 copies of the x86_64 binaries failed"
    # The workers' run.sh take these instead of each making them again.
    export LAB_V2_AGENT="${v2[0]}" LAB_V2_SERVER="${v2[1]}"
fi
if [ "$v2_arm64" = 1 ]; then
    mapfile -t v2_a64 < <("$root/tests/system/stamp-version.py" 0.2.0 "$v2dir/aarch64" "${built_a64[@]}")
    [ ${#v2_a64[@]} -eq 2 ] || die "the 0.2.0 copies of the aarch64 binaries failed"
fi
log "0.2.0 binaries ready:${v2[*]:+ ${v2[*]}}${v2_a64[*]:+ ${v2_a64[*]}}"

# A queue of scenario names; each worker takes the next one (longest-waiting first is the
# order given), so a slow scenario does not hold back a whole half of the list.
q="$(mktemp -d)"
printf '%s\n' "${scenarios[@]}" > "$q/queue"
take() { # prints the next scenario name and removes it from the queue; fails when empty
    flock "$q/queue.lock" bash -c 'n="$(head -n1 "$1")"; [ -n "$n" ] || exit 1; sed -i 1d "$1"; echo "$n"' _ "$q/queue"
}
# ready NAME: the arm64 image an arm64 entry needs has been built (or its build has ended, either way).
ready() { [ -e "$arm64_state/image" ]; }
# later NAME: while an arm64 entry is not ready, puts it back at the end of the queue when an
# amd64 entry is left to run meanwhile (so no guest slot idles); fails when there is none, and
# the caller waits for its builds, which always end, and then runs it.
later() {
    on_arm64 "$1" && ! ready "$1" || return 1
    flock "$q/queue.lock" bash -c 'grep -qv "^arm64:" "$1" || exit 1; echo "$2" >> "$1"' _ "$q/queue" "$1"
}
worker() {
    local w="$1" name
    while name="$(take)"; do
        if later "$name"; then continue; fi
        # One scenario's whole output, printed at once so two workers' logs do not interleave.
        if on_arm64 "$name"; then
            while ! ready "$name"; do sleep 1; done
            # The arm64 machine: its builds, the x86_64 ones as the wrong machine's.
            LAB_ARCH=arm64 LAB_AGENT="${built_a64[0]}" LAB_SERVER="${built_a64[1]}" \
                LAB_V2_AGENT="${v2_a64[0]:-}" LAB_V2_SERVER="${v2_a64[1]:-}" LAB_OTHER_SERVER="${built[1]}" \
                "$root/tests/system/run.sh" "${name#arm64:}" > "$q/out.$w" 2>&1 || true
        else
            LAB_OTHER_SERVER="${built_a64[1]:-}" "$root/tests/system/run.sh" "$name" > "$q/out.$w" 2>&1 || true
        fi
        # run.sh prints one PASS/FAIL line per scenario; none means the harness itself failed.
        grep -q -E '^(PASS|FAIL) ' "$q/out.$w" || echo "FAIL $name: the harness failed (see above)" >> "$q/out.$w"
        flock "$q/print.lock" bash -c 'grep -v "^system: " "$1"; grep -E "^(PASS|FAIL) " "$1" >> "$2"' _ "$q/out.$w" "$q/results"
    done
}
log "running ${#scenarios[@]} scenario(s), $jobs guest(s) at a time"
set -m
for w in $(seq 1 "$jobs"); do
    worker "$w" &
    pids+=($!)
done
set +m
wait "${pids[@]}"
pids=()
if [ -n "$snap" ]; then
    log "saved guest: $(cat "$snap/status" 2>/dev/null || echo "not made: $(tail -n 3 "$snap.log")")"
fi

passed="$(grep -c '^PASS ' "$q/results" 2>/dev/null || true)"
failed="$(grep -c '^FAIL ' "$q/results" 2>/dev/null || true)"
missing=$(( ${#scenarios[@]} - ${passed:-0} - ${failed:-0} ))
[ "$missing" -le 0 ] || failed=$(( ${failed:-0} + missing ))
echo
grep -E '^(PASS|FAIL) ' "$q/results" || true
echo "system: ${passed:-0} passed, ${failed:-0} failed"
log "total $((SECONDS - t0)) s"
[ "${failed:-0}" -eq 0 ]
