#!/usr/bin/env python3
"""The integration tests that a bare `cargo test` leaves out, and which of them the test
command runs: prints the full paths (as `--list --ignored` names them) of every test whose
`#[ignore = "needs ..."]` says it needs something the test command installs (nginx, gooseBit,
root, ...). The other reasons are "child process of TEST" (run by that test) and
"measurement: SCRIPT" (run by that script). An `#[ignore]` without one of these reasons
fails here: no test is left out silently.

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
    needs, bad = set(), []
    for path, line, reason, name in (x for src in srcs for x in ignored(src)):
        if not name or not reason.startswith(KINDS):
            bad.append(f"{path}:{line}: #[ignore] needs a reason starting with one of {KINDS}")
        elif reason.startswith("needs "):
            needs.add(name)
    if bad:
        sys.exit("\n".join(bad))
    names = [l[: -len(": test")] for l in open(listing).read().splitlines() if l.endswith(": test")]
    chosen = [n for n in names if n.rsplit("::", 1)[-1] in needs]
    if not chosen:
        sys.exit("no `needs` test found among the ignored ones: the listing or this script is wrong")
    print("\n".join(chosen))


if __name__ == "__main__":
    main()
