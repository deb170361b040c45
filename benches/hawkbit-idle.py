#!/usr/bin/env python3
"""Idle cost of the hawkBit backend, against gooseBit itself and against a stand-in DDI server,
next to the default backend, all in one run (issue 26), for BENCHMARKS.md and docs/hawkbit.md.

Each arm runs in a network namespace of its own (`unshare -n`: needs root), where the only
traffic is between one agent and its server on 127.0.0.1. So the loopback counters of the
namespace (/proc/net/dev) are the bytes the device spends, counted at the IP level: IP and TCP
headers, handshakes, FINs and ACKs, HTTP. (Loopback counts each packet once as sent and once
as received; the figure is the sent count. Plain HTTP: TLS would add its handshake per
connection.) The arms:

- `goosebit`: gooseBit (GOOSEBIT_VENV, PyPI 0.2.12, as tests/it/hawkbit_goosebit.rs runs it)
  at its default poll time (`00:01:00`; GOOSEBIT_POLL_TIME is not set), the agent on the
  hawkBit backend, registered by its first polls;
- `standin`: a small DDI base resource in this script (ETag and 304, as hawkBit answers),
  asking for the same sleep as gooseBit's default, the agent on the hawkBit backend;
- `default`: a management app in this script that answers at once (ETag and 304, no held
  polls) at a 60 s interval, the agent on its default backend.

The window is exact: it opens just after a poll (WARMUP polls after the start, so the
registration is behind it) and closes just after POLLS more, so it holds exactly POLLS polls.
Per day = bytes of the window / POLLS x polls a day at the sleep. The stand-ins also count
the HTTP layer (request line, headers and body each way). Each agent's PSS is read at the end.

usage: sudo benches/hawkbit-idle.py [AGENT_BINARY]   (default target/release/svc-agent)
       POLLS=30 WARMUP=3 SLEEP_SECS=60 GOOSEBIT_VENV=~/.cache/svc-agent-tests/goosebit/venv
"""
import hashlib, http.server, json, os, shutil, signal, socket, socketserver, subprocess, sys
import tempfile, threading, time

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "target/release/svc-agent")
POLLS = int(os.environ.get("POLLS", "30"))
WARMUP = int(os.environ.get("WARMUP", "3"))
SLEEP = int(os.environ.get("SLEEP_SECS", "60"))
VENV = os.path.expanduser(os.environ.get("GOOSEBIT_VENV", "~/.cache/svc-agent-tests/goosebit/venv"))
TOKEN = "bench-token-0123456789"
PORT = 8060
HTTP = []  # (status, HTTP bytes in + out) per poll of a stand-in
LOCK = threading.Lock()


