#!/usr/bin/env python3
"""Writes build/fast-start.ld: the functions svc-agent runs from its exec to svc-server's
spawn (fast start), laid out together at the start of the code, so that they fault in as a
few 64 KiB blocks instead of one block each (BENCHMARKS.md, "Fast start, sixth pass").

    scripts/fast-start-order.py [AGENT]

AGENT: an x86_64 musl `dist` build of svc-agent with its symbols (default: built into
target/fast-start-order with `profile.dist.strip=false`). It runs once under qemu-user,
which logs every block of code it executes (`-d exec,nochain`), in a fast start of a
scratch root (a file:// app, `/bin/true` as svc-server), up to the spawn; each address is
mapped to its function (`nm`). The script matches the functions by input section
(`.text.<symbol>`; rustc and cc-rs put each function in its own) with the hash of a Rust
name left open, so that a rebuild, another profile or another target still matches; a
function the list does not name stays where it was. Only the layout changes: run this
again when the start path changes, and compare the page faults (BENCHMARKS.md).
"""
import bisect, os, pathlib, re, shutil, subprocess, sys, tempfile, time

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "fast-start.ld"
TRIPLE = "x86_64-unknown-linux-musl"


def agent_binary() -> pathlib.Path:
    if len(sys.argv) > 1:
        return pathlib.Path(sys.argv[1]).resolve()
    tdir = ROOT / "target" / "fast-start-order"
    subprocess.run(["cargo", "build", "--locked", "--profile", "dist", "--target", TRIPLE,
                    "--bin", "svc-agent", "--config", "profile.dist.strip=false"],
                   cwd=ROOT, check=True, env={**os.environ, "CARGO_TARGET_DIR": str(tdir)})
    return tdir / TRIPLE / "dist" / "svc-agent"


def functions(binary: pathlib.Path) -> list[tuple[int, int, str]]:
    out = subprocess.run(["nm", "-S", "--defined-only", str(binary)], capture_output=True,
                         text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTwW":
            syms.append((int(f[0], 16), int(f[1], 16), f[3]))
    return sorted(syms)


def trace(binary: pathlib.Path) -> list[int]:
    """Addresses (relative to the load base) of the code run up to svc-server's spawn."""
    qemu = shutil.which("qemu-x86_64-static") or shutil.which("qemu-x86_64")
    if not qemu:
        sys.exit("qemu-x86_64(-static) is needed: apt-get install qemu-user-static")
    with tempfile.TemporaryDirectory() as w:
        root = pathlib.Path(w, "root")
        (root / "etc").mkdir(parents=True)
        (root / "app").mkdir()
        (root / "opt/svc/bin").mkdir(parents=True)
        os.symlink("/bin/true", root / "opt/svc/bin/svc-server")
        creds = root / "etc/svc.json"
        creds.write_text('{"cloud": {"app_address": "file://%s/app", "id": "part-1", '
                         '"secret": "order-secret-0123456789"}}' % root)
        creds.chmod(0o600)
        log = pathlib.Path(w, "exec.log")
        env = {"PATH": "/usr/bin:/bin", "SVC_AGENT_FAST_START": "1", "LANG": "C.UTF-8"}
        p = subprocess.Popen([qemu, "-d", "exec,nochain", "-D", str(log), str(binary), "run",
                              "--root", str(root)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline and not (root / "opt/svc/home").exists():
            time.sleep(0.2)
        time.sleep(1)  # past the spawn
        p.terminate()
        p.wait()
        pcs = []
        pat = re.compile(r"Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
        with open(log) as f:
            for line in f:
                m = pat.match(line)
                if not m:
                    continue
                if line.rstrip().endswith((" posix_spawn", " __clone")):
                    break
                pcs.append(int(m.group(1), 16))
    if not pcs:
        sys.exit("qemu logged no code")
    return pcs


def main() -> None:
    binary = agent_binary()
    syms = functions(binary)
    starts = [s[0] for s in syms]
    pcs = trace(binary)
    # qemu loads a static-pie at a base of its own: the entry point's offset gives it.
    entry = int(re.search(r"Entry point address:\s+0x([0-9a-f]+)",
                          subprocess.run(["readelf", "-h", str(binary)], capture_output=True,
                                         text=True, check=True).stdout).group(1), 16)
    base = pcs[0] - entry
    names, seen = [], set()
    for pc in pcs:
        off = pc - base
        i = bisect.bisect_right(starts, off) - 1
        if i < 0 or off >= syms[i][0] + max(syms[i][1], 1):
            continue
        name = re.sub(r"17h[0-9a-f]{16}E$", "17h*", syms[i][2])
        if name not in seen:
            seen.add(name)
            names.append(name)
    body = "\n".join(f"    *(.text.{n})" for n in names)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(
        "/* Written by scripts/fast-start-order.py: the functions svc-agent runs from its exec to\n"
        "   svc-server's spawn, in the order first run, placed before the rest of .text.\n"
        "   Layout only: a name that matches nothing is ignored. */\n"
        "SECTIONS\n{\n  .text.fast_start :\n  {\n" + body + "\n  }\n}\nINSERT BEFORE .text;\n")
    print(f"{OUT.relative_to(ROOT)}: {len(names)} functions")


if __name__ == "__main__":
    main()
