#!/usr/bin/env bash
# arm64 beside x86_64 in one run (issue 42): the dist binaries' sizes, and on each lab
# machine (tests/system/run.sh, LAB_ARCH=amd64 and arm64, both TCG on this host) the guest's
# boot, the time from svc-agent.service's start to svc-server running and the idle PSS of
# both (benches/arch-lab-guest.sh, a fresh boot each). One guest at a time.
#
#   benches/arch-lab.sh          prints a Markdown table (BENCHMARKS.md, "arm64 beside x86_64")
#
# ARCH_LAB_BIN_x86_64=DIR, ARCH_LAB_BIN_aarch64=DIR: take the dist binaries from DIR instead
# of building them.
# Needs what scripts/test-system.sh needs (root, the lab's prerequisites, both images).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${LAB_CACHE:-$root/tests/system/.cache}"
"$root/scripts/lab-prereqs.sh"
declare -A agent server
for m in x86_64 aarch64; do
    # ARCH_LAB_BIN_x86_64 / ARCH_LAB_BIN_aarch64: a folder with both dist binaries already built.
    dir_var="ARCH_LAB_BIN_$m"
    if [ -n "${!dir_var:-}" ]; then
        agent[$m]="${!dir_var}/svc-agent" server[$m]="${!dir_var}/svc-server"
        continue
    fi
    mapfile -t b < <("$root/scripts/build-static.sh" "$m" --profile dist)
    [ ${#b[@]} -eq 2 ] || { echo "arch-lab: the $m build failed" >&2; exit 1; }
    agent[$m]="${b[0]}" server[$m]="${b[1]}"
done
declare -A fig
for arch in amd64 arm64; do
    m=x86_64; shown=""
    [ "$arch" = arm64 ] && m=aarch64 shown="arm64:"
    LAB_ARCH=$arch LAB_AGENT="${agent[$m]}" LAB_SERVER="${server[$m]}" \
        "$root/tests/system/run.sh" "$root/benches/arch-lab-guest.sh" >&2 \
        || { echo "arch-lab: the $arch guest failed (above)" >&2; exit 1; }
    run="$(ls -td "$cache/runs/${shown}arch-lab-guest."* | head -n1)"
    while IFS='=' read -r k v; do fig[$arch.$k]="$v"; done \
        < <(sed -n 's/^FIGURE //p' "$run/out/main/log.txt")
done
kib() { echo $(( $(stat -c %s "$1") / 1024 )); }
range() { # range ARCH: the three unit-to-server figures as "min-max ms"
    printf '%s\n' "${fig[$1.unit_to_server_ms_1]}" "${fig[$1.unit_to_server_ms_2]}" "${fig[$1.unit_to_server_ms_3]}" |
        sort -n | sed -n '1h;$H;${x;s/\n/-/;p}'
}
echo "| figure | x86_64 (amd64 guest) | aarch64 (arm64 guest) |"
echo "|---|---|---|"
echo "| svc-agent dist binary | $(kib "${agent[x86_64]}") KiB | $(kib "${agent[aarch64]}") KiB |"
echo "| svc-server dist binary | $(kib "${server[x86_64]}") KiB | $(kib "${server[aarch64]}") KiB |"
echo "| boot: kernel start to multi-user.target | ${fig[amd64.multi_user_s]} s | ${fig[arm64.multi_user_s]} s |"
echo "| boot: kernel start to the lab's runner | ${fig[amd64.runner_s]} s | ${fig[arm64.runner_s]} s |"
echo "| unit start to svc-server running (3 restarts) | $(range amd64) ms | $(range arm64) ms |"
echo "| idle PSS, svc-agent | ${fig[amd64.agent_pss_kib]} KiB | ${fig[arm64.agent_pss_kib]} KiB |"
echo "| idle PSS, svc-server | ${fig[amd64.server_pss_kib]} KiB | ${fig[arm64.server_pss_kib]} KiB |"
