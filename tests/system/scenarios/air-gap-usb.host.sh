#!/bin/bash
# Host side of air-gap-usb: the vendor's flow with svc-release (docs/releases.md): a key, then
# three USB disk images, each a published management directory:
#   good      svc-server 0.2.0, signed;
#   tampered  the good one with its binary changed and the answer edited to match it (version
#             0.3.0, sha256, size), the good signature kept;
#   old       svc-server 0.1.0 (the running version before the update), validly signed: a
#             replayed older release.
# The guest gets the public key; host_usb_media plugs the images when the guest asks.
set -euo pipefail
. "$(dirname "$0")/../host-lib.sh"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
(cd "$root" && cargo build --locked --bin svc-release) >&2
rel="${CARGO_TARGET_DIR:-$root/target}/debug/svc-release"
key="$LAB_WORK/vendor.key"
"$rel" keygen "$key" > /dev/null
cp "$key.pub" "$LAB_SHARE/vendor.pub"

medium() { # medium NAME BINARY: a management directory with BINARY published into it
    local d="$LAB_WORK/media-$1"
    mkdir -p "$d"
    echo '{"config": {"components": [], "modules": [], "agent": {}}, "poll_interval_secs": 5}' > "$d/poll.json"
    "$rel" publish --key "$key" "$d" "$2"
}
medium good "$LAB_SHARE/v2/svc-server"
medium old "$LAB_SHARE/../bin/svc-server"
cp -a "$LAB_WORK/media-good" "$LAB_WORK/media-tampered"
python3 - "$LAB_WORK/media-tampered" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
answer = json.load(open(os.path.join(d, "poll.json")))
t = answer["targets"]["svc-server"]
data = bytearray(open(os.path.join(d, t["url"]), "rb").read())
data[len(data) // 2] ^= 0x01
os.remove(os.path.join(d, t["url"]))
sha = hashlib.sha256(data).hexdigest()
open(os.path.join(d, "artifacts", sha), "wb").write(data)
t.update(version="0.3.0", url="artifacts/" + sha, sha256=sha, size=len(data))
json.dump(answer, open(os.path.join(d, "poll.json"), "w"))
PY
for n in good tampered old; do
    mke2fs -q -t ext4 -d "$LAB_WORK/media-$n" -L "svc-$n" "$LAB_WORK/usb-$n.img" 64M
done
host_usb_media
