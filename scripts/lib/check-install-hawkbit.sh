#!/bin/sh
# install.sh with the hawkBit variables, on this host in a temporary root (SVC_INSTALL_ROOT):
# the release served on loopback, the spec §4 shape (variables inside the root shell). Checks
# the token file (0600, the token), the cached config's hawkbit section (the controller id
# rule resolved from the root's /etc/machine-id), the token in no output and in no file others
# may read; and that without the variables nothing of hawkBit is written.
#   check-install-hawkbit.sh AGENT_BINARY    (prints ok/FAIL lines; exit 1 when one failed)
set -u
[ $# -eq 1 ] && [ -x "$1" ] || { echo "usage: $0 AGENT_BINARY" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
agent=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
fails=0
ok() { echo "ok   install.sh: $*"; }
bad() { fails=$((fails + 1)); echo "FAIL install.sh: $*"; }
T=$(mktemp -d)
srv=
cleanup() {
	[ -z "$srv" ] || kill "$srv" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

# The release: the binary under the name install.sh fetches, and its .sha256.
mkdir -p "$T/rel"
cp "$agent" "$T/rel/svc-agent-$(uname -m)"
(cd "$T/rel" && sha256sum "svc-agent-$(uname -m)" >"svc-agent-$(uname -m).sha256")
: >"$T/http.log" # made here: the server's own redirection happens in the child, later
python3 -u -m http.server --bind 127.0.0.1 --directory "$T/rel" 0 >"$T/http.log" 2>&1 &
srv=$!
# Wait for the server's line with its port (a deadline, not a sleep that hopes).
port=
i=0
while [ -z "$port" ] && [ "$i" -lt 300 ]; do
	port=$(sed -n 's/^Serving HTTP on .* port \([0-9]*\).*/\1/p' "$T/http.log")
	[ -n "$port" ] || { kill -0 "$srv" 2>/dev/null || break; i=$((i + 1)); sleep 0.1; }
done
[ -n "$port" ] || { bad "the loopback release server did not say its port within 30 s: $(cat "$T/http.log")"; exit 1; }

# run ROOT ASSIGNMENTS: install.sh as the spec writes it, the assignments inside the shell.
run() {
	mkdir -p "$1/etc"
	printf '0123456789abcdef0123456789abcdef\n' >"$1/etc/machine-id"
	env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin /bin/sh -c \
		"SVC_INSTALL_ROOT=$1 SVC_RELEASE_URL=http://127.0.0.1:$port $2; $(cat install.sh)" >"$T/out" 2>&1
}
t="install-hawkbit-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
R=$T/root
if run "$R" "SVC_HAWKBIT_URL=https://hawkbit.example.com SVC_HAWKBIT_TENANT=DEFAULT SVC_HAWKBIT_TOKEN=$t"; then
	ok "installed with SVC_HAWKBIT_* into a temporary root"
else
	sed 's/^/     /' "$T/out" | grep -vF -- "$t" | tail -n 8
	bad "install with SVC_HAWKBIT_* failed"
fi
tokf=$R/etc/svc-hawkbit.token
if [ "$(stat -c '%a %u' "$tokf" 2>/dev/null)" = "600 0" ] && [ "$(cat "$tokf")" = "$t" ]; then
	ok "the token file is 0600, root's, and holds the token"
else bad "the token file $tokf is not 0600 root's with the token ($(stat -c '%a %u' "$tokf" 2>&1))"; fi
if python3 -c 'import json, sys
h = json.load(open(sys.argv[1]))["agent"]["svc-agent"]["hawkbit"]
want = {"server_url": "https://hawkbit.example.com", "tenant": "DEFAULT", "controller_id": "0123456789abcdef0123456789abcdef", "auth": "target-token"}
sys.exit(any(h.get(k) != v for k, v in want.items()))' "$R/opt/svc/config.json" 2>/dev/null; then
	ok "the cached config has the hawkbit section, the controller id from /etc/machine-id"
else bad "the cached config $R/opt/svc/config.json lacks the hawkbit section the variables name"; fi
if [ -L "$R/opt/svc/bin/svc-agent" ] && [ -f "$R/etc/systemd/system/svc-agent.service" ]; then
	ok "the agent and its unit are installed"
else bad "no agent link or unit in the temporary root"; fi
leak=$(find "$R" -type f -perm -o=r -print0 | xargs -0r grep -lF -- "$t" 2>/dev/null | head -n 3)
if [ -z "$leak" ] && ! grep -qF -- "$t" "$T/out"; then
	ok "the token is in no output and in no file others may read"
else bad "the token leaked: ${leak:-into the output}"; fi

R=$T/root-plain
if run "$R" "SVC_UNPROVISIONED=1" && [ ! -e "$R/etc/svc-hawkbit.token" ] &&
	! grep -qs hawkbit "$R/opt/svc/config.json"; then
	ok "without SVC_HAWKBIT_* nothing of hawkBit is written"
else
	tail -n 5 "$T/out"
	bad "without SVC_HAWKBIT_* the install differs"
fi
[ "$fails" -eq 0 ]
