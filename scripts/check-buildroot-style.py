#!/usr/bin/env python3
"""Buildroot coding-style checks for buildroot-package/ (the rules of Buildroot's
utils/check-package that apply to our files; that script itself lives only in Buildroot's
git, which CI cannot reach).

Config.in: indentation by tabs, help text as <tab><2 spaces>; .mk: the 80-'#' header,
variables prefixed with the package name; .hash: `<type>  <hex>  <file>` with the right
length; every file: no trailing whitespace, newline at the end, no trailing blank lines.
Prints one line per problem (file:line: message); exit 1 when there is any.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "buildroot-package"
HASH_LEN = {"md5": 32, "sha1": 40, "sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128}
problems = []


def bad(path, n, msg):
    problems.append(f"{path.relative_to(ROOT.parent)}:{n}: {msg}")


def common(path, lines, text):
    if not text.endswith("\n"):
        bad(path, len(lines), "no newline at the end of the file")
    if text.endswith("\n\n"):
        bad(path, len(lines), "trailing blank line(s) at the end of the file")
    for n, line in enumerate(lines, 1):
        if line != line.rstrip():
            bad(path, n, "trailing whitespace")


def config_in(path, lines):
    in_help = False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if line.startswith(" "):
            bad(path, n, "indent with tabs, not spaces")
        if in_help:
            if line.startswith("\t  "):
                continue
            if line.startswith("\t"):
                bad(path, n, "help text is indented <tab><2 spaces>")
                continue
            in_help = False
        stripped = line.strip()
        if stripped == "help":
            in_help = True
            if line != "\thelp":
                bad(path, n, "'help' is indented by one tab")
        elif re.match(r"^(bool|string|depends on|select|default|prompt)\b", stripped):
            if not line.startswith("\t") or line.startswith("\t\t"):
                bad(path, n, f"'{stripped.split()[0]}' is indented by one tab")


def mk(path, lines, pkg):
    header = ["#" * 80, "#", f"# {pkg}", "#", "#" * 80]
    if lines[:5] != header:
        bad(path, 1, "the file starts with the standard 80-'#' header naming the package")
    prefix = pkg.upper().replace("-", "_") + "_"
    for n, line in enumerate(lines, 1):
        m = re.match(r"^([A-Z0-9_]+)\s*(\+=|:=|\?=|=)", line)
        if m and not m.group(1).startswith(prefix):
            bad(path, n, f"variable {m.group(1)} does not start with {prefix}")
        m = re.match(r"^define\s+([A-Z0-9_]+)", line)
        if m and not m.group(1).startswith(prefix):
            bad(path, n, f"define {m.group(1)} does not start with {prefix}")


def hashfile(path, lines):
    for n, line in enumerate(lines, 1):
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(\w+)  ([0-9a-f]+)  (\S+)$", line)
        if not m:
            bad(path, n, "expected '<type>  <hex>  <file>' separated by two spaces")
            continue
        kind, digest, _ = m.groups()
        if kind not in HASH_LEN:
            bad(path, n, f"unknown hash type {kind}")
        elif len(digest) != HASH_LEN[kind]:
            bad(path, n, f"{kind} has {HASH_LEN[kind]} hex digits, not {len(digest)}")


def main():
    files = sorted(p for p in ROOT.rglob("*") if p.is_file() and p.suffix != ".md")
    for path in files:
        text = path.read_text()
        lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
        common(path, lines, text)
        if path.name == "Config.in":
            config_in(path, lines)
        elif path.suffix == ".mk" and path.parent.parent.name == "package":
            mk(path, lines, path.stem)
        elif path.suffix == ".hash":
            hashfile(path, lines)
    for p in problems:
        print(p)
    print(f"buildroot style: {len(files)} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
