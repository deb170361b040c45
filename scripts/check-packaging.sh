#!/bin/sh
# Packaging test tier: shellcheck, systemd unit verification, static musl builds (via
# scripts/build-static.sh), static-link assertions, aarch64 smoke run under qemu, size budget.
# Prints "packaging: N passed, M failed"; exit status 1 when anything failed.
set -u
cd "$(dirname "$0")/.." || exit 2
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }

# Tools (idempotent: only installs what is missing).
need=""
command -v shellcheck >/dev/null 2>&1 || need="$need shellcheck"
command -v file >/dev/null 2>&1 || need="$need file"
command -v readelf >/dev/null 2>&1 || need="$need binutils"
command -v qemu-aarch64-static >/dev/null 2>&1 || need="$need qemu-user-static"
command -v systemd-analyze >/dev/null 2>&1 || need="$need systemd"
if [ -n "$need" ]; then
	# shellcheck disable=SC2086 # word splitting of the package list is intended
	apt-get update -qq && apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

# 1. shellcheck every shell script in the repository.
for f in $(git ls-files '*.sh'); do
	if shellcheck -s sh -f gcc "$f"; then ok "shellcheck $f"; else bad "shellcheck $f"; fi
done

# 2. systemd-analyze verify against a staged root; any output is a failure.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/usr/lib/systemd/system" "$T/opt/svc/bin"
cp /lib/systemd/system/*.target "$T/usr/lib/systemd/system/" 2>/dev/null
cp dist/svc-agent.service "$T/usr/lib/systemd/system/"
printf '#!/bin/sh\n' >"$T/opt/svc/bin/svc-agent"
chmod 0755 "$T/opt/svc/bin/svc-agent"
if out=$(systemd-analyze verify --root="$T" svc-agent.service 2>&1) && [ -z "$out" ]; then ok "systemd-analyze verify"; else bad "systemd-analyze verify: $out"; fi

# 3. Static builds through the lab's build script.
if [ ! -x scripts/build-static.sh ]; then
	bad "scripts/build-static.sh missing (provided by the lab branch)"
elif ! scripts/build-static.sh all --profile dist; then
	bad "scripts/build-static.sh all --profile dist"
else
	ok "static builds"
	for t in x86_64 aarch64; do
		b="target/$t-unknown-linux-musl/dist/svc-agent"
		if [ ! -f "$b" ]; then bad "$b missing"; continue; fi
		if readelf -lW "$b" | grep -q INTERP || readelf -dW "$b" | grep -q NEEDED; then
			bad "$b is dynamically linked"
		else ok "$b static ($(file -b "$b" | cut -d, -f1-4))"; fi
	done
	b=target/x86_64-unknown-linux-musl/dist/svc-agent
	if [ -f "$b" ]; then
		sz=$(stat -c %s "$b")
		if [ "$sz" -lt 4194304 ]; then ok "x86_64 size $sz < 4 MiB"; else bad "x86_64 size $sz >= 4 MiB"; fi
	fi
	b=target/aarch64-unknown-linux-musl/dist/svc-agent
	if [ -f "$b" ] && qemu-aarch64-static "$b" version --json | grep -q '"target":"aarch64-unknown-linux-musl"'; then
		ok "aarch64 version --json under qemu"
	else bad "aarch64 version --json under qemu"; fi
fi

echo "packaging: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
