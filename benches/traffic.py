#!/usr/bin/env python3
"""Management traffic of an idle machine, change latency and dead-connection recovery
(issue 19), for BENCHMARKS.md. Side by side in one run, each agent in a network namespace
of its own joined to its app's namespace by a veth pair, counted at the IP level from the
veth's counters (bytes - 14 per frame: Ethernet header off; IPv6 off and static neighbours,
so the counters hold the management traffic and nothing else):

  longpoll  svc-agent and an app that holds polls (default hold, `Prefer: wait`)
  plain60   svc-agent and an app that answers at once, interval 60 s (today's default)
  mender30  the same request every 30 minutes (Mender's documented update-check interval)
  drop      svc-agent and a holding app; its held connection is silently dropped
            (the app's namespace drops every packet for 10 s by nftables, and the app
            forgets the connection: no answer, no FIN, no RST); timed until the next poll
            reaches the app

After DURATION seconds of idle, CHANGES config changes are made in the longpoll app (at
random 2-6 s gaps), each timed from the app's answer file being replaced to the new config
in the agent's /opt/svc/config.json. Over the same idle window it also reads each agent's own
CPU time (/proc/PID/stat, all threads) and, at the end, its PSS (/proc/PID/smaps_rollup).

The app is a small Python HTTPS server (OpenSSL, TLS 1.3 with session tickets: it logs
whether each connection resumed a session). Run as root:

  DURATION=3600 CHANGES=20 benches/traffic.py [AGENT_BINARY]   (default target/debug/svc-agent)

LONG_HOLD / DROP_HOLD (seconds) override the hold of the longpoll / drop agents (default:
the agent's own default), for shorter runs.

IDLE=1: the idle-traffic comparison of issue 47 instead, four machines side by side in one
run, counted over whole held cycles (from the start of one held poll to the start of the
CYCLES-th after it, default 2):

  real      the real svc-server (SERVER, default the svc-server beside AGENT_BINARY) with
            the example module (examples/modules/logenv), idle, default settings
  standin   svc-server replaced by `sleep` (what this bench measured before issue 47)
  warn      real, and svc-server's stderr carries one warning per WARN_EVERY seconds
            (default: one per held cycle), as a machine that logs a warning an hour
  mender30  a plain poll every 30 minutes; measured as the bytes of one 304 poll (polled
            every 60 s here) times 48 a day

The product's hold is 3000 s; a shorter LONG_HOLD (e.g. 300) keeps the run short and is
extrapolated honestly: per day = (bytes per cycle) x 86400 / (hold + the gap to the next
poll), with the cycle's keepalive probes taken out (the run sets SVC_AGENT_KEEPALIVE_SECS
above the hold, so there are none) and put back at the product's rate: one probe round trip
(2 x 52 B at the IP level: IPv4 20 + TCP 20 + timestamps 12) per 270 s of a held poll,
floor(3000 / 270) = 11 a cycle. With LONG_HOLD unset (3000) the figures need no scaling.
"""
import hashlib, http.server, json, os, random, shutil, signal, socketserver, ssl, statistics
import subprocess, sys, tempfile, threading, time

HERE = os.path.abspath(__file__)
# The agent's default hold (src/agent/mod.rs, DEFAULT_HOLD_SECS).
PRODUCT_HOLD = 3000
ETH = 14


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True).stdout


