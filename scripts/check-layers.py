#!/usr/bin/env python3
"""The layering of docs/architecture.md, checked against the code.

docs/architecture.md holds the layer table between the markers `<!-- layers -->` and
`<!-- /layers -->`: one line per layer, lowest first, `N. name: module, module, ...`. A
top-level module of src/ may use modules of its own layer and of lower layers, never of a
higher one, and the modules' use graph has no cycle. Every top-level module must be in the
table. Uses are found as `crate::<module>` paths and `use crate::{<module>, ...}` lists in
src/<module>.rs and src/<module>/**.rs (tests inside them included: a test reaching up is a
design smell too). Prints each violation with file and line; exit 1 when there is any.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def layers():
    text = (ROOT / "docs/architecture.md").read_text()
    m = re.search(r"<!-- layers -->(.*?)<!-- /layers -->", text, re.S)
    if not m:
        sys.exit("check-layers: no <!-- layers --> table in docs/architecture.md")
    rank = {}
    for line in m.group(1).splitlines():
        lm = re.match(r"\s*(\d+)\.\s*[^:]+:\s*(.+)$", line)
        if not lm:
            continue
        for name in lm.group(2).split(","):
            name = name.strip().strip("`")
            if name:
                rank[name] = int(lm.group(1))
    return rank


def modules():
    mods = {}
    for p in SRC.iterdir():
        if p.name in ("lib.rs", "bin"):
            continue
        name = p.stem
        files = [p] if p.is_file() else sorted(p.rglob("*.rs"))
        mods[name] = files
    return mods


USE_LIST = re.compile(r"use\s+crate::\{([^;]*)\}", re.S)
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def uses(files, known):
    found = []
    for f in files:
        text = f.read_text()
        for m in PATH.finditer(text):
            found.append((m.group(1), f, text.count("\n", 0, m.start()) + 1))
        for m in USE_LIST.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            for part in re.split(r"[,\s]+", m.group(1)):
                head = part.split("::")[0].strip("{} ")
                if head in known:
                    found.append((head, f, line))
    return [(t, f, l) for (t, f, l) in found if t in known]


def main():
    rank = layers()
    mods = modules()
    bad = []
    missing = sorted(set(mods) - set(rank))
    for m in missing:
        bad.append(f"src/{m}: module not in the layer table of docs/architecture.md")
    for m in sorted(set(rank) - set(mods)):
        bad.append(f"docs/architecture.md: layer table names {m}, which is not a module of src/")
    graph = {m: set() for m in mods}
    for m, files in mods.items():
        for target, f, line in uses(files, set(mods)):
            if target == m:
                continue
            graph[m].add(target)
            if m in rank and target in rank and rank[target] > rank[m]:
                bad.append(
                    f"{f.relative_to(ROOT)}:{line}: {m} (layer {rank[m]}) uses {target} "
                    f"(layer {rank[target]}), a higher layer"
                )
    # Cycles among modules of one layer (upward edges are reported above).
    state = {}

    def visit(n, stack):
        state[n] = 1
        for t in sorted(graph[n]):
            if state.get(t) == 1:
                cyc = stack[stack.index(t):] + [t]
                bad.append("cycle: " + " -> ".join(cyc))
            elif t not in state:
                visit(t, stack + [t])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    for b in bad:
        print(b)
    print(f"layers: {len(mods)} modules, {sum(len(v) for v in graph.values())} edges, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
