#!/usr/bin/env python3
"""Machine-level power-cut campaign: one qemu guest (the lab image), reset at random moments.

    LAB_CACHE=/work/lab-cache benches/powercut-lab.py --cuts 100 --seed 1 \
        --v1 DIR --v2 DIR [--smp 2] [--quit-every 5] [--deadline EPOCH]

DIR holds static `svc-agent` and `svc-server` (v1: the build under test, 0.1.x; v2: the same
source stamped 0.2.0, `SVC_BUILD_VERSION=0.2.0 scripts/build-static.sh x86_64 --profile dist`).

The guest half (benches/powercut-lab-guest.sh) runs on every boot: it checks that the machine
converged after the last cut, prints a `@@CUT-RESULT@@` line, starts the next update (svc-server
and svc-agent in turn) and prints its phases. The host waits for `@@CUT-GO@@`, draws a delay
uniformly from [0, 1.25 x the longest update seen so far of that kind] (30 s before the first
one completes) and then cuts the power: `system_reset` through the monitor socket, or every
`--quit-every`th cut `quit` (qemu gone, started again on the same disks). Unlike
tests/system/run.sh, the machine is never booted from scratch between cuts: one overlay
carries the whole campaign, as one device would.

Prints one line per cut and a summary (cuts by kind and by the phase the cut landed in, time
per cut, failures); writes `campaign.json` in the run folder. Exit status 0 only when every
cut converged.
"""
import argparse
import collections
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


class Guest:
    def __init__(self, work, image, smp):
        self.work, self.image, self.smp = work, image, smp
        self.mon = os.path.join(work, "monitor.sock")
        self.proc = None
        # A resumed run keeps the consoles of the earlier drivers.
        self.starts = len([f for f in os.listdir(work) if f.startswith("console-")])

    def start(self):
        # A console file per qemu process (qemu truncates the file it is given).
        self.starts += 1
        self.console = os.path.join(self.work, f"console-{self.starts}.log")
        open(self.console, "wb").close()
        self.pos = 0
        self.buf = b""
        if os.path.exists(self.mon):
            os.unlink(self.mon)
        log = open(os.path.join(self.work, "qemu.log"), "ab")
        self.proc = subprocess.Popen([
            "qemu-system-x86_64", "-accel", "tcg", "-smp", str(self.smp), "-m", "1024",
            "-nodefaults", "-no-user-config", "-display", "none",
            "-monitor", f"unix:{self.mon},server,nowait",
            "-kernel", f"{self.image}/vmlinuz", "-initrd", f"{self.image}/initrd.img",
            "-append", "console=ttyS0 root=/dev/vda rw quiet systemd.show_status=0 panic=-1 svc.lab.phase=main",
            "-drive", f"file={self.work}/root.qcow2,format=qcow2,if=virtio",
            "-drive", f"file={self.work}/lab.img,format=raw,if=virtio",
            "-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0",
            "-device", "virtio-rng-pci",
            "-serial", f"file:{self.console}"], stdout=log, stderr=log)
        for _ in range(100):
            if os.path.exists(self.mon):
                return
            time.sleep(0.1)

    def monitor(self, cmd):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.mon)
        s.sendall(cmd.encode() + b"\n")
        time.sleep(0.2)
        s.close()

    def reset(self):
        self.monitor("system_reset")

    def quit(self):
        try:
            self.monitor("quit")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def lines(self):
        """New complete console lines since the last call."""
        with open(self.console, "rb") as f:
            f.seek(self.pos)
            data = f.read()
        self.pos += len(data)
        self.buf += data
        *done, self.buf = self.buf.split(b"\n")
        return [l.decode(errors="replace").strip("\r") for l in done]


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def prepare(work, a, image, idx):
    """A guest's own disks: the lab disk (binaries, the guest half) and an overlay on the image."""
    stage = f"{work}/stage"
    for d in ("bin", "share/v2", "out"):
        os.makedirs(f"{stage}/{d}")
    for b in ("svc-agent", "svc-server"):
        sh("cp", f"{a.v1}/{b}", f"{stage}/bin/{b}")
        sh("cp", f"{a.v2}/{b}", f"{stage}/share/v2/{b}")
    sh("cp", f"{HERE}/powercut-lab-guest.sh", f"{stage}/guest-run.sh")
    with open(f"{stage}/run-id", "w") as f:
        f.write(os.urandom(8).hex())
    sh("mke2fs", "-q", "-t", "ext4", "-d", stage, "-L", "lab", f"{work}/lab.img", "256M")
    sh("qemu-img", "create", "-q", "-f", "qcow2", "-b", f"{image}/base.img", "-F", "raw", f"{work}/root.qcow2")


