#!/usr/bin/env bash
# arm64 beside x86_64 in one run (issue 42): the dist binaries' sizes, and on each lab
# machine (tests/system/run.sh, LAB_ARCH=amd64 and arm64, both TCG on this host) the guest's
# boot, the time from svc-agent.service's start to svc-server running and the idle PSS of
# both (benches/arch-lab-guest.sh, a fresh boot each). One guest at a time.
#
#   benches/arch-lab.sh          prints a Markdown table (BENCHMARKS.md, "arm64 beside x86_64")
#
# ARCH_LAB_BIN_x86_64=DIR, ARCH_LAB_BIN_aarch64=DIR: take the dist binaries from DIR instead
# of building them. ARCH_LAB_RELEASE_x86_64=FILE, ARCH_LAB_RELEASE_aarch64=FILE: a `release`
# profile svc-agent (what Yocto and Buildroot build, issue 47), stripped here as those systems
# strip (benches/profile-size.sh); that machine's guest then measures it beside its dist agent,
# each alone and idle (profile-size.sh in the guest), and a row says both.
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
declare -A fig release_size
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for arch in amd64 arm64; do
    m=x86_64; shown=""
    [ "$arch" = arm64 ] && m=aarch64 shown="arm64:"
    rel_var="ARCH_LAB_RELEASE_$m" rel=""
    if [ -n "${!rel_var:-}" ]; then
        mkdir -p "$scratch/$m"
        strip="strip"; [ "$m" = aarch64 ] && strip="aarch64-linux-gnu-strip"
        STRIPPED="$scratch/$m" STRIP=$strip SIZE_ONLY=1 sh "$root/benches/profile-size.sh" "${!rel_var}" >&2
        rel="$scratch/$m/bin1" release_size[$m]="$(stat -c %s "${!rel_var}") B as built, $(stat -c %s "$rel") B stripped"
    fi
    # benches/arch-lab-guest.host.sh hands the release build and profile-size.sh to the guest.
    ARCH_LAB_RELEASE="$rel" LAB_ARCH=$arch LAB_AGENT="${agent[$m]}" LAB_SERVER="${server[$m]}" \
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
# alone ARCH: the release and dist agents' idle PSS, each alone (profile-size.sh in the guest).
alone() { [ -n "${fig[$1.release_pss_kib]:-}" ] && echo "release ${fig[$1.release_pss_kib]} KiB, dist ${fig[$1.dist_pss_kib]} KiB" || echo "not measured"; }
if [ ${#release_size[@]} -gt 0 ]; then
    echo "| svc-agent \`release\` profile (Yocto, Buildroot) | ${release_size[x86_64]:-not built} | ${release_size[aarch64]:-not built} |"
    echo "| idle PSS alone (sandbox, \`sleep\` as svc-server): release, dist | $(alone amd64) | $(alone arm64) |"
fi
