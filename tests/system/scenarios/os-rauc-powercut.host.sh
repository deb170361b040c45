#!/bin/bash
# Host side of os-rauc-powercut: the RAUC pieces and bundles (tests/system/rauc-lab.sh, cached)
# and the management directory offering the good OS bundle (2.0.0-lab), as os-rauc-good.
set -euo pipefail
. "$(dirname "$0")/../rauc-lab.sh"
rauc_lab_prepare "$LAB_SHARE/../bin/svc-agent"
rauc_lab_share good 2.0.0-lab