class Machine:
    """One guest, its own overlay for the whole campaign, and the cut in flight on it."""

    def __init__(self, run, idx, image, a, seed):
        self.run, self.idx, self.a = run, idx, a
        self.work = f"{run.folder}/guest-{idx}"
        self.g = Guest(self.work, image, a.smp)
        self.rng = random.Random(seed)
        self.window = {"server": 30.0, "agent": 30.0}
        self.longest = {}
        self.pending = None
        self.cut_at = None
        self.t_cut = None
        self.t_boot = None
        self.boot = {}
        self.n_cuts = 0
        self.stopped = False
        self.last_progress = time.time()
        saved = f"{self.work}/state.json"
        if os.path.exists(saved):  # a resumed run: the cut the last driver left in flight
            with open(saved) as f:
                st = json.load(f)
            self.window, self.longest, self.pending, self.n_cuts = st["window"], st["longest"], st["pending"], st["n_cuts"]
            if self.pending:
                self.pending["t_go"] = time.time()
            self.t_cut = time.time()

    def save(self):
        with open(f"{self.work}/state.json.tmp", "w") as f:
            json.dump({"window": self.window, "longest": self.longest, "pending": self.pending,
                       "n_cuts": self.n_cuts}, f)
        os.replace(f"{self.work}/state.json.tmp", f"{self.work}/state.json")

    def say(self, msg):
        print(f"[g{self.idx}] {msg}", flush=True)

    def stop(self):
        """Power off for good (the driver stops): a cut like any other, converged on resume."""
        if self.pending:
            self.pending.update({"how": "quit", "stopped": True})
        self.save()
        self.g.quit()
        self.stopped = True

    def step(self):
        if self.stopped:
            return
        for line in self.g.lines():
            m = re.search(r"@@(CUT-[A-Z-]+|PH)@@ ?(.*)", line)
            if not m:
                continue
            tag, rest = m.group(1), m.group(2)
            now = time.time()
            self.last_progress = now
            f = rest.split()
            if tag == "CUT-BOOT":
                self.t_boot = now
                self.boot = {"boot_s": round(now - self.t_cut, 1) if self.t_cut else None}
                for kv in f:
                    k, _, v = kv.partition("=")
                    try:
                        self.boot[f"guest_{k}"] = float(v)
                    except ValueError:
                        pass
                self.say(f"cut-boot {rest} (host: {self.boot['boot_s']} s after the cut)")
            elif tag in ("CUT-SETUP", "CUT-UNITS"):
                self.say(f"{tag.lower()} {rest}")
            elif tag == "CUT-SETUP-FAIL":
                self.say(f"setup failed: {rest}")
                self.run.failed_setup = True
                open(f"{self.work}/setup-failed", "w").close()  # not resumed
                self.stop()
                return
            elif tag == "CUT-RESULT":
                r = {"guest": self.idx, "n": int(f[0]), "kind": f[1], "ok": f[2] == "PASS", "detail": rest}
                if self.pending and self.pending["n"] == r["n"]:
                    r.update({k: self.pending.get(k) for k in ("delay", "phase", "how", "stopped")})
                    r["wall_s"] = round(now - self.pending["t_go"], 1)
                r.update(self.boot)
                r["check_s"] = round(now - self.t_boot, 1) if self.t_boot else None
                self.pending = None
                self.run.add(r)
            elif tag == "CUT-GO":
                if self.run.stop:
                    self.pending = {"n": int(f[0]), "kind": f[1], "delay": 0.0, "phase": "go", "how": "quit",
                                    "t_go": now}
                    self.stop()
                    return
                kind = f[1]
                delay = round(self.rng.uniform(0, self.window[kind]), 2)
                how = "quit" if self.a.quit_every and (self.n_cuts + 1) % self.a.quit_every == 0 else "system_reset"
                self.pending = {"n": int(f[0]), "kind": kind, "delay": delay, "phase": "go", "how": how, "t_go": now,
                                "next_s": round(now - self.t_boot, 1) if self.t_boot else None}
                self.cut_at = now + delay
                self.save()
            elif tag == "PH" and self.pending and int(f[0]) == self.pending["n"]:
                self.pending["phase"] = f[1]
            elif tag == "CUT-DONE" and self.pending and int(f[0]) == self.pending["n"]:
                s = float(f[1].split("=")[1])
                k = self.pending["kind"]
                self.longest[k] = max(self.longest.get(k, 0), s)
                self.window[k] = 1.25 * self.longest[k]
        now = time.time()
        if self.cut_at and now >= self.cut_at:
            if self.pending["phase"] == "done":
                self.pending["phase"] = "after-done"
            self.save()
            if self.pending["how"] == "quit":
                self.g.quit()
                self.g.start()
            else:
                self.g.reset()
            self.n_cuts += 1
            self.t_cut = time.time()
            self.cut_at = None
        if now - self.last_progress > self.a.boot_limit:
            self.say(f"no progress for {self.a.boot_limit}s; counted as a failure, power cut")
            self.run.add({"guest": self.idx, "n": self.pending["n"] if self.pending else -1,
                          "kind": self.pending["kind"] if self.pending else "?", "ok": False, "detail": "hang"})
            self.g.reset()
            self.t_cut = self.last_progress = time.time()