def lo_sent():
    """(bytes, packets) sent on this namespace's loopback: IP-level, each packet once."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                v = rest.split()
                return int(v[8]), int(v[9])
    raise SystemExit("no loopback in /proc/net/dev")


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

    def answer(self, body, etag):
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
            HTTP.append((status, sent_in + self.wfile.n - before))

    def not_found(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        if self.path.startswith("/DEFAULT/controller/v1/bench") and self.headers.get(
            "Authorization"
        ) == f"TargetToken {TOKEN}":
            h = SLEEP // 3600, SLEEP % 3600 // 60, SLEEP % 60
            body = json.dumps({"config": {"polling": {"sleep": "%02d:%02d:%02d" % h}}, "_links": {}}).encode()
            self.answer(body, '"%s"' % hashlib.sha256(body).hexdigest()[:16])
        else:
            self.not_found()

    def do_POST(self):
        if self.path == "/api/v1/agent/poll":
            body = json.dumps({"poll_interval_secs": SLEEP, "config": {"agent": {}}}).encode()
            self.answer(body, '"%s"' % hashlib.sha256(body).hexdigest()[:16])
        else:
            self.not_found()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def pss_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])


def machine(work, hawkbit):
    root = os.path.join(work, "machine")
    os.makedirs(os.path.join(root, "etc"))
    os.makedirs(os.path.join(root, "opt/svc/bin"))
    srv = os.path.join(root, "opt/svc/bin/svc-server")
    with open(srv, "w") as f:
        f.write("#!/bin/sh\nexec sleep 100000\n")
    os.chmod(srv, 0o755)
    if hawkbit:
        with open(os.path.join(root, "opt/svc/config.json"), "w") as f:
            json.dump({"agent": {"svc-agent": {"hawkbit": {"server_url": f"http://127.0.0.1:{PORT}",
                      "tenant": "DEFAULT", "controller_id": "bench", "auth": "target-token"}}}}, f)
        tok = os.path.join(root, "etc/svc-hawkbit.token")
        with open(tok, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(tok, 0o600)
    else:
        creds = os.path.join(root, "etc/svc.json")
        with open(creds, "w") as f:
            json.dump({"cloud": {"app_address": f"http://127.0.0.1:{PORT}", "id": "bench", "secret": "bench-secret"}}, f)
        os.chmod(creds, 0o600)
    return root


def start_goosebit(work):
    """gooseBit as the tests run it (aerich upgrade first, 127.0.0.1 only, data in `work`), at
    its default poll time. Returns (process, a function counting the device's polls)."""
    py = os.path.join(VENV, "bin/python")
    pkg = subprocess.check_output([py, "-c", "import goosebit, os; print(os.path.dirname(goosebit.__file__))"], text=True, stderr=subprocess.DEVNULL).strip()
    gb = os.path.join(work, "goosebit")
    os.makedirs(gb)
    with open(os.path.join(gb, "pyproject.toml"), "w") as f:
        f.write(f'[tool.aerich]\ntortoise_orm = "goosebit.db.config.TORTOISE_CONF"\nlocation = "{pkg}/db/migrations"\nsrc_folder = "./."\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOOSEBIT_")}
    env.update(GOOSEBIT_DB_URI=f"sqlite://{gb}/db.sqlite3", GOOSEBIT_ARTIFACTS_DIR=os.path.join(gb, "artifacts"))
    subprocess.run([os.path.join(VENV, "bin/aerich"), "upgrade"], cwd=gb, env=env, check=True, capture_output=True)
    log = open(os.path.join(gb, "goosebit.log"), "w")
    proc = subprocess.Popen([py, "-m", "uvicorn", "goosebit:app", "--host", "127.0.0.1", "--port", str(PORT)],
                            cwd=gb, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.time() + 600
    while True:
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=5).close()
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"gooseBit did not start: {open(log.name).read()[-2000:]}")
            time.sleep(0.5)
    # gooseBit logs no requests; every poll is a connection of its own (the agent's HTTP
    # client keeps none open, and each stand-in arm shows one connection per poll), so its
    # polls are the connections it accepted after the agent started.
    start = passive_opens()
    return proc, lambda: passive_opens() - start


def passive_opens():
    """TCP connections accepted in this namespace (/proc/net/snmp, Tcp: PassiveOpens)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return int(rows[1][rows[0].index("PassiveOpens")])


def wait_polls(polls, n, limit):
    deadline = time.time() + limit
    while polls() < n:
        if time.time() > deadline:
            raise SystemExit(f"only {polls()} polls of {n} after {limit} s")
        time.sleep(0.5)
    time.sleep(3)  # the poll's connection closed and its last packets counted


def arm(name):
    """One arm, inside its own network namespace: prints its figures as JSON."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    work = tempfile.mkdtemp(prefix=f"svc-hb-idle-{name}-")
    procs = []
    try:
        if name == "goosebit":
            gb, polls = start_goosebit(work)
            procs.append(gb)
        else:
            httpd = Server(("127.0.0.1", PORT), Handler)
            threading.Thread(target=httpd.serve_forever, daemon=True).start()

            def polls():
                with LOCK:
                    return len(HTTP)
        root = machine(work, name != "default")
        log = open(os.path.join(work, "agent.log"), "w")
        agent = subprocess.Popen([BIN, "run", "--root", root], env=dict(os.environ, SVC_AGENT_FIRST_CONTACT_SECS="5"),
                                 stdout=log, stderr=log)
        procs.append(agent)
        limit = 4 * SLEEP + 600
        # gooseBit: the registration's `PUT configData` is one more connection.
        wait_polls(polls, WARMUP + (name == "goosebit"), limit)
        b0, p0 = lo_sent()
        n0, t0, c0 = polls(), time.time(), passive_opens()
        wait_polls(polls, n0 + POLLS, POLLS * limit)
        b1, p1 = lo_sent()
        n1, t1, c1 = polls(), time.time(), passive_opens()
        with LOCK:
            http = [b for s, b in HTTP[n0:n1]]
            statuses = sorted({s for s, b in HTTP[n0:n1]})
        out = {"arm": name, "polls": n1 - n0, "secs": round(t1 - t0), "ip_bytes": b1 - b0,
               "packets": p1 - p0, "connections": c1 - c0, "pss_kib": pss_kib(agent.pid),
               "http_bytes": sum(http) if http else None, "statuses": statuses}
        print(json.dumps(out), flush=True)
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) > 2 and sys.argv[-2] == "--arm":
        return arm(sys.argv[-1])
    if os.geteuid() != 0:
        raise SystemExit("needs root (a network namespace per arm: unshare -n)")
    if not os.path.exists(os.path.join(VENV, "bin/python")):
        raise SystemExit(f"no gooseBit venv at {VENV}: bash scripts/lib/goosebit.sh install DIR")
    me = os.path.abspath(__file__)
    runs = {n: subprocess.Popen(["unshare", "-n", sys.executable, me, BIN, "--arm", n],
                                stdout=subprocess.PIPE, text=True)
            for n in ("goosebit", "standin", "default")}
    res = {}
    for n, p in runs.items():
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"arm {n} failed ({p.returncode})")
        res[n] = json.loads(out.strip().splitlines()[-1])
    print(f"agent {BIN}; {POLLS} polls per arm after {WARMUP}; sleep {SLEEP} s; IP-level bytes sent on each namespace's loopback")
    for n in ("goosebit", "standin", "default"):
        r = res[n]
        per = r["ip_bytes"] / r["polls"]
        http = f", HTTP {r['http_bytes'] / r['polls']:.0f} B/poll (answers {r['statuses']})" if r["http_bytes"] else ""
        print(f"{n:8} {r['polls']} polls in {r['secs']} s: {r['ip_bytes']} B in {r['packets']} packets, "
              f"{per:.0f} B/poll ({r['packets'] / r['polls']:.1f} packets, {r['connections'] / r['polls']:.1f} connections){http}; per day at 60 s: "
              f"{per * 1440 / 1024:.1f} KiB, at 300 s: {per * 288 / 1024:.1f} KiB; PSS {r['pss_kib']} KiB")


if __name__ == "__main__":
    main()
