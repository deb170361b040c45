#!/usr/bin/env python3
"""Times `svc-agent validate` on generated configs and reads its peak memory (GNU time).

1. The 6 MB config with 10,000 components, next to the floor of `cat` (reading the file at
   all) and of `python3 -c json.load`.
2. Big-input shapes (#22): many components, one component with a huge `depends_on`, many
   Wi-Fi networks, many unknown keys in one object; each at the size that showed the
   quadratic time (100k / 50k entries) and at about 50 MB. With a second binary (OLD_BIN,
   e.g. a build of an older commit) both are timed side by side in the same run; the old
   one is stopped after OLD_TIMEOUT seconds. Each shape's own parse floor (python3's C
   JSON parser on the same file) is timed beside it.

usage: benches/validate.py [BIN [OLD_BIN]]
Prints Markdown tables for BENCHMARKS.md. Never asserted in tests (the machine is shared).
"""
import json, os, resource, subprocess, sys, tempfile, time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/svc-agent"
OLD_BIN = sys.argv[2] if len(sys.argv) > 2 else None
RUNS = int(os.environ.get("RUNS", "15"))
BIG_RUNS = int(os.environ.get("BIG_RUNS", "3"))
OLD_TIMEOUT = float(os.environ.get("OLD_TIMEOUT", "60"))
BIG_BYTES = 50_000_000


def make_config(path, n=10_000):
    modules = [{"type": "registry", "name": f"vendor_mod{i}", "module_id": f"vendor:mod{i}",
                "version": "1.2.*", "env": {"PATH": "/opt/bin:${environment.PATH}"}} for i in range(100)]
    comps = []
    for i in range(n):
        comps.append({
            "name": f"component-{i:05d}",
            "model": f"vendor:mod{i % 100}:model-{i % 7}",
            "type": "sensor", "namespace": "rdk",
            "attributes": {"trigger_pin": str(i % 40), "echo_interrupt_pin": str((i + 1) % 40),
                           "board": "component-00000", "timeout_ms": 1000,
                           "calibration": [0.1 * j for j in range(12)],
                           "label": "x" * 100},
            "depends_on": ["component-00000"] if i else [],
        })
    with open(path, "w") as f:
        json.dump({"components": comps, "modules": modules}, f, indent=1)


MODULE = [{"type": "local", "name": "board", "module_id": "acme:board", "executable_path": "/opt/board"}]


def make_depends_on(path, n):
    """n components, and one more that depends on every one of them."""
    comps = [{"name": f"c{i}", "model": "acme:board:pi", "type": "board", "namespace": "rdk"}
             for i in range(n)]
    comps.append({"name": "hub", "model": "acme:board:pi", "type": "board", "namespace": "rdk",
                  "depends_on": [f"c{i}" for i in range(n)]})
    with open(path, "w") as f:
        json.dump({"components": comps, "modules": MODULE}, f, indent=1)


def make_networks(path, n):
    """n networks, each with its own pass key (each is registered with the log scrubber)."""
    nets = [{"type": "wifi", "ssid": f"net-{i:07d}", "psk": f"pass-{i:07d}", "priority": i % 999}
            for i in range(n)]
    with open(path, "w") as f:
        json.dump({"agent": {"agent-provisioning": {"networks": nets}}}, f, indent=1)


def make_unknown_keys(path, n):
    """n unknown keys in one object (the top level: each is kept and warned about)."""
    with open(path, "w") as f:
        json.dump({f"x-key-{i:07d}": i for i in range(n)}, f, indent=1)