class Run:
    def __init__(self, folder, cuts, deadline):
        self.folder, self.cuts, self.deadline = folder, cuts, deadline
        self.path = f"{folder}/results.jsonl"
        self.results = []
        if os.path.exists(self.path):
            with open(self.path) as f:
                self.results = [json.loads(l) for l in f if l.strip()]
        self.stop = len(self.results) >= cuts
        self.failed_setup = False

    def add(self, r):
        r["t"] = round(time.time(), 1)
        self.results.append(r)
        with open(self.path, "a") as f:
            f.write(json.dumps(r) + "\n")
            f.flush()
            os.fsync(f.fileno())
        print(f"cut {len(self.results):3d} [g{r['guest']}]: {r['detail']} | delay {r.get('delay', '?')}s "
              f"phase {r.get('phase', '?')} {r.get('how', '?')} boot {r.get('boot_s', '?')}s "
              f"check {r.get('check_s', '?')}s wall {r.get('wall_s', '?')}s", flush=True)
        if len(self.results) >= self.cuts or (self.deadline and time.time() > self.deadline):
            self.stop = True


def summary(folders):
    """The figures of one run folder, or of several run side by side (their walls overlapping)."""
    results, spans, guests = [], [], 0
    for folder in folders:
        with open(f"{folder}/results.jsonl") as f:
            results += [dict(json.loads(l), folder=os.path.basename(folder)) for l in f if l.strip()]
        if os.path.exists(f"{folder}/run.json"):
            with open(f"{folder}/run.json") as f:
                meta = json.load(f)
            spans += meta.get("spans", [])
            guests += meta.get("guests", 0)
    # Wall: the union of the drivers' spans.
    wall, end = 0.0, 0.0
    for s, e in sorted(spans):
        s = max(s, end)
        if e > s:
            wall += e - s
            end = e
    ok = sum(r["ok"] for r in results)
    print(f"campaign: {len(results)} machine-level cuts on {guests} guest(s), {ok} converged, "
          f"{len(results) - ok} failed; wall {wall:.0f}s, {wall / max(1, len(results)):.1f}s of wall per cut")
    print(f"campaign: by kind: {dict(collections.Counter((r['kind'], r.get('how', '?')) for r in results))}")
    print(f"campaign: by cut: {dict(collections.Counter(r.get('how', '?') for r in results))}")
    by = collections.Counter((r["kind"], r.get("phase", "?")) for r in results)
    for (k, p), c in sorted(by.items()):
        print(f"campaign:   {k:6s} {p:11s} {c}")
    for key, what in (("boot_s", "cut -> guest half running (firmware, kernel, initrd, systemd)"),
                      ("guest_userspace", "  of it, guest uptime when systemd started (kernel + initrd)"),
                      ("guest_uptime", "  of it, guest uptime when the guest half started"),
                      ("check_s", "convergence check (boot guard restart included)"),
                      ("delay", "update started -> cut (random delay)"),
                      ("wall_s", "whole cycle, update started -> result")):
        xs = [r.get(key) for r in results if r.get(key) is not None]
        if xs:
            print(f"campaign: {what}: median {median(xs):.1f}s, min {min(xs):.1f}s, max {max(xs):.1f}s ({len(xs)} cuts)")
    for r in results:
        if not r["ok"]:
            print(f"campaign: FAILED cut {r['n']} on {r['folder']} guest {r.get('guest')}: {r['detail']}")
    return results and ok == len(results)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuts", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--v1")
    ap.add_argument("--v2")
    ap.add_argument("--smp", type=int, default=2)
    ap.add_argument("--guests", type=int, default=1, help="machines side by side, each its own overlay")
    ap.add_argument("--quit-every", type=int, default=5)
    ap.add_argument("--deadline", type=float, default=0, help="stop cutting after this epoch time")
    # A starved TCG guest (soft lockups in its console under a load of 25 on 2 cores) took more
    # than 900 s for one boot: the bound is against a hang, not a measure.
    ap.add_argument("--boot-limit", type=int, default=2400, help="seconds without progress before a hang counts as a failure")
    ap.add_argument("--resume", help="a run folder to continue (its guests, disks and results)")
    ap.add_argument("--summary", nargs="+", help="print the summary of run folders (run side by side) and exit")
    a = ap.parse_args()
    if a.summary:
        sys.exit(0 if summary(a.summary) else 1)

    image = subprocess.run([f"{ROOT}/tests/system/guest/build-image.sh"], check=True,
                           capture_output=True, text=True).stdout.strip().splitlines()[-1]
    if a.resume:
        folder = a.resume
        with open(f"{folder}/run.json") as f:
            meta = json.load(f)
        a.guests, a.seed = meta["guests"], meta["seed"]
    else:
        if not (a.v1 and a.v2):
            ap.error("--v1 and --v2 are needed for a new run")
        cache = os.environ.get("LAB_CACHE", f"{ROOT}/tests/system/.cache")
        os.makedirs(f"{cache}/runs", exist_ok=True)
        folder = tempfile.mkdtemp(prefix="powercut-campaign.", dir=f"{cache}/runs")
        meta = {"seed": a.seed, "guests": a.guests, "smp": a.smp, "spans": []}
        for i in range(a.guests):
            prepare(f"{folder}/guest-{i}", a, image, i)
    run = Run(folder, a.cuts, a.deadline)
    print(f"campaign: run folder {folder}, seed {a.seed}, {a.guests} guest(s), {a.cuts} cuts "
          f"({len(run.results)} already recorded)", flush=True)
    t0 = time.time()
    machines = [Machine(run, i, image, a, a.seed * 1000 + i * 100 + len(run.results)) for i in range(a.guests)
                if not os.path.exists(f"{folder}/guest-{i}/setup-failed")]
    for m in machines:
        m.g.start()
    with open(f"{folder}/run.json", "w") as f:
        json.dump(meta, f)
    # Each guest stops at its next offer (quit right after it: one more cut, converged and
    # counted when the run is resumed).
    while not all(m.stopped for m in machines):
        for m in machines:
            m.step()
        if a.deadline and time.time() > a.deadline + 600:
            print("campaign: deadline passed by 10 minutes; the guests stop now", flush=True)
            run.stop = True
            for m in machines:
                if not m.stopped:
                    m.stop()
        time.sleep(0.05)
    meta["spans"].append([t0, time.time()])
    with open(f"{folder}/run.json", "w") as f:
        json.dump(meta, f)
    good = summary([folder])
    print(f"campaign: details in {folder}/results.jsonl, consoles in {folder}/guest-*/console-*.log; "
          f"continue with --resume {folder}")
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
