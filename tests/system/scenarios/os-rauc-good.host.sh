#!/bin/bash
# Host side of os-rauc-good: the RAUC pieces and bundles (tests/system/rauc-lab.sh, cached) and
# a management directory published with svc-release (docs/releases.md): svc-server under test
# and the good OS bundle (2.0.0-lab) as `targets.os`, all signed with the vendor key the
# images carry.
#
# The hawkBit phase (after.sh, final.sh): gooseBit on host loopback (the pinned venv of
# scripts/lib/goosebit.sh, which scripts/lab-prereqs.sh installs; its database and artifacts
# in this run's folder), with a rollout of OS 2.0.2-lab (the same good image as another
# version, so that slot B, running 2.0.0-lab, takes it) to the devices of the board
# `svc-lab-amd64`, RAUC's compatible string in the lab, which the guest names as its
# `hawkbit.board`. The guest reads gooseBit's address and an API token from
# /lab/share/goosebit.env.
set -euo pipefail
. "$(dirname "$0")/../rauc-lab.sh"
rauc_lab_prepare "$LAB_SHARE/../bin/svc-agent"
rauc_lab_share good 2.0.0-lab

# good_202 DIR: the good image as OS 2.0.2-lab (rauc-lab.sh's bundle recipe, its keys).
good_202() {
    # shellcheck disable=SC2034 # rauc_lab_bundle signs with the keys it names
    RAUC_LAB_KEYS="$RAUC_LAB/keys"
    rauc_lab_image_bundle "$RAUC_LAB/overlay" 2.0.2-lab "$1/good-2.0.2.raucb"
}
host_cache_once "$RAUC_LAB-goosebit" good_202
bundle="$RAUC_LAB-goosebit/good-2.0.2.raucb"

venv="${XDG_CACHE_HOME:-$HOME/.cache}/svc-agent-tests/goosebit/venv"
[ -x "$venv/bin/aerich" ] || { echo "gooseBit is not installed in $venv (scripts/lab-prereqs.sh)" >&2; exit 1; }
gb="$LAB_WORK/goosebit"
mkdir -p "$gb"
pkg="$("$venv/bin/python" -c 'import goosebit, os; print(os.path.dirname(goosebit.__file__))')"
printf '[tool.aerich]\ntortoise_orm = "goosebit.db.config.TORTOISE_CONF"\nlocation = "%s/db/migrations"\nsrc_folder = "./."\n' "$pkg" > "$gb/pyproject.toml"
export GOOSEBIT_DB_URI="sqlite://$gb/db.sqlite3" GOOSEBIT_ARTIFACTS_DIR="$gb/artifacts" GOOSEBIT_POLL_TIME=00:00:05
(cd "$gb" && "$venv/bin/aerich" upgrade) > "$gb/aerich.log" 2>&1 || { cat "$gb/aerich.log" >&2; exit 1; }
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
(cd "$gb" && exec "$venv/bin/python" -m uvicorn goosebit:app --host 127.0.0.1 --port "$port") \
    > "$LAB_WORK/goosebit.log" 2>&1 < /dev/null &
echo $! >> "$LAB_WORK/host.pids"
url="http://127.0.0.1:$port"
for _ in $(seq 240); do
    curl -sf -o /dev/null "$url/DEFAULT/controller/v1/probe" && break
    kill -0 "$(tail -n1 "$LAB_WORK/host.pids")" 2>/dev/null || break
    sleep 0.5
done
curl -sf -o /dev/null "$url/DEFAULT/controller/v1/probe" \
    || { echo "gooseBit did not start: $(tail -n 5 "$LAB_WORK/goosebit.log")" >&2; exit 1; }
token="$(curl -sf --data 'username=admin%40lab.example&password=lab-goosebit-pw' "$url/setup" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])')"
auth=(-H "Authorization: Bearer $token")
sw="$(curl -sf "${auth[@]}" -X PUT -F "file=@$bundle;filename=lab-os-2.0.2.raucb" "$url/api/v1/software" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"
curl -sf "${auth[@]}" -X PUT -H 'Content-Type: application/json' \
    -d "{\"name\": \"lab-os-2.0.2\", \"feed\": \"default\", \"software_id\": $sw}" "$url/api/v1/rollouts" > /dev/null
# What gooseBit made of the bundle's manifest: the board it is for, read back.
curl -sf "${auth[@]}" "$url/api/v1/software" | python3 -c '
import json, sys
s = json.load(sys.stdin)["software"][0]
hw = [c["model"] for c in s["compatibility"]]
print("gooseBit offers", s["version"], "for", hw, file=sys.stderr)
sys.exit(0 if s["version"] == "2.0.2-lab" and hw == ["svc-lab-amd64"] else 1)'
printf 'GB_PORT=%s\nGB_TOKEN=%s\nGB_BUNDLE_SIZE=%s\n' "$port" "$token" "$(stat -c %s "$bundle")" > "$LAB_SHARE/goosebit.env"
