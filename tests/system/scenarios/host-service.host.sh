#!/bin/bash
# Host side of host-service: an HTTP server on host loopback (port chosen by the kernel),
# the stand-in for a release or management server. The guest reaches it at 10.0.2.2.
set -euo pipefail
mkdir -p "$LAB_WORK/www"
token="host-page-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
echo "$token" > "$LAB_WORK/www/index.html"
echo "$token" > "$LAB_SHARE/host-token"
python3 - "$LAB_WORK/www" "$LAB_SHARE/host.env.tmp" > "$LAB_WORK/host-http.log" 2>&1 <<'PY' &
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
[ -f "$LAB_SHARE/host.env" ] || { echo "host HTTP server did not start" >&2; exit 1; }
cat "$LAB_SHARE/host.env"
