#!/bin/bash
# Host side of os-rauc-good: the RAUC pieces and bundles (tests/system/rauc-lab.sh, cached) and
# a management directory published with svc-release (docs/releases.md): svc-server under test
# and the good OS bundle (2.0.0-lab) as `targets.os`, all signed with the vendor key the
# images carry.
set -euo pipefail
. "$(dirname "$0")/../rauc-lab.sh"
rauc_lab_prepare "$LAB_SHARE/../bin/svc-agent"
rauc_lab_share good 2.0.0-lab
