# shellcheck shell=bash
# Helpers for the host side of scenarios (`<name>.host.sh`): `. "$(dirname "$0")/../host-lib.sh"`.

# host_http WWW [BYTES_PER_SECOND]: serves the files of WWW over HTTP on host loopback (the
# guest reaches it at 10.0.2.2), with Range requests (206) and an ETag, optionally slowed
# down to BYTES_PER_SECOND. Writes HOST_PORT=<port> to $LAB_SHARE/host.env, records the PID
# in $LAB_WORK/host.pids and logs each request (path, Range) to $LAB_WORK/host-http.log.
host_http() {
    local www="$1" rate="${2:-0}"
    python3 - "$www" "$rate" "$LAB_SHARE/host.env.tmp" > "$LAB_WORK/host-http.log" 2>&1 <<'PY' &
import http.server, os, re, signal, sys, time
root, rate, env = sys.argv[1], int(sys.argv[2]), sys.argv[3]
CHUNK = 16384
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        rng = self.headers.get("Range")
        print(f"GET {self.path} range={rng}", flush=True)
        try:
            data = open(os.path.join(root, os.path.basename(self.path) or "index.html"), "rb").read()
        except OSError:
            self.send_error(404)
            return
        start = 0
        m = re.match(r"bytes=(\d+)-$", rng or "")
        if m and int(m.group(1)) < len(data):
            start = int(m.group(1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.send_header("ETag", '"%x-%d"' % (hash(data) & 0xffffffff, len(data)))
        self.end_headers()
        try:
            for i in range(start, len(data), CHUNK):
                self.wfile.write(data[i:i + CHUNK])
                if rate:
                    time.sleep(CHUNK / rate)
        except (BrokenPipeError, ConnectionResetError):
            pass
    def log_message(self, *args):
        pass
def stopped(signum, frame):
    # Say so in host-http.log: a server that vanished must not look like a guest problem.
    print(f"stopped by signal {signum}", flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stopped)
class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 64
    daemon_threads = True
srv = Server(("127.0.0.1", 0), Handler)
with open(env, "w") as f:
    f.write(f"HOST_PORT={srv.server_address[1]}\n")
os.rename(env, env[:-len(".tmp")])
srv.serve_forever()
PY
    local pid=$!
    echo "$pid" >> "$LAB_WORK/host.pids"
    for _ in $(seq 300); do
        [ -f "$LAB_SHARE/host.env" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -f "$LAB_SHARE/host.env" ] || {
        echo "host HTTP server did not start: $(tail -n 5 "$LAB_WORK/host-http.log")" >&2
        return 1
    }
    # Proven, not assumed: an HTTP answer from the port the guest will use.
    host_probe "$(sed -n 's/^HOST_PORT=//p' "$LAB_SHARE/host.env")"
}

# host_probe PORT: an HTTP request to 127.0.0.1:PORT gets an answer (any status), within 10 s.
host_probe() {
    python3 - "$1" <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
c.request("HEAD", "/lab-probe")
c.getresponse()
PY
}

# host_usb_media: for a `# lab-needs: usb` scenario, hot-plugs USB disks as the guest asks.
# The guest prints `@@USB@@ plug NAME` (or `unplug NAME`) on its console (lab-lib.sh:
# lab_usb); a watcher started here sees the line and tells QEMU through the monitor socket
# ($LAB_WORK/monitor.sock): drive_add of $LAB_WORK/usb-NAME.img and device_add of a
# usb-storage device on the xhci bus, or device_del. Records its PID in $LAB_WORK/host.pids
# and logs every command and QEMU's reply to $LAB_WORK/host-usb.log.
host_usb_media() {
    python3 - "$LAB_WORK" "$(dirname "${BASH_SOURCE[0]}")" > "$LAB_WORK/host-usb.log" 2>&1 <<'PY' &
import os, re, signal, sys, time
work = sys.argv[1]
sys.path.insert(0, os.path.abspath(sys.argv[2]))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import hmp
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
def monitor(cmds):
    s = hmp.connect(work)
    if s is None:
        print("no QEMU monitor at", os.path.join(work, "monitor.sock"), flush=True)
        return
    for c in cmds:
        answer = hmp.command(s, c)
        print(c, "->", answer or "(no output: done)", flush=True)
    s.close()
done = 0
while True:
    try:
        text = open(os.path.join(work, "console-main.log"), errors="replace").read()
    except OSError:
        text = ""
    events = re.findall(r"@@USB@@ (plug|unplug) ([A-Za-z0-9_-]+)\r?\n", text)
    for what, name in events[done:]:
        if what == "plug":
            img = os.path.join(work, f"usb-{name}.img")
            monitor([f"drive_add 0 if=none,id=usb-{name},format=raw,file={img}",
                     f"device_add usb-storage,bus=xhci.0,drive=usb-{name},id=stick-{name},removable=on"])
        else:
            monitor([f"device_del stick-{name}"])
    done = len(events)
    time.sleep(0.3)
PY
    echo "$!" >> "$LAB_WORK/host.pids"
}

# host_guest_debs DIR PACKAGE...: downloads Debian's .debs of PACKAGE... for the guest's
# architecture (LAB_ARCH, from tests/system/run.sh) into DIR, from the mirror apt uses on the
# host (bookworm, as the guest). For amd64 the host's own apt does it; for arm64 a private
# apt state (lists under $LAB_CACHE/apt-arm64, made once and shared, one user at a time)
# leaves the host's apt configuration as it is.
host_guest_debs() {
    local dir="$1"; shift
    if [ "${LAB_ARCH:-amd64}" = amd64 ]; then
        (cd "$dir" && { apt-get download "$@" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get download "$@"; }; })
        return
    fi
    local st="${LAB_CACHE:?}/apt-$LAB_ARCH"
    local opts=(-o "APT::Architecture=$LAB_ARCH" -o "APT::Architectures::=$LAB_ARCH"
        -o "Dir::State::Lists=$st/lists" -o "Dir::Cache=$st/cache" -o "Dir::State::status=/dev/null")
    mkdir -p "$st/lists/partial" "$st/cache/archives/partial"
    (
        flock 8
        [ -f "$st/updated" ] || { apt-get "${opts[@]}" update >&2 && touch "$st/updated"; } || exit 1
        cd "$dir" && apt-get "${opts[@]}" download "$@" >&2
    ) 8>"$st.lock"
}

# host_debs_tar OUT.tar DEB...: every file of the packages at the path dpkg installs it to
# (`dpkg-deb -x`: modes, setuid bits and links as packaged; conffiles in place, not as dpkg
# --unpack's `.dpkg-new`), owned by root, as one tar of top-level entries (no "./": the
# guest's / keeps its own metadata). The guest extracts it with `tar -C /
# --keep-directory-symlink --no-overwrite-dir -xf` and does itself what the packages'
# maintainer scripts do that its scenario needs: under TCG `dpkg -i` spends tens of seconds in
# maintainer scripts (Perl helpers, daemon-reloads, conffile moves of old releases).
host_debs_tar() {
    local out="$1" tree; shift
    tree="$(mktemp -d "${LAB_WORK:?}/debs-tree.XXXXXX")"
    for d in "$@"; do dpkg-deb -x "$d" "$tree"; done
    (cd "$tree" && tar -cf "$out" --owner=root --group=root -- *)
    rm -rf "$tree"
}

# host_cache_once DIR FUNCTION [ARG...]: DIR, made once by `FUNCTION ARG... TMP` into a
# temporary folder beside it and moved in whole with a `complete` mark, then shared. The hooks
# of scenarios that run side by side wait for the one that makes it: a folder replaced while
# another hook reads it hands that hook two different files under one name.
host_cache_once() {
    local dir="$1"; shift
    [ -f "$dir/complete" ] && return 0
    (
        flock 7
        [ -f "$dir/complete" ] && exit 0
        t="$(mktemp -d "$dir.XXXXXX")"
        trap 'rm -rf "$t"' EXIT
        chmod 755 "$t"
        "$@" "$t"
        touch "$t/complete"
        rm -rf "$dir"
        mv "$t" "$dir"
        trap - EXIT
    ) 7>"$dir.lock"
}
