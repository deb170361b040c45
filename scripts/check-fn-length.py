#!/usr/bin/env python3
"""No function of src/ longer than 150 lines (docs/architecture.md, "Rules every module keeps").

A function is counted from its `fn` line to the brace that closes its body (strings, chars
and `//` comments skipped when matching braces). Prints each one over the limit with file
and line; exit 1 when there is any not in ALLOWED.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIMIT = 150
# Functions allowed over the limit, by "path:name" (none: keep it so).
ALLOWED: set[str] = set()

FN = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(const\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+(\w+)")


def code(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//")[0]


def long_functions(path):
    lines = path.read_text().split("\n")
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, started = 0, False
        for j in range(i, len(lines)):
            s = code(lines[j])
            if not started and ";" in s and "{" not in s:
                break  # a declaration without a body
            for ch in s:
                if ch == "{":
                    depth, started = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if started and depth == 0:
                if j - i + 1 > LIMIT:
                    yield m.group(6), i + 1, j - i + 1
                break


def main():
    bad = []
    for p in sorted((ROOT / "src").rglob("*.rs")):
        rel = p.relative_to(ROOT).as_posix()
        for name, line, n in long_functions(p):
            if f"{rel}:{name}" not in ALLOWED:
                bad.append(f"{rel}:{line}: fn {name} is {n} lines (at most {LIMIT})")
    for b in bad:
        print(b)
    print(f"function length: {len(bad)} over {LIMIT} lines")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
