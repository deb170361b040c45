#!/bin/bash
# Host side of install-sh: a release server on host loopback (the guest reaches it at
# 10.0.2.2) serving install.sh, svc-agent-x86_64 and its .sha256, like a real release.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
www="$LAB_WORK/www"
mkdir -p "$www"
cp "$repo/install.sh" "$www/install.sh"
cp "$LAB_WORK/stage/bin/svc-agent" "$www/svc-agent-x86_64"
(cd "$www" && sha256sum svc-agent-x86_64 > svc-agent-x86_64.sha256)
python3 - "$www" "$LAB_SHARE/host.env.tmp" > "$LAB_WORK/host-http.log" 2>&1 <<'PY' &
import functools, http.server, os, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
with open(sys.argv[2], "w") as f:
    f.write(f"HOST_PORT={srv.server_address[1]}\n")
os.rename(sys.argv[2], sys.argv[2].replace(".tmp", ""))
srv.serve_forever()
PY
echo $! >> "$LAB_WORK/host.pids"
for _ in $(seq 100); do [ -f "$LAB_SHARE/host.env" ] && break; sleep 0.1; done
[ -f "$LAB_SHARE/host.env" ] || { echo "release server did not start" >&2; exit 1; }
