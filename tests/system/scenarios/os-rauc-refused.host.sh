#!/bin/bash
# Host side of os-rauc-refused: the management directory offers OS 2.1.0-lab, a bundle of the
# good slot image re-signed (`rauc resign`) with a key that is not in the machines' RAUC
# keyring, under a valid vendor signature; poll-badsig.json offers the same bundle as 2.2.0-lab
# with the vendor signature's bytes changed (the answer the guest switches to).
set -euo pipefail
. "$(dirname "$0")/../rauc-lab.sh"
rauc_lab_prepare "$LAB_SHARE/../bin/svc-agent"
rauc_lab_share other-key 2.1.0-lab
python3 - "$LAB_SHARE/app/poll.json" "$LAB_SHARE/app/poll-badsig.json" <<'PY'
import base64, json, sys
a = json.load(open(sys.argv[1]))
os_t = a["targets"]["os"]
sig = bytearray(base64.b64decode(os_t["signature"]))
sig[0] ^= 0x01
os_t["signature"] = base64.b64encode(bytes(sig)).decode()
os_t["version"] = "2.2.0-lab"
json.dump(a, open(sys.argv[2], "w"))
PY
