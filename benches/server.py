#!/usr/bin/env python3
"""svc-server figures for BENCHMARKS.md (release build, the example module):

1. config change to a new module running: the config file is rewritten (rename) and
   svc-server gets SIGHUP; timed until the new module's process exists (its pid file in
   SVC_MODULE_DATA names a live process). Also svc-server's own share: from its
   "SIGHUP" log line to its "<module> started pid=" line (both ms timestamps).
2. svc-server's own idle memory (PSS, /proc/PID/smaps_rollup) with 0 and with 10 modules
   running, the modules themselves excluded (they are other processes).

usage: benches/server.py [path/to/svc-server]   (default target/release/svc-server)
"""
import json, os, shutil, signal, statistics, subprocess, sys, tempfile, time

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/svc-server")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = os.path.join(ROOT, "examples/modules/logenv/bin/module")
RUNS = int(os.environ.get("RUNS", "20"))
IDLE_SECS = float(os.environ.get("IDLE_SECS", "60"))


def pss_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return None


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def threads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Server:
    def __init__(self, tmp):
        self.tmp = tmp
        self.home = os.path.join(tmp, "home")
        self.cfg = os.path.join(tmp, "config.json")
        self.log = os.path.join(tmp, "server.log")
        os.makedirs(os.path.join(tmp, "mods"), exist_ok=True)

    def module(self, name):
        d = os.path.join(self.tmp, "mods", name)
        os.makedirs(d, exist_ok=True)
        exe = os.path.join(d, "module")
        if not os.path.exists(exe):
            shutil.copy(MODULE, exe)
            os.chmod(exe, 0o755)
        return {"type": "local", "name": name, "module_id": f"bench:{name}",
                "version": "latest", "executable_path": exe}

    def write(self, names):
        tmp = self.cfg + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"modules": [self.module(n) for n in names]}, f)
        os.rename(tmp, self.cfg)

    def pidfile(self, name):
        return os.path.join(self.home, "module-data/bench", name, "pid")

    def running(self, name):
        try:
            with open(self.pidfile(name)) as f:
                return alive(int(f.read().strip()))
        except (OSError, ValueError):
            return False

    def start(self, names):
        self.write(names)
        env = {"PATH": "/usr/bin:/bin", "HOME": self.tmp, "SVC_HOME": self.home}
        self.proc = subprocess.Popen(
            [BIN, "--config", self.cfg, "--machine-id", "bench", "--stop-timeout", "5"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.log, "w"))
        wait(lambda: all(self.running(n) for n in names), "modules up")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


def wait(cond, what, timeout=60.0, step=0.001):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"timed out: {what}")
        time.sleep(step)


def ts_ms(line):
    # 2026-11-22T13:37:00.731Z
    t = line.split()[0]
    h, m, s = t[11:23].split(":")
    return (int(h) * 3600 + int(m) * 60 + float(s)) * 1000


def change_latency():
    tmp = tempfile.mkdtemp(prefix="svc-bench-server-")
    s = Server(tmp)
    s.start(["base"])
    e2e, internal = [], []
    for i in range(RUNS):
        name = f"new{i}"
        before = open(s.log).read()
        t0 = time.monotonic()
        s.write(["base", name])
        s.proc.send_signal(signal.SIGHUP)
        wait(lambda: s.running(name), name)
        e2e.append((time.monotonic() - t0) * 1000)
        wait(lambda: f"[{name}] {name} started pid=" in open(s.log).read(), "log line")
        new = open(s.log).read()[len(before):].splitlines()
        # The watcher may notice the rewrite just before the SIGHUP arrives: whichever
        # came first started the change.
        hup = next(l for l in new if "SIGHUP: re-reading" in l or "config file changed" in l)
        started = next(l for l in new if f"[{name}] {name} started pid=" in l)
        internal.append(ts_ms(started) - ts_ms(hup))
        # Back to the base config, so that each run adds exactly one module.
        s.write(["base"])
        s.proc.send_signal(signal.SIGHUP)
        # Wait for svc-server to have finished the stop (the whole process group gone).
        wait(lambda: f"[{name}] {name} stopped pid=" in open(s.log).read(), "removed")
    s.stop()
    shutil.rmtree(tmp)
    return e2e, internal


def floor_latency():
    """The same module started directly (no svc-server): fork, exec, its own start work."""
    tmp = tempfile.mkdtemp(prefix="svc-bench-server-")
    out = []
    for i in range(RUNS):
        data = os.path.join(tmp, f"d{i}")
        os.makedirs(data)
        env = {"PATH": "/usr/bin:/bin", "SVC_MODULE_DATA": data + "/", "SVC_MODULE_ID": "bench:x"}
        t0 = time.monotonic()
        p = subprocess.Popen([MODULE], env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        pidfile = os.path.join(data, "pid")
        wait(lambda: os.path.exists(pidfile), "floor module")
        out.append((time.monotonic() - t0) * 1000)
        os.killpg(p.pid, signal.SIGTERM)
        p.wait()
    shutil.rmtree(tmp)
    return out


def idle_memory(n):
    tmp = tempfile.mkdtemp(prefix="svc-bench-server-")
    s = Server(tmp)
    s.start([f"m{i}" for i in range(n)])
    time.sleep(5)  # settle: the modules have printed their start lines
    pid = s.proc.pid
    t0, c0 = time.monotonic(), cpu_ticks(pid)
    time.sleep(IDLE_SECS)
    cpu = (cpu_ticks(pid) - c0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0) * 100
    out = (pss_kib(pid), rss_kib(pid), threads(pid), cpu)
    s.stop()
    shutil.rmtree(tmp)
    return out


def main():
    e2e, internal = change_latency()
    floor = floor_latency()
    q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(p * len(xs)))]
    print(f"config change (rewrite + SIGHUP) to new module running, {RUNS} runs:")
    print("| measure | median | p90 | min | max |")
    print("|---|---|---|---|---|")
    for label, xs in [("end to end (module process up, seen by its pid file)", e2e),
                      ("svc-server's share (SIGHUP or file-change log line to `started pid=`)", internal),
                      ("floor: the module started directly by the bench", floor)]:
        print(f"| {label} | {statistics.median(xs):.1f} ms | {q(xs, 0.9):.1f} ms | "
              f"{min(xs):.1f} ms | {max(xs):.1f} ms |")
    print()
    print("svc-server's own idle memory (modules excluded):")
    print(f"| modules running | PSS | RSS | threads | CPU over {IDLE_SECS:.0f} s idle (% of a core) |")
    print("|---|---|---|---|---|")
    for n in (0, 10):
        pss, rss, th, cpu = idle_memory(n)
        print(f"| {n} | {pss} KiB | {rss} KiB | {th} | {cpu:.3f} % |")


if __name__ == "__main__":
    main()
