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

The boot after a cut is kept light (docs/lab.md): the lab's small initrd (`--initrd small`,
tests/system/guest/initrd-init) and `campaign.target` (svc-agent.service and the guest half
only) as the default target after the first boot's setup. With `--restore` every cut quits qemu and the boot after
it restores a guest saved once, held in the initrd before it reads the root disk: the
kernel's boot and the initrd's modules are paid once per run, the cut disk's boot (journal
replay, systemd, the agent) every cut.

Prints one line per cut and a summary (cuts by kind and by the phase the cut landed in, time
per cut in wall and in qemu's CPU seconds, failures); appends each cut to `results.jsonl` in
the run folder. Exit status 0 only when every cut converged.
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
    def __init__(self, work, image, smp, initrd):
        self.work, self.image, self.smp, self.initrd = work, image, smp, initrd
        self.mon = os.path.join(work, "monitor.sock")
        self.proc = None
        self.cpu_prev = 0.0  # CPU seconds of this driver's earlier qemu processes
        # A resumed run keeps the consoles of the earlier drivers.
        self.starts = len([f for f in os.listdir(work) if f.startswith("console-")])

    def start(self, hold=False, incoming=None):
        """A new qemu process. hold: the initrd waits for `go` before it reads the root (the
        guest --restore saves); incoming: a saved guest to restore instead of booting."""
        # A console file per qemu process (qemu truncates the file it is given).
        self.starts += 1
        self.console = os.path.join(self.work, f"console-{self.starts}.log")
        open(self.console, "wb").close()
        self.pos = 0
        self.buf = b""
        self.serial = os.path.join(self.work, "serial.sock")
        for f in (self.mon, self.serial):
            if os.path.exists(f):
                os.unlink(f)
        log = open(os.path.join(self.work, "qemu.log"), "ab")
        append = "console=ttyS0 root=/dev/vda rw quiet no_timer_check systemd.show_status=0 panic=-1 svc.lab.phase=main"
        if hold or incoming:
            append += " svc.lab.hold=1"
        self.proc = subprocess.Popen([
            "qemu-system-x86_64", "-accel", "tcg", "-smp", str(self.smp), "-m", "1024",
            "-nodefaults", "-no-user-config", "-display", "none",
            "-monitor", f"unix:{self.mon},server,nowait",
            "-kernel", f"{self.image}/vmlinuz", "-initrd", self.initrd,
            "-append", append,
            "-drive", f"file={self.work}/root.qcow2,format=qcow2,if=virtio",
            "-drive", f"file={self.work}/lab.img,format=raw,if=virtio",
            "-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0",
            "-device", "virtio-rng-pci",
            # The console goes to the file; the socket is the serial line's input (`go`).
            "-chardev", f"socket,id=ser0,path={self.serial},server=on,wait=off,logfile={self.console}",
            "-serial", "chardev:ser0"]
            + (["-incoming", f"exec:cat '{incoming}'"] if incoming else []), stdout=log, stderr=log)
        for _ in range(100):
            if os.path.exists(self.mon):
                return
            time.sleep(0.1)

    def send(self, line):
        """A line on the guest's serial input."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(self.serial)
        s.sendall(line.encode() + b"\n")
        # What the guest has not read when the connection closes is dropped: a moment for
        # the serial FIFO to drain (the initrd takes the last word of the last whole line).
        time.sleep(1)
        s.close()

    def hmp(self, cmd):
        """A monitor command and its answer."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.mon)
        s.sendall(cmd.encode() + b"\n")
        out, end = b"", time.time() + 2
        while time.time() < end:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            out += d
            if out.count(b"(qemu)") >= 2:
                break
        s.close()
        return out.decode(errors="replace")

    def save_held(self, state):
        """Boots to the initrd's hold, saves that guest to `state` and quits; returns the
        wall and CPU seconds it took (a boot's kernel and initrd part)."""
        t0, cpu0 = time.time(), self.cpu()
        self.start(hold=True)
        while not any("@@INITRD-HOLD@@" in l for l in self.lines()):
            if self.proc.poll() is not None:
                raise RuntimeError("qemu exited before the initrd's hold")
            time.sleep(0.5)
        time.sleep(2)  # the init is in its read
        cpu = self.cpu()
        self.hmp("stop")
        self.hmp(f'migrate "exec:cat > {state}.tmp"')
        while True:
            st = self.hmp("info migrate")
            if "Migration status: completed" in st:
                break
            if "Migration status: failed" in st:
                raise RuntimeError(f"saving the held guest: {st}")
            time.sleep(0.5)
        os.replace(f"{state}.tmp", state)
        self.quit()
        return round(time.time() - t0, 1), round(cpu - cpu0, 1)

    def cpu(self):
        """CPU seconds qemu has used (all of this driver's qemu processes for this guest): the
        figure of a cut that the host's load does not change, unlike its wall time."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
            return self.cpu_prev + (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, AttributeError, IndexError, ValueError):
            return self.cpu_prev

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
        self.cpu_prev = self.cpu()
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

    def __init__(self, run, idx, image, a, seed, initrd):
        self.run, self.idx, self.a = run, idx, a
        self.work = f"{run.folder}/guest-{idx}"
        self.g = Guest(self.work, image, a.smp, initrd)
        self.rng = random.Random(seed)
        self.window = {"server": 30.0, "agent": 30.0}
        self.longest = {}
        self.pending = None
        self.cut_at = None
        self.t_cut = None
        self.t_boot = None
        self.boot = {}
        self.cpu_cut = self.cpu_boot = None
        self.n_cuts = 0
        self.stopped = False
        self.last_progress = time.time()
        # --restore: every cut is the power going (qemu quits) and the boot after it starts
        # from the saved guest held in the initrd (no kernel boot, no module loading), which
        # then reads the cut disk and boots it (journal replay, systemd, the agent).
        self.held = f"{self.work}/held.state" if a.restore else None
        self.go_at = None
        saved = f"{self.work}/state.json"
        if os.path.exists(saved):  # a resumed run: the cut the last driver left in flight
            with open(saved) as f:
                st = json.load(f)
            self.window, self.longest, self.pending, self.n_cuts = st["window"], st["longest"], st["pending"], st["n_cuts"]
            if self.pending:
                self.pending["t_go"] = time.time()
                self.pending["cpu_go"] = None  # another qemu process
            self.t_cut = time.time()

    def save(self):
        with open(f"{self.work}/state.json.tmp", "w") as f:
            json.dump({"window": self.window, "longest": self.longest, "pending": self.pending,
                       "n_cuts": self.n_cuts}, f)
        os.replace(f"{self.work}/state.json.tmp", f"{self.work}/state.json")

    def power_on(self):
        """The first qemu of this driver: a boot from scratch, or (--restore, a run resumed
        with a cut disk) the held guest."""
        if self.held and os.path.exists(f"{self.work}/state.json"):
            self.restore()
        else:
            self.g.start()

    def restore(self):
        self.g.start(incoming=self.held)
        self.go_at = time.time()

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
        if self.go_at and time.time() >= self.go_at:
            # The restored guest reads its serial line once it runs (`go` sent while the
            # saved state loads would be lost with the device state it replaces): sent again
            # every few seconds until the initrd says it went on.
            self.go_at = time.time() + 3
            try:
                st = self.g.hmp("info status")
                if "VM status: paused" in st and "postmigrate" not in st and "inmigrate" not in st:
                    # Saved stopped, restored stopped (the run state travels with the guest).
                    self.g.hmp("cont")
                elif "VM status: running" in st:
                    self.g.send(f"go {int(time.time())}")
            except OSError:
                pass
        for line in self.g.lines():
            m = re.search(r"@@(CUT-[A-Z-]+|PH|INITRD-GO)@@ ?(.*)", line)
            if not m:
                continue
            tag, rest = m.group(1), m.group(2)
            now = time.time()
            self.last_progress = now
            f = rest.split()
            if tag == "INITRD-GO":
                self.go_at = None
                if self.t_cut:
                    self.boot_restored_s = round(now - self.t_cut, 1)
            elif tag == "CUT-BOOT":
                self.t_boot = now
                self.cpu_boot = self.g.cpu()
                self.boot = {"boot_s": round(now - self.t_cut, 1) if self.t_cut else None,
                             "boot_cpu_s": round(self.cpu_boot - self.cpu_cut, 1) if self.cpu_cut is not None else None}
                if getattr(self, "boot_restored_s", None) is not None:
                    self.boot["restored_s"] = self.boot_restored_s  # cut -> the initrd went on
                    self.boot_restored_s = None
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
                if self.cpu_boot is not None:
                    r["check_cpu_s"] = round(self.g.cpu() - self.cpu_boot, 1)
                if self.pending and self.pending.get("cpu_go") is not None:
                    r["cpu_s"] = round(self.g.cpu() - self.pending["cpu_go"], 1)
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
                if self.held:
                    how = "quit+restore"
                self.pending = {"n": int(f[0]), "kind": kind, "delay": delay, "phase": "go", "how": how, "t_go": now,
                                "next_s": round(now - self.t_boot, 1) if self.t_boot else None,
                                "cpu_go": self.g.cpu()}
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
            if self.pending["how"] == "quit+restore":
                self.g.quit()
                self.restore()
            elif self.pending["how"] == "quit":
                self.g.quit()
                self.g.start()
            else:
                self.g.reset()
            self.n_cuts += 1
            self.t_cut = time.time()
            self.cpu_cut = self.g.cpu()
            self.cut_at = None
        if now - self.last_progress > self.a.boot_limit:
            self.say(f"no progress for {self.a.boot_limit}s; counted as a failure, power cut")
            self.run.add({"guest": self.idx, "n": self.pending["n"] if self.pending else -1,
                          "kind": self.pending["kind"] if self.pending else "?", "ok": False, "detail": "hang"})
            if self.held:
                self.g.quit()
                self.restore()
            else:
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
    for key, what in (("boot_s", "cut -> guest half running (kernel, initrd, systemd)"),
                      ("restored_s", "  of it, cut -> the restored guest's initrd reading the cut disk (--restore)"),
                      ("guest_userspace", "  of it, guest uptime when systemd started (kernel + initrd)"),
                      ("guest_agent", "  of it, guest uptime when svc-agent.service was active"),
                      ("guest_target", "  of it, guest uptime when the default target was reached"),
                      ("guest_uptime", "  of it, guest uptime when the guest half started"),
                      ("boot_cpu_s", "  the same in qemu's CPU seconds"),
                      ("check_s", "convergence check (boot guard restart included)"),
                      ("check_cpu_s", "  the same in qemu's CPU seconds"),
                      ("delay", "update started -> cut (random delay)"),
                      ("wall_s", "whole cycle, update started -> result"),
                      ("cpu_s", "  the same in qemu's CPU seconds")):
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
    ap.add_argument("--initrd", choices=("small", "image"), default="small",
                    help="small: the lab's initrd, the image's cut down to the root disk's modules (built with "
                         "the image); image: the image's own (130 MiB unpacked, udev probing every module)")
    ap.add_argument("--deadline", type=float, default=0, help="stop cutting after this epoch time")
    ap.add_argument("--restore", action="store_true",
                    help="every cut quits qemu; the boot after it restores a guest saved in the initrd, before "
                         "it reads the root (kernel and initrd paid once per run), then boots the cut disk")
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
        a.smp, a.initrd = meta.get("smp", a.smp), meta.get("initrd", "image")
        a.restore = meta.get("restore", False)
    else:
        if not (a.v1 and a.v2):
            ap.error("--v1 and --v2 are needed for a new run")
        cache = os.environ.get("LAB_CACHE", f"{ROOT}/tests/system/.cache")
        os.makedirs(f"{cache}/runs", exist_ok=True)
        folder = tempfile.mkdtemp(prefix="powercut-campaign.", dir=f"{cache}/runs")
        meta = {"seed": a.seed, "guests": a.guests, "smp": a.smp, "initrd": a.initrd, "restore": a.restore,
                "spans": []}
        for i in range(a.guests):
            prepare(f"{folder}/guest-{i}", a, image, i)
    run = Run(folder, a.cuts, a.deadline)
    print(f"campaign: run folder {folder}, seed {a.seed}, {a.guests} guest(s), {a.cuts} cuts "
          f"({len(run.results)} already recorded)", flush=True)
    t0 = time.time()
    # small: the lab's own initrd (tests/system/guest/initrd-init, built with the image).
    initrd = f"{image}/initrd-small.img" if a.initrd == "small" else f"{image}/initrd.img"
    machines = [Machine(run, i, image, a, a.seed * 1000 + i * 100 + len(run.results), initrd) for i in range(a.guests)
                if not os.path.exists(f"{folder}/guest-{i}/setup-failed")]
    for m in machines:
        if m.held and not os.path.exists(m.held):
            # Before the guest's first boot (qemu locks the disks it has open).
            wall, cpu = m.g.save_held(m.held)
            meta.setdefault("held", []).append({"guest": m.idx, "wall_s": wall, "cpu_s": cpu})
            print(f"campaign: [g{m.idx}] held guest saved: boot to the initrd's hold {wall} s wall, {cpu} s qemu CPU",
                  flush=True)
        m.power_on()
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
