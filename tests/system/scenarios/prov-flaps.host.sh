#!/bin/bash
# Host side of prov-flaps: `LAB_FLAPS=20 tests/system/run.sh prov-flaps` asks the guest for the
# twenty-flap run (the default is eight, one of each kind; the scenario says why).
set -euo pipefail
case "${LAB_FLAPS:-8}" in
    8 | 20) echo "${LAB_FLAPS:-8}" > "$LAB_SHARE/flaps" ;;
    *) echo "LAB_FLAPS: 8 or 20, not '${LAB_FLAPS}'" >&2; exit 1 ;;
esac
