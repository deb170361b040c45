#!/usr/bin/env python3
"""Idle cost of the hawkBit backend next to the default backend, in one run (issue 26), for
BENCHMARKS.md:

1. bytes per idle poll, counted at the HTTP layer (request line, headers and body each way,
   as sent on the wire; plain HTTP on loopback, so no TLS or TCP/IP overhead), and from them
   bytes per day at each backend's default interval: hawkBit's usual `sleep` of 5 minutes
   (`00:05:00`) and the default backend's plain poll every 60 s;
2. each agent's PSS (/proc/PID/smaps_rollup) after the same idle time.

One small Python server plays both ends: a DDI base resource (`GET /DEFAULT/controller/v1/
bench`, ETag and 304 as hawkBit) and a management app that answers at once (`POST
/api/v1/agent/poll`, ETag and 304; it does not hold polls). Both agents poll every
POLL_SECS (default 5) during the run, so the per-poll figures come from many polls; the
per-day figure is per-poll bytes x polls a day at the default interval.

usage: benches/hawkbit-idle.py [AGENT_BINARY]   (default target/release/svc-agent)
       IDLE_SECS=120 POLL_SECS=5
"""
import hashlib, http.server, json, os, shutil, signal, socketserver, subprocess, sys, tempfile
import threading, time

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/svc-agent")
IDLE = float(os.environ.get("IDLE_SECS", "120"))
POLL = int(os.environ.get("POLL_SECS", "5"))
TOKEN = "bench-token-0123456789"
COUNTS = {"hawkbit": [], "default": []}  # (status, bytes in + out) per request
LOCK = threading.Lock()


class Counting:
    def __init__(self, f):
        self.f, self.n = f, 0

    def write(self, b):
        self.n += len(b)
        return self.f.write(b)

    def flush(self):
        return self.f.flush()

    def __getattr__(self, k):
        return getattr(self.f, k)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.wfile = Counting(self.wfile)

    def log_message(self, *a):
        pass

    def answer(self, who, body, etag):
        n = int(self.headers.get("Content-Length") or 0)
        req_body = self.rfile.read(n) if n else b""
        sent_in = len(self.requestline) + 2 + len(bytes(self.headers)) + len(req_body)
        before = self.wfile.n
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            status = 304
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            status = 200
        self.wfile.flush()
        with LOCK:
            COUNTS[who].append((status, sent_in + self.wfile.n - before))

    def do_GET(self):
        if self.path.startswith("/DEFAULT/controller/v1/bench") and self.headers.get(
            "Authorization"
        ) == f"TargetToken {TOKEN}":
            h = POLL // 3600, POLL % 3600 // 60, POLL % 60
            body = json.dumps({"config": {"polling": {"sleep": "%02d:%02d:%02d" % h}}, "_links": {}}).encode()
            self.answer("hawkbit", body, '"%s"' % hashlib.sha256(body).hexdigest()[:16])
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def do_POST(self):
        if self.path == "/api/v1/agent/poll":
            body = json.dumps({"poll_interval_secs": POLL, "config": {"agent": {}}}).encode()
            self.answer("default", body, '"%s"' % hashlib.sha256(body).hexdigest()[:16])
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def pss_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])


def machine(work, name):
    root = os.path.join(work, name)
    os.makedirs(os.path.join(root, "etc"))
    os.makedirs(os.path.join(root, "opt/svc/bin"))
    srv = os.path.join(root, "opt/svc/bin/svc-server")
    with open(srv, "w") as f:
        f.write("#!/bin/sh\nexec sleep 100000\n")
    os.chmod(srv, 0o755)
    return root


def main():
    httpd = Server(("127.0.0.1", 0), Handler)
    port = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="svc-hb-idle-")
    procs = {}
    try:
        d = machine(work, "default")
        with open(os.path.join(d, "etc/svc.json"), "w") as f:
            json.dump({"cloud": {"app_address": f"http://127.0.0.1:{port}", "id": "bench", "secret": "bench-secret"}}, f)
        os.chmod(os.path.join(d, "etc/svc.json"), 0o600)
        h = machine(work, "hawkbit")
        with open(os.path.join(h, "opt/svc/config.json"), "w") as f:
            json.dump({"agent": {"svc-agent": {"hawkbit": {"server_url": f"http://127.0.0.1:{port}",
                      "tenant": "DEFAULT", "controller_id": "bench", "auth": "target-token"}}}}, f)
        tok = os.path.join(h, "etc/svc-hawkbit.token")
        with open(tok, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(tok, 0o600)
        env = dict(os.environ, SVC_AGENT_FIRST_CONTACT_SECS="5")
        for name, root in (("default", d), ("hawkbit", h)):
            log = open(os.path.join(work, name + ".log"), "w")
            procs[name] = subprocess.Popen([BIN, "run", "--root", root], env=env, stdout=log, stderr=log)
        time.sleep(IDLE)
        pss = {n: pss_kib(p.pid) for n, p in procs.items()}
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for p in procs.values():
            p.wait(timeout=60)
        httpd.shutdown()
    print(f"agent {BIN}, idle {IDLE:.0f} s, polls every {POLL} s during the run")
    defaults = {"hawkbit": 300, "default": 60}
    for n in ("hawkbit", "default"):
        c = COUNTS[n]
        idle = [b for s, b in c if s == 304]
        per = sum(idle) / len(idle) if idle else float("nan")
        day = per * 86400 / defaults[n]
        print(f"{n:8} polls {len(c):3} (304: {len(idle):3}), first {c[0][1] if c else 0} B, "
              f"idle poll {per:.0f} B, per day at {defaults[n]} s: {day / 1024:.1f} KiB, "
              f"PSS {pss[n]} KiB ({pss[n] / 1024:.2f} MiB)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
