#!/bin/bash
# Host side of update-both: a release server for the 0.2.0 binaries and the deltas that make
# them from the binaries under test (issue 44), published the vendor's way for an HTTPS-style
# app (docs/releases.md, *Deltas*): `svc-release targets --delta-from OLD --out DIR` writes a
# delta per binary into DIR and prints the signed targets naming both the full artifact and
# the delta. They go into a management directory (/lab/share/app, the guest's file:// app)
# whose machine config `svc-release publish` signed: the guest has the vendor key, so the
# targets' signatures are checked on what the deltas make. The guest reads this server's
# request log as http://10.0.2.2:PORT/requests.log, to count what it fetched.
set -euo pipefail
. "$(dirname "$0")/../host-lib.sh"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
(cd "$root" && cargo build --locked --bin svc-release) >&2
rel="${CARGO_TARGET_DIR:-$root/target}/debug/svc-release"
key="$LAB_WORK/vendor.key"
"$rel" keygen "$key" > /dev/null
cp "$key.pub" "$LAB_SHARE/vendor.pub"

www="$LAB_WORK/www"
mkdir -p "$www"
host_http "$www"
port="$(sed -n 's/^HOST_PORT=//p' "$LAB_SHARE/host.env")"
# host_http serves a name's last component from $www: the log through a link to it.
ln -s ../host-http.log "$www/requests.log"
for b in svc-agent svc-server; do
    cp "$LAB_SHARE/v2/$b" "$www/$(sha256sum "$LAB_SHARE/v2/$b" | cut -d' ' -f1)"
done
"$rel" targets --key "$key" --url-prefix "http://10.0.2.2:$port/" \
    --delta-from "$LAB_SHARE/../bin/svc-agent" --delta-from "$LAB_SHARE/../bin/svc-server" \
    --out "$www" "$LAB_SHARE/v2/svc-agent" "$LAB_SHARE/v2/svc-server" > "$LAB_SHARE/targets.json.tmp"
mv "$LAB_SHARE/targets.json.tmp" "$LAB_SHARE/targets.json"
cat "$LAB_SHARE/targets.json"

app="$LAB_SHARE/app"
"$rel" init "$app"
echo '{"config": {"components": [], "modules": [], "agent": {}}, "poll_interval_secs": 5}' > "$app/poll.json"
"$rel" publish --key "$key" --target "$LAB_MACHINE" "$app"
python3 - "$app/poll.json" "$LAB_SHARE/targets.json" <<'PY'
import json, os, sys
poll, targets = sys.argv[1], sys.argv[2]
answer = json.load(open(poll))
answer["targets"] = json.load(open(targets))
with open(poll + ".tmp", "w") as f:
    json.dump(answer, f, indent=1)
os.rename(poll + ".tmp", poll)
PY
