#!/bin/bash
# BLE provisioning figures (issue 20): runs the lab scenario prov-ble RUNS times (default 3)
# and, in the same session, prov-dpp once as the reference (a network handed over without a
# hotspot: DPP scan → online), then prints each run's figures:
#   BLE submit (Wi-Fi settings written over GATT) → "provisioned" read back (online),
#   provisioning start → Improv service registered, the provisioning process's PSS with BLE up.
# Usage: LAB_CACHE=... benches/ble-lab.sh [RUNS]   (one guest at a time; slow under TCG)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-3}"
scen=()
for _ in $(seq "$runs"); do scen+=(prov-ble); done
scen+=(prov-dpp)
export LAB_CACHE="${LAB_CACHE:-$root/tests/system/.cache}"
stamp="$(mktemp)"
trap 'rm -f "$stamp"' EXIT
bash "$root/scripts/test-system.sh" "${scen[@]}" 2>&1 | grep -E '^(PASS|FAIL|system:)' || true
# Each run's folder keeps its log (the disks of passing runs are removed).
for d in $(find "$LAB_CACHE/runs" -maxdepth 1 \( -name 'prov-ble.*' -o -name 'prov-dpp.*' \) -newer "$stamp" | sort); do
    echo "== $(basename "$d")"
    grep -h 'figure:' "$d"/out/main/log.txt 2>/dev/null | sed 's/^\[lab [0-9.]*\] //' || true
done
