#!/bin/bash
# The guest is a real systemd machine and the static binaries run on it.
# Needs: `svc-agent version --json` (binary_name, version, target).
# lab-timeout: 300
# lab-arches: amd64 arm64
set -euo pipefail
. "$LAB/lab-lib.sh"

lab_check "PID 1 is systemd" test "$(cat /proc/1/comm)" = systemd
lab_check "systemd manages the system" test -d /run/systemd/system
lab_log "$(systemctl --version | head -n1)"

failed_units="$(systemctl --failed --no-legend --plain | awk '{print $1}')"
[ -z "$failed_units" ] || lab_fail "failed units at boot: $failed_units"
lab_log "ok: no failed units"

# journald: a line sent through the journal comes back out of it.
token="boot-smoke-$(lab_run_id)"
echo "$token" | systemd-cat -t lab-smoke -p info
lab_wait 30 "journald returns the line" sh -c "journalctl -b -t lab-smoke -o cat --no-pager | grep -qx '$token'"
lab_check "journal is persistent (/var/log/journal)" sh -c 'ls /var/log/journal/*/system.journal >/dev/null'

lab_check "NetworkManager is running" systemctl is-active --quiet NetworkManager

# The static agent: runs on a stock Debian userland and reports the right identity.
has_interp() { # ELF64 program headers: PT_INTERP (3) means a dynamic binary
    python3 - "$1" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
if d[:4] != b"\x7fELF" or d[4] != 2:
    sys.exit(2)
phoff = struct.unpack_from("<Q", d, 0x20)[0]
phentsize, phnum = struct.unpack_from("<HH", d, 0x36)
types = [struct.unpack_from("<I", d, phoff + i * phentsize)[0] for i in range(phnum)]
sys.exit(0 if 3 in types else 1)
PY
}
for b in svc-agent svc-server; do
    rc=0; has_interp "/lab/bin/$b" || rc=$?
    lab_check "$b is a static ELF64 (no program interpreter)" test "$rc" = 1
done
version_json="$(svc-agent version --json)"
lab_log "svc-agent version --json: $version_json"
python3 - "$version_json" "$LAB_SHARE/expected-agent-version.json" "$(uname -m)" <<'PY'
import json, sys
got = json.loads(sys.argv[1])
expected = json.load(open(sys.argv[2]))
machine = sys.argv[3]
for key in ("binary_name", "version", "target"):
    if key not in got:
        sys.exit(f"missing key {key!r} in {got}")
if got["binary_name"] != "svc-agent":
    sys.exit(f"binary_name is {got['binary_name']!r}")
if got["target"] != f"{machine}-unknown-linux-musl":
    sys.exit(f"target is {got['target']!r}, the guest is {machine} and the binary static musl")
if got != expected:
    sys.exit(f"guest says {got}, host says {expected}")
print("version json matches the host's")
PY
lab_check "svc-server answers version --json" sh -c 'svc-server version --json | grep -q "\"binary_name\":\"svc-server\""'
