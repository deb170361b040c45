#!/bin/bash
# Host side of os-rauc-bad-gate: the RAUC pieces and bundles (tests/system/rauc-lab.sh, cached)
# and a management directory published with svc-release. Its main phase's three answers, in
# the order the guest puts them in place as poll.json:
#   poll.json          OS 2.1.0-lab, a bundle of the good slot image re-signed (`rauc resign`)
#                      with a key that is not in the machines' RAUC keyring, under a valid
#                      vendor signature (RAUC must refuse it);
#   poll-badsig.json   the same bundle as 2.2.0-lab with the vendor signature's bytes changed
#                      (the agent must refuse it before RAUC sees it);
#   poll-bad-gate.json OS 2.0.1-lab, the bundle of an image whose svc-server fails the health
#                      gate (rauc_lab_bad_overlay), under a valid vendor signature and RAUC's own
#                      key: nothing but the gate can refuse it.
# The two refusals were the scenario os-rauc-refused, a boot of its own; they run here on slot
# A before the bad bundle's install, which they must not disturb.
set -euo pipefail
. "$(dirname "$0")/../rauc-lab.sh"
rauc_lab_prepare "$LAB_SHARE/../bin/svc-agent"
app="$LAB_SHARE/app"
rauc_lab_share bad-gate 2.0.1-lab
mv "$app/poll.json" "$app/poll-bad-gate.json"
rauc_lab_share other-key 2.1.0-lab
python3 - "$app/poll.json" "$app/poll-badsig.json" <<'PY'
import base64, json, sys
a = json.load(open(sys.argv[1]))
os_t = a["targets"]["os"]
sig = bytearray(base64.b64decode(os_t["signature"]))
sig[0] ^= 0x01
os_t["signature"] = base64.b64encode(bytes(sig)).decode()
os_t["version"] = "2.2.0-lab"
json.dump(a, open(sys.argv[2], "w"))
PY