def scaled(make, path, target):
    """Calls make(path, n) with the n that gives about `target` bytes."""
    make(path, 10_000)
    n = int(10_000 * target / os.path.getsize(path))
    make(path, n)
    return n


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(cmd, runs, timeout=None):
    """Best wall time and best CPU time (user + sys) over `runs` runs; None when a run
    took longer than `timeout`. CPU time is the steadier figure on a shared machine."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(runs):
        c, t = child_cpu(), time.perf_counter()
        try:
            p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, child_cpu() - c)
        if p.returncode not in (0, 1):
            sys.exit(f"{cmd} exited {p.returncode}")
    return best, best_cpu


def peak_rss_bytes(cmd):
    """Peak RSS of one run, from GNU time (which forks from a small process, so the
    figure is the command's own)."""
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True).stderr
    return int(out.strip().splitlines()[-1]) * 1024


def fmt_time(t):
    if t is None:
        return f"> {OLD_TIMEOUT:.0f} s (stopped)"
    return f"{t*1000:.0f} ms" if t < 10 else f"{t:.1f} s"


def fmt_run(m):
    """wall (CPU) of a measure() result."""
    if m is None:
        return fmt_time(None)
    return f"{fmt_time(m[0])} ({fmt_time(m[1])})"


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.json")
        make_config(path)
        size = os.path.getsize(path)
        base_size = size
        rows = [
            ("svc-agent validate", [BIN, "validate", path]),
            ("floor: cat FILE", ["cat", path]),
            ("python3 json.load (parse only)", [sys.executable, "-c", f"import json;json.load(open({path!r}))"]),
        ]
        if OLD_BIN:
            rows.insert(1, ("svc-agent validate, old build", [OLD_BIN, "validate", path]))
        print(f"config: {size/1e6:.2f} MB, 10,000 components, 100 modules; best of {RUNS} runs")
        print()
        print("| command | wall time (best) | CPU time, user + sys (best) | peak RSS | peak RSS / file size |")
        print("|---|---|---|---|---|")
        base = None
        for name, cmd in rows:
            t, cpu = measure(cmd, RUNS)
            if name == "svc-agent validate":
                base = (t, cpu)
            rss = peak_rss_bytes(cmd)
            print(f"| {name} | {t*1000:.1f} ms | {cpu*1000:.1f} ms | {rss/1e6:.1f} MB | {rss/size:.2f}x |", flush=True)

        print()
        print(f"Big inputs: wall (CPU) time, best of {BIG_RUNS} runs (the old build: one run); "
              f"'scaled' is the 10,000-component time above times the size ratio "
              f"({base[0]*1000:.1f} ms ({base[1]*1000:.1f} ms) per {base_size/1e6:.2f} MB).")
        print()
        old_col = " old build |" if OLD_BIN else ""
        print(f"| shape | size |{old_col} svc-agent validate | scaled target | "
              f"floor: python3 json.load of the same file | peak RSS |")
        print("|---|---|" + ("---|" if OLD_BIN else "") + "---|---|---|---|")
        shapes = [
            ("components", lambda p, n: make_config(p, n), [None]),
            ("one component's depends_on", make_depends_on, [100_000, None]),
            ("Wi-Fi networks", make_networks, [50_000, None]),
            ("unknown keys in one object", make_unknown_keys, [100_000, None]),
        ]
        for name, make, counts in shapes:
            for n in counts:
                if n is None:
                    n = scaled(make, path, BIG_BYTES)
                else:
                    make(path, n)
                size = os.path.getsize(path)
                new = measure([BIN, "validate", path], BIG_RUNS)
                rss = peak_rss_bytes([BIN, "validate", path])
                old = ""
                if OLD_BIN:
                    old = f" {fmt_run(measure([OLD_BIN, 'validate', path], 1, OLD_TIMEOUT))} |"
                target = (base[0] * size / base_size, base[1] * size / base_size)
                # An independent parser's cost for this shape: tiny entries cost more per
                # byte to parse at all, which the size-scaled target does not see.
                parse = measure([sys.executable, "-c", f"import json;json.load(open({path!r}))"], 1)
                print(f"| {name}: {n:,} | {size/1e6:.1f} MB |{old} {fmt_run(new)} | "
                      f"{fmt_run(target)} | {fmt_run(parse)} | {rss/1e6:.0f} MB |", flush=True)


if __name__ == "__main__":
    main()
