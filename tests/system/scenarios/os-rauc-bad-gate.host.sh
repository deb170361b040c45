#!/bin/bash
# Host side of os-rauc-bad-gate: the RAUC pieces and bundles (tests/system/rauc-lab.sh, cached)
# and a management directory published with svc-release offering OS 2.0.1-lab, the bundle of an
# image whose svc-server fails the health gate (rauc_lab_bad_overlay), under a valid vendor
# signature and RAUC's own key: nothing but the gate can refuse it.
set -euo pipefail
. "$(dirname "$0")/../rauc-lab.sh"
rauc_lab_prepare "$LAB_SHARE/../bin/svc-agent"
rauc_lab_share bad-gate 2.0.1-lab
