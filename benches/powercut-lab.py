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
        self.starts = 0

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuts", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--v1", required=True)
    ap.add_argument("--v2", required=True)
    ap.add_argument("--smp", type=int, default=2)
    ap.add_argument("--quit-every", type=int, default=5)
    ap.add_argument("--deadline", type=float, default=0, help="stop cutting after this epoch time")
    ap.add_argument("--boot-limit", type=int, default=900, help="seconds without progress before a hang counts as a failure")
    a = ap.parse_args()
    rng = random.Random(a.seed)

    image = subprocess.run([f"{ROOT}/tests/system/guest/build-image.sh"], check=True,
                           capture_output=True, text=True).stdout.strip().splitlines()[-1]
    cache = os.environ.get("LAB_CACHE", f"{ROOT}/tests/system/.cache")
    os.makedirs(f"{cache}/runs", exist_ok=True)
    work = tempfile.mkdtemp(prefix="powercut-campaign.", dir=f"{cache}/runs")
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
    print(f"campaign: run folder {work}, seed {a.seed}, {a.cuts} cuts", flush=True)

    g = Guest(work, image, a.smp)
    g.start()
    t_start = time.time()
    window = {"server": 30.0, "agent": 30.0}
    longest = {}
    results = []          # one dict per cut
    pending = None        # the cut in flight: {"n", "kind", "delay", "phase", "how", "t_go"}
    cut_at = None         # when the host will cut the power
    last_progress = time.time()
    n_cuts = 0
    t_cut = None
    stop = False
    while True:
        for line in g.lines():
            m = re.search(r"@@(CUT-[A-Z-]+|PH)@@ ?(.*)", line)
            if not m:
                continue
            tag, rest = m.group(1), m.group(2)
            last_progress = time.time()
            f = rest.split()
            if tag in ("CUT-SETUP", "CUT-BOOT"):
                print(f"  {tag.lower()} {rest}", flush=True)
            elif tag == "CUT-SETUP-FAIL":
                print(f"campaign: setup failed: {rest}", flush=True)
                g.quit()
                sys.exit(1)
            elif tag == "CUT-RESULT":
                r = {"n": int(f[0]), "kind": f[1], "ok": f[2] == "PASS", "detail": rest}
                if pending and pending["n"] == r["n"]:
                    r.update({k: pending[k] for k in ("delay", "phase", "how")})
                    r["cycle_s"] = round(time.time() - t_cut, 1) if t_cut else None
                    r["wall_s"] = round(time.time() - pending["t_go"], 1)
                results.append(r)
                print(f"cut {len(results):3d}: {rest} | delay {r.get('delay', '?')}s phase {r.get('phase', '?')} "
                      f"{r.get('how', '?')} wall {r.get('wall_s', '?')}s", flush=True)
                if len(results) >= a.cuts or (a.deadline and time.time() > a.deadline):
                    stop = True
            elif tag == "CUT-GO":
                if stop:
                    break
                kind = f[1]
                delay = round(rng.uniform(0, window[kind]), 2)
                how = "quit" if a.quit_every and (n_cuts + 1) % a.quit_every == 0 else "system_reset"
                pending = {"n": int(f[0]), "kind": kind, "delay": delay, "phase": "go", "how": how,
                           "t_go": time.time()}
                cut_at = time.time() + delay
            elif tag == "PH" and pending and int(f[0]) == pending["n"]:
                pending["phase"] = f[1]
            elif tag == "CUT-DONE" and pending and int(f[0]) == pending["n"]:
                s = float(f[1].split("=")[1])
                k = pending["kind"]
                longest[k] = max(longest.get(k, 0), s)
                window[k] = 1.25 * longest[k]
        if stop:
            break
        if cut_at and time.time() >= cut_at:
            if pending["phase"] == "done":
                pending["phase"] = "after-done"
            if pending["how"] == "quit":
                g.quit()
                g.start()
            else:
                g.reset()
            n_cuts += 1
            t_cut = time.time()
            cut_at = None
        if time.time() - last_progress > a.boot_limit:
            print(f"campaign: no progress for {a.boot_limit}s; counted as a failure, power cut", flush=True)
            results.append({"n": pending["n"] if pending else -1, "kind": pending["kind"] if pending else "?",
                            "ok": False, "detail": "hang"})
            g.reset()
            last_progress = time.time()
        if a.deadline and time.time() > a.deadline + 600:
            print("campaign: deadline passed with no result", flush=True)
            break
        time.sleep(0.05)
    g.quit()
    wall = time.time() - t_start

    ok = sum(r["ok"] for r in results)
    by = collections.Counter((r["kind"], r.get("phase", "?")) for r in results)
    hows = collections.Counter(r.get("how", "?") for r in results)
    print(f"campaign: {len(results)} machine-level cuts, {ok} converged, {len(results) - ok} failed; "
          f"wall {wall:.0f}s, {wall / max(1, len(results)):.1f}s per cut (boot + convergence check + update)")
    print(f"campaign: by cut: {dict(hows)}")
    for (k, p), c in sorted(by.items()):
        print(f"campaign:   {k:6s} {p:11s} {c}")
    print(f"campaign: longest update seen: {longest}")
    for r in results:
        if not r["ok"]:
            print(f"campaign: FAILED cut {r['n']}: {r['detail']}")
    with open(f"{work}/campaign.json", "w") as f:
        json.dump({"seed": a.seed, "wall_s": wall, "results": results, "longest": longest}, f, indent=1)
    print(f"campaign: details in {work}/campaign.json, consoles in {work}/console-*.log")
    sys.exit(0 if results and ok == len(results) else 1)


if __name__ == "__main__":
    main()