# ---------------------------------------------------------------- the app (server side)
def serve(folder, port, mode):
    answer_path = os.path.join(folder, "answer.json")
    forget_path = os.path.join(folder, "forget")
    log = open(os.path.join(folder, "requests.log"), "a", buffering=1)

    def current():
        with open(answer_path, "rb") as f:
            body = f.read()
        return body, '"%s"' % hashlib.sha256(body).hexdigest()[:16]

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(n)
            resumed = int(getattr(self.request, "session_reused", False))
            t0 = time.time()
            if self.path.endswith("/logs"):
                self.reply(200, {}, b"{}")
                log.write(f"{t0:.3f} logs - 200 {resumed}\n")
                return
            prefer = self.headers.get("Prefer") or ""
            wait = int(prefer[5:]) if prefer.startswith("wait=") and prefer[5:].isdigit() else None
            inm = self.headers.get("If-None-Match")
            body, tag = current()
            headers = {"ETag": tag}
            holds = mode == "hold" and wait is not None
            if holds:
                headers["Preference-Applied"] = "wait"
            log.write(f"{t0:.3f} poll {prefer or '-'} start {resumed} {n} {len(str(self.headers))}\n")
            if holds and wait > 0 and inm == tag:
                end = t0 + wait
                while time.time() < end:
                    if os.path.exists(forget_path):
                        os.unlink(forget_path)
                        log.write(f"{time.time():.3f} poll forgotten\n")
                        time.sleep(10**6)  # never answer, never close
                    body, tag = current()
                    if tag != inm:
                        break
                    time.sleep(0.01)
                headers["ETag"] = tag
            if inm == tag:
                self.reply(304, headers, b"")
                status = 304
            else:
                self.reply(200, headers, body)
                status = 200
            log.write(f"{time.time():.3f} poll {prefer or '-'} {status} {resumed}\n")

        def reply(self, status, headers, body):
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            if status != 304:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    httpd = S(("0.0.0.0", port), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem"))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    httpd.serve_forever()


# ---------------------------------------------------------------- the harness
class Pair:
    """Agent namespace <-> app namespace over one veth pair, subnet 10.77.N.0/24."""

    def __init__(self, n, name, mode, interval, work, agent, env):
        self.n, self.name, self.mode = n, name, mode
        # Named per run as well: two runs (two binaries) can go side by side.
        self.a, self.s = f"svcb{os.getpid()}-{n}a", f"svcb{os.getpid()}-{n}s"
        self.ip_a, self.ip_s = f"10.77.{n}.1", f"10.77.{n}.2"
        self.dir = os.path.join(work, name)
        self.root = os.path.join(self.dir, "root")
        self.app = os.path.join(self.dir, "app")
        for ns in (self.a, self.s):
            sh("ip", "netns", "del", ns, check=False)
            sh("ip", "netns", "add", ns)
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
               "net.ipv6.conf.default.disable_ipv6=1")
        mac_a, mac_s = f"02:77:00:00:{n:02x}:01", f"02:77:00:00:{n:02x}:02"
        sh("ip", "link", "add", "va", "netns", self.a, "address", mac_a, "type", "veth",
           "peer", "vs", "netns", self.s, "address", mac_s)
        for ns, dev, ip, peer_ip, peer_mac in ((self.a, "va", self.ip_a, self.ip_s, mac_s),
                                               (self.s, "vs", self.ip_s, self.ip_a, mac_a)):
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "neigh", "replace", peer_ip, "lladdr", peer_mac, "dev", dev,
               "nud", "permanent")
        os.makedirs(os.path.join(self.root, "etc"))
        os.makedirs(os.path.join(self.root, "opt/svc/bin"))
        os.makedirs(self.app)
        for f in ("cert.pem", "key.pem"):
            shutil.copy(os.path.join(work, f), self.app)
        self.set_answer({"poll_interval_secs": interval, "config": {"agent": {}}})
        srv = os.path.join(self.root, "opt/svc/bin/svc-server")
        with open(srv, "w") as f:
            f.write("#!/bin/sh\ntrap '' HUP\nexec sleep 1000000\n")
        os.chmod(srv, 0o755)
        cred = os.path.join(self.root, "etc/svc.json")
        with open(cred, "w") as f:
            json.dump({"cloud": {"app_address": f"https://{self.ip_s}:8443", "id": f"bench-{n}",
                                 "secret": "bench-secret-0123456789"}}, f)
        os.chmod(cred, 0o600)
        self.server = subprocess.Popen(["ip", "netns", "exec", self.s, sys.executable, HERE,
                                        "serve", self.app, "8443", mode])
        time.sleep(0.5)
        e = dict(os.environ, SSL_CERT_FILE=os.path.join(work, "ca.pem"), **env)
        self.agent = subprocess.Popen(["ip", "netns", "exec", self.a, agent, "run", "--root",
                                       self.root], env=e, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(self.dir, "agent.log"), "w"))

    def set_answer(self, v):
        tmp = os.path.join(self.app, "answer.tmp")
        with open(tmp, "w") as f:
            json.dump(v, f)
        os.rename(tmp, os.path.join(self.app, "answer.json"))

    def counters(self):
        """IP-level bytes (agent to app, app to agent) and frames, from the agent's veth."""
        st = json.loads(sh("ip", "-n", self.a, "-s", "-j", "link", "show", "dev", "va"))[0]
        s = st["stats64"]
        tx = s["tx"]["bytes"] - ETH * s["tx"]["packets"]
        rx = s["rx"]["bytes"] - ETH * s["rx"]["packets"]
        return tx, rx, s["tx"]["packets"] + s["rx"]["packets"]

    def cpu_secs(self):
        """The agent's own CPU time (user + system, all its threads), in seconds."""
        with open(f"/proc/{self.agent.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def pss_kib(self):
        with open(f"/proc/{self.agent.pid}/smaps_rollup") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("Pss:"))

    def requests(self):
        try:
            with open(os.path.join(self.app, "requests.log")) as f:
                return [l.split() for l in f]
        except FileNotFoundError:
            return []

    def blackhole(self, on):
        """The app's namespace drops every packet, both ways, without a word (nftables)."""
        nft = ["ip", "netns", "exec", self.s, "nft"]
        if on:
            sh(*nft, "add", "table", "inet", "svcdrop")
            for chain, hook in (("i", "input"), ("o", "output")):
                sh(*nft, "add", "chain", "inet", "svcdrop", chain,
                   f"{{ type filter hook {hook} priority -10; policy drop; }}")
        else:
            sh(*nft, "delete", "table", "inet", "svcdrop", check=False)

    def close(self):
        for p in (self.agent, self.server):
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=10)
            except Exception:
                p.kill()
        for ns in (self.a, self.s):
            sh("ip", "netns", "pids", ns, check=False)
            for pid in sh("ip", "netns", "pids", ns, check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            sh("ip", "netns", "del", ns, check=False)


def make_certs(work):
    def o(*a):
        sh("openssl", *a)
    o("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
      "-keyout", f"{work}/ca.key", "-out", f"{work}/ca.pem", "-days", "2", "-subj", "/CN=bench CA")
    o("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
      f"{work}/key.pem", "-out", f"{work}/leaf.csr", "-subj", "/CN=bench app")
    ext = f"{work}/ext.cnf"
    with open(ext, "w") as f:
        f.write("subjectAltName=" + ",".join(f"IP:10.77.{n}.2" for n in range(1, 5)) + "\n")
    o("x509", "-req", "-in", f"{work}/leaf.csr", "-CA", f"{work}/ca.pem", "-CAkey",
      f"{work}/ca.key", "-CAcreateserial", "-out", f"{work}/cert.pem", "-days", "2", "-extfile", ext)


def polls_started(p):
    return [r for r in p.requests() if len(r) >= 4 and r[1] == "poll" and r[3] == "start"]


def wait_until(what, secs, cond):
    end = time.time() + secs
    while time.time() < end:
        if cond():
            return
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def idle_main():
    agent = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/svc-agent")
    server = os.path.abspath(os.environ.get("SERVER", os.path.join(os.path.dirname(agent),
                                                                   "svc-server")))
    repo = os.path.dirname(os.path.dirname(HERE))
    module = os.path.join(repo, "examples/modules/logenv/bin/module")
    hold = int(os.environ.get("LONG_HOLD", str(PRODUCT_HOLD)))
    cycles = int(os.environ.get("CYCLES", "2"))
    warn_every = int(os.environ.get("WARN_EVERY", str(hold)))
    # No probe inside the run's window (it is put back at the product's rate below).
    env = {"SVC_AGENT_POLL_HOLD_SECS": str(hold), "SVC_AGENT_KEEPALIVE_SECS": str(hold * 4)}
    work = tempfile.mkdtemp(prefix="svc-traffic-")
    make_certs(work)
    answer = {"config": {"agent": {}, "components": [], "modules": [
        {"type": "local", "name": "example", "module_id": "lab:example",
         "executable_path": module}]}}
    pairs = []
    try:
        real = Pair(1, "real", "hold", 60, work, agent, env)
        standin = Pair(2, "standin", "hold", 60, work, agent, env)
        warn = Pair(3, "warn", "hold", 60, work, agent, env)
        mender = Pair(4, "mender30", "plain", 60, work, agent, {})
        pairs = [real, standin, warn, mender]
        for p, script in ((real, f"exec {server} \"$@\"\n"),
                          (warn, f"(while sleep {warn_every}; do echo '<4>[svc-server] "
                                 f"disk /data 91% full' >&2; done) &\nexec {server} \"$@\"\n")):
            path = os.path.join(p.root, "opt/svc/bin/svc-server")
            with open(path + ".tmp", "w") as f:
                f.write("#!/bin/sh\n" + script)
            os.chmod(path + ".tmp", 0o755)
            os.rename(path + ".tmp", path)
            p.set_answer(answer)
        # The agents started before the scripts were swapped in: restart svc-server by
        # restarting the agents (first contact again, then the module starts).
        for p in (real, warn):
            p.agent.send_signal(signal.SIGTERM)
            p.agent.wait(timeout=60)
            e = dict(os.environ, SSL_CERT_FILE=os.path.join(work, "ca.pem"), **env)
            p.agent = subprocess.Popen(["ip", "netns", "exec", p.a, agent, "run", "--root",
                                        p.root], env=e, stdout=subprocess.DEVNULL,
                                       stderr=open(os.path.join(p.dir, "agent.log"), "a"))
        held = lambda p: [r for r in polls_started(p) if r[2] == f"wait={hold}"]
        marks = {}
        for p in (real, standin, warn):
            # Start at the beginning of the second held poll (start-up is over by then).
            wait_until(f"{p.name}: a second held poll", hold * 3, lambda p=p: len(held(p)) >= 2)
            marks[p.name] = (len(held(p)), time.time(), p.counters())
        print(f"counting over {cycles} whole held cycles of {hold} s ...", flush=True)
        rows = []
        for p in (real, standin, warn):
            n0, t0, (tx0, rx0, f0) = marks[p.name]
            wait_until(f"{p.name}: {cycles} more held polls", hold * (cycles + 2),
                       lambda p=p, n0=n0: len(held(p)) >= n0 + cycles)
            tx, rx, f = p.counters()
            starts = held(p)
            secs = float(starts[n0 - 1 + cycles][0]) - float(starts[n0 - 1][0])
            logs = [r for r in p.requests() if len(r) >= 3 and r[1] == "logs"
                    and float(r[0]) >= float(starts[n0 - 1][0])]
            per_cycle = (tx - tx0 + rx - rx0) / cycles
            rows.append((p.name, secs / cycles, per_cycle, (f - f0) / cycles, len(logs)))
        # mender30: the bytes of one plain 304 poll, from two consecutive polls.
        wait_until("mender30: two 304 polls", 300, lambda: len(
            [r for r in mender.requests() if len(r) >= 4 and r[3] == "304"]) >= 1)
        n = len(polls_started(mender))
        c0 = mender.counters()
        wait_until("mender30: one more poll", 300, lambda: len(
            [r for r in mender.requests() if len(r) >= 4 and r[3] == "304"]) >= 2
            and len(polls_started(mender)) > n)
        time.sleep(2)
        c1 = mender.counters()
        mender_poll = c1[0] - c0[0] + c1[1] - c0[1]
        probe = 104
        probes = PRODUCT_HOLD // 270
        day_cycles = 86400 / (PRODUCT_HOLD + 1)
        print(f"\nidle, IP level, per held cycle measured ({cycles} cycles, hold {hold} s), "
              f"then per day at the product's hold ({PRODUCT_HOLD} s, keepalive probes added):")
        print("| machine | cycle | bytes per cycle | frames | log batches | per day |\n"
              "|---|---|---|---|---|---|")
        per = {}
        for name, cyc, b, fr, nlogs in rows:
            day = (b + probes * probe) * day_cycles
            per[name] = day
            print(f"| {name} | {cyc:.0f} s | {b:.0f} B | {fr:.1f} | {nlogs} | "
                  f"{day / 1024:.1f} KiB ({day / 1000:.0f} kB) |")
        print(f"| mender30 | 1800 s | {mender_poll} B per poll | | | "
              f"{mender_poll * 48 / 1024:.1f} KiB ({mender_poll * 48 / 1000:.0f} kB) |")
        one_warning = next(b for n_, _, b, _, _ in rows if n_ == "warn") - \
            next(b for n_, _, b, _, _ in rows if n_ == "real")
        print(f"\none warning (its batch, riding a poll cycle): {one_warning:.0f} B; "
              f"a machine that logs one an hour: "
              f"{(per['real'] + 24 * one_warning) / 1024:.1f} KiB a day")
        print(f"keepalive: {probes} probe round trips of {probe} B per cycle, "
              f"{probes * probe * day_cycles / 1024:.1f} KiB a day (in the figures above)")
    finally:
        for p in pairs:
            p.close()
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)


