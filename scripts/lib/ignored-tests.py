#!/usr/bin/env python3
"""The integration tests that a bare `cargo test` leaves out, and which of them the test
command leaves out too. A test `#[ignore = "needs ..."]` needs something the test command
installs (nginx, gooseBit, root, ...): the test command runs it. The other reasons are "child
process of TEST" (run by that test) and "measurement: SCRIPT" (run by that script): prints
their full paths (as `--list --ignored` names them), one a line, for `--skip`. An `#[ignore]`
without one of these reasons fails here: no test is left out silently.

usage: ignored-tests.py LIST_FILE SRC_DIR...   (LIST_FILE: `cargo test --test it -- --list --ignored`)
"""
import pathlib
import re
import sys

ATTR = re.compile(r'#\[ignore(?:\s*=\s*"([^"]*)")?\]')
FN = re.compile(r'^\s*(?:pub\s+)?fn\s+(\w+)')
KINDS = ("needs ", "child process of ", "measurement: ")


def ignored(src):
    """(file, line, reason, fn name) of each #[ignore] under src."""
    for path in sorted(pathlib.Path(src).rglob("*.rs")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            m = ATTR.search(line)
            if not m or line.lstrip().startswith("//"):
                continue
            name = next((f.group(1) for f in map(FN.match, lines[i + 1:i + 6]) if f), None)
            yield path, i + 1, m.group(1) or "", name


def main():
    listing, srcs = sys.argv[1], sys.argv[2:]
    needs, others, bad = set(), set(), []
    for path, line, reason, name in (x for src in srcs for x in ignored(src)):
        if not name or not reason.startswith(KINDS):
            bad.append(f"{path}:{line}: #[ignore] needs a reason starting with one of {KINDS}")
        elif reason.startswith("needs "):
            needs.add(name)
        else:
            others.add(name)
    if bad:
        sys.exit("\n".join(bad))
    names = [l[: -len(": test")] for l in open(listing).read().splitlines() if l.endswith(": test")]
    last = [n.rsplit("::", 1)[-1] for n in names]
    if needs & others:
        sys.exit(f"one name, two kinds of #[ignore]: {sorted(needs & others)}")
    if not any(n in needs for n in last) or not all(n in needs | others for n in last):
        sys.exit("the ignored tests listed and the #[ignore]s read do not match")
    print("\n".join(full for full, n in zip(names, last) if n in others))


if __name__ == "__main__":
    main()
