#!/bin/bash
# Host side of update-server-powercut: a slow release server (about 256 KiB/s, with Range
# support) for svc-server 0.2.0, so that the power cut lands in the middle of the download.
# Every request is logged (method, path, Range) to $LAB_WORK/host-http.log.
set -euo pipefail
www="$LAB_WORK/www"
mkdir -p "$www"
cp "$LAB_SHARE/v2/svc-server" "$www/svc-server-0.2.0"
python3 - "$www" "$LAB_SHARE/host.env.tmp" > "$LAB_WORK/host-http.log" 2>&1 <<'PY' &
import http.server, os, re, sys, time
root = sys.argv[1]
class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = os.path.join(root, os.path.basename(self.path))
        rng = self.headers.get("Range")
        print(f"GET {self.path} range={rng}", flush=True)
        try:
            data = open(path, "rb").read()
        except OSError:
            self.send_error(404); return
        start = 0
        m = re.match(r"bytes=(\d+)-$", rng or "")
        if m and int(m.group(1)) < len(data):
            start = int(m.group(1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data)-1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.send_header("ETag", '"v2-%d"' % len(data))
        self.end_headers()
        try:
            for i in range(start, len(data), 16384):
                self.wfile.write(data[i:i + 16384])
                time.sleep(0.0625)
        except (BrokenPipeError, ConnectionResetError):
            pass
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
with open(sys.argv[2], "w") as f:
    f.write(f"HOST_PORT={srv.server_address[1]}\n")
os.rename(sys.argv[2], sys.argv[2].replace(".tmp", ""))
srv.serve_forever()
PY
echo $! >> "$LAB_WORK/host.pids"
for _ in $(seq 100); do [ -f "$LAB_SHARE/host.env" ] && break; sleep 0.1; done
[ -f "$LAB_SHARE/host.env" ] || { echo "release server did not start" >&2; exit 1; }