def main():
    if os.environ.get("IDLE") == "1":
        return idle_main()
    agent = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/svc-agent")
    duration = float(os.environ.get("DURATION", "3600"))
    changes = int(os.environ.get("CHANGES", "20"))
    if not shutil.which("nft"):
        repo = os.path.dirname(os.path.dirname(HERE))
        subprocess.run(["sh", "-c", ". scripts/lib/apt.sh && apt_need nft nftables && "
                        "apt_install_needed"], cwd=repo, check=True)
    work = tempfile.mkdtemp(prefix="svc-traffic-")
    make_certs(work)
    pairs = []
    try:
        hold = lambda v: {"SVC_AGENT_POLL_HOLD_SECS": os.environ[v]} if v in os.environ else {}
        long = Pair(1, "longpoll", "hold", 60, work, agent, hold("LONG_HOLD"))
        plain = Pair(2, "plain60", "plain", 60, work, agent, {})
        mender = Pair(3, "mender30", "plain", 1800, work, agent, {})
        drop = Pair(4, "drop", "hold", 60, work, agent, hold("DROP_HOLD"))
        pairs = [long, plain, mender, drop]
        # Warm-up: first contact done (and the start-up log lines shipped).
        for p in pairs:
            wait_until(f"{p.name}: first contact", 120, lambda p=p: any(
                len(r) >= 4 and r[1] == "poll" and r[3] == "200" for r in p.requests()))
        time.sleep(10)
        start = {p.name: (time.time(), p.counters()) for p in pairs}
        cpu0 = {p.name: p.cpu_secs() for p in pairs}
        # The drop: once a held poll is under way, lose every packet for 10 s and have the
        # app forget the connection.
        wait_until("drop: a held poll", 120, lambda: any(
            r[2].startswith("wait=") and r[2] != "wait=0" for r in polls_started(drop)))
        time.sleep(5)
        held_sent = float([r for r in polls_started(drop) if r[2] != "wait=0"][-1][0])
        n_before = len(polls_started(drop))
        t_drop = time.time()
        open(os.path.join(drop.app, "forget"), "w").close()
        drop.blackhole(True)
        time.sleep(10)
        drop.blackhole(False)
        drop_result = None
        end = time.time() + duration
        while time.time() < end:
            if drop_result is None and len(polls_started(drop)) > n_before:
                t_new = float(polls_started(drop)[n_before][0])
                drop_result = (t_new - held_sent, t_new - t_drop)
                print(f"drop: new poll {drop_result[0]:.1f} s after the held one was sent, "
                      f"{drop_result[1]:.1f} s after the drop", flush=True)
            time.sleep(1)
        print("\nidle CPU (the agent's own, all threads) and PSS at the end of the window:")
        print("| agent / app | CPU | of one core | PSS |\n|---|---|---|---|")
        for p in (long, plain, mender):
            secs = time.time() - start[p.name][0]
            cpu = p.cpu_secs() - cpu0[p.name]
            print(f"| {p.name} | {cpu:.2f} s over {secs:.0f} s | {100 * cpu / secs:.4f} % | "
                  f"{p.pss_kib()} KiB |")
        rows = []
        for p in (long, plain, mender):
            t0, (tx0, rx0, f0) = start[p.name]
            tx, rx, f = p.counters()
            secs = time.time() - t0
            reqs = [r for r in p.requests() if len(r) >= 5 and r[3] in ("200", "304")]
            conns = len([r for r in p.requests() if len(r) >= 5 and r[3] not in ("start",)])
            resumed = sum(1 for r in reqs if r[4] == "1")
            per_day = (tx - tx0 + rx - rx0) * 86400 / secs
            rows.append((p.name, secs, tx - tx0, rx - rx0, f - f0, per_day, len(reqs), resumed))
        print(f"\nidle, IP level, over the window (s), extrapolated to a day:")
        print("| agent / app | window | agent to app | app to agent | frames | per day | "
              "answers (resumed TLS) |\n|---|---|---|---|---|---|---|")
        for name, secs, tx, rx, fr, day, n, res in rows:
            print(f"| {name} | {secs:.0f} s | {tx} B | {rx} B | {fr} | {day / 1024:.1f} KiB | "
                  f"{n} ({res}) |")
        # Change latency at the same settings, on the long-poll machine.
        lat = []
        cfg = os.path.join(long.root, "opt/svc/config.json")
        for i in range(changes):
            time.sleep(random.uniform(2, 6))
            mark = f"change-{i}-{random.randrange(10**9)}"
            t0 = time.time()
            long.set_answer({"poll_interval_secs": 60, "config": {"agent": {}, "modules": [
                {"type": "local", "name": "tool", "module_id": "lab:tool",
                 "executable_path": "/bin/true", "env": {"MARK": mark}}]}})

            def seen():
                try:
                    with open(cfg) as f:
                        return mark in f.read()
                except FileNotFoundError:
                    return False
            wait_until(f"change {i}", 600, seen)
            lat.append(time.time() - t0)
        lat.sort()
        p95 = lat[min(len(lat) - 1, int(round(0.95 * len(lat) + 0.5)) - 1)]
        print(f"\nchanges: {len(lat)}, median {statistics.median(lat) * 1000:.0f} ms, "
              f"p95 {p95 * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms")
        print(f"drop: {drop_result}")
        # Per-connection cost of the long poll: the held polls seen and the bytes since.
        print("\nlongpoll app log (first 12 lines):")
        for r in long.requests()[:12]:
            print("  ", " ".join(r))
    finally:
        for p in pairs:
            p.close()
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main()
