#!/usr/bin/env python3
"""The lab's second version (`# lab-needs: v2`): copies of built binaries that say another version.

    tests/system/stamp-version.py VERSION OUT_DIR BINARY...

Prints the path of each copy (OUT_DIR/<name of BINARY>), one a line. The version is
compiled into a build as one constant (build.rs: SVC_VERSION), whose bytes stand in the
binary's read-only data in a handful of places: the `version --json` answer, the release
stamp the update engine reads from a download (`svc-release-stamp/1 ... version=V ...`),
the User-Agent and log lines. A copy with those bytes replaced is the build that
`SVC_BUILD_VERSION=VERSION` would make, minus a second compile of the package (54 s
x86_64, 86 s aarch64 on two cores, which the guests then lacked): the same code and a
different file (another sha256), which is all an update to it needs.

Refuses, naming the binary: a VERSION of another length than the built one (its bytes are
replaced in place, so that no offset moves), a binary whose version is not found where a
stamp must hold it, and a copy that does not then say VERSION both in its stamp and in
`version --json` (run here; an aarch64 copy runs through qemu-user's binfmt handler, as
run.sh's own `version --json` does).
"""
import json
import os
import re
import subprocess
import sys


def die(msg):
    print(f"stamp-version: ERROR: {msg}", file=sys.stderr)
    sys.exit(1)


def version_of(path):
    try:
        out = subprocess.run([path, "version", "--json"], check=True, capture_output=True,
                             timeout=120).stdout
        info = json.loads(out)
        return info["binary_name"], info["version"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        die(f"{path}: `version --json` did not answer: {e}")


def occurrences(data, version):
    """Offsets of VERSION not inside a longer version (no digit or dot either side)."""
    pat = re.compile(rb"(?<![0-9.])" + re.escape(version.encode()) + rb"(?![0-9.])")
    return [m.start() for m in pat.finditer(data)]


def stamp(name, version):
    return f"svc-release-stamp/1 binary_name={name} version={version} ".encode()


def main():
    if len(sys.argv) < 4:
        die("usage: stamp-version.py VERSION OUT_DIR BINARY...")
    new, out_dir, binaries = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", new):
        die(f"VERSION must be X.Y.Z, not {new!r}")
    os.makedirs(out_dir, exist_ok=True)
    for src in binaries:
        name, old = version_of(src)
        if len(old) != len(new):
            die(f"{src}: says {old}, of another length than {new} (replaced in place)")
        with open(src, "rb") as f:
            data = bytearray(f.read())
        if stamp(name, old) not in data:
            die(f"{src}: no release stamp for {name} {old}")
        offsets = occurrences(data, old)
        for at in offsets:
            data[at:at + len(old)] = new.encode()
        dst = os.path.join(out_dir, os.path.basename(src))
        tmp = f"{dst}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o755)
        os.replace(tmp, dst)
        if stamp(name, new) not in data or version_of(dst) != (name, new):
            die(f"{dst}: the copy does not say {name} {new}")
        print(f"stamp-version: {dst}: {name} {old} -> {new} ({len(offsets)} places)",
              file=sys.stderr)
        print(dst)


if __name__ == "__main__":
    main()
