#!/usr/bin/env python3
"""Times `svc-agent validate` on a generated 5 MB config with 10,000 components and reads
its peak memory (GNU time), next to the floor of `python3 -c json.load`
and of `cat` (reading the file at all). Prints a Markdown table for BENCHMARKS.md."""
import json, os, resource, subprocess, sys, tempfile, time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/svc-agent"
RUNS = int(os.environ.get("RUNS", "15"))


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


def measure(cmd):
    """Best wall time over RUNS runs."""
    best = float("inf")
    for _ in range(RUNS):
        t = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t)
        if p.returncode != 0:
            sys.exit(f"{cmd} exited {p.returncode}")
    return best


def peak_rss_bytes(cmd):
    """Peak RSS of one run, from GNU time (which forks from a small process, so the
    figure is the command's own)."""
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, check=True).stderr
    return int(out.strip().splitlines()[-1]) * 1024


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.json")
        make_config(path)
        size = os.path.getsize(path)
        rows = [
            ("svc-agent validate", [BIN, "validate", path]),
            ("floor: cat FILE", ["cat", path]),
            ("python3 json.load (parse only)", [sys.executable, "-c", f"import json;json.load(open({path!r}))"]),
        ]
        print(f"config: {size/1e6:.2f} MB, 10,000 components, 100 modules; best of {RUNS} runs")
        print()
        print("| command | wall time (best) | peak RSS | peak RSS / file size |")
        print("|---|---|---|---|")
        for name, cmd in rows:
            t = measure(cmd)
            rss = peak_rss_bytes(cmd)
            print(f"| {name} | {t*1000:.1f} ms | {rss/1e6:.1f} MB | {rss/size:.2f}x |")


if __name__ == "__main__":
    main()
