#!/bin/sh
# The hawkBit drop-in an image gets (dist/svc-agent-hawkbit-image.sh) does what it says, run
# as systemd runs its ExecStartPre, by the real agent, in a private mount namespace whose /etc
# is the image's: the first start joins (the token 0600 in the credentials directory, the
# hawkbit section with the controller id from the image's /etc/machine-id, the mark); a later
# start finds the mark and leaves the config the fleet changed since alone; without the token
# the join fails, leaves no mark and writes nothing.
#   check-hawkbit-dropin.sh AGENT_BINARY    (as root; ok/FAIL lines; exit 1 when one failed)
set -u
[ $# -eq 1 ] && [ -x "$1" ] || { echo "usage: $0 AGENT_BINARY" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
fails=0
ok() { echo "ok   hawkBit drop-in: $*"; }
bad() { fails=$((fails + 1)); echo "FAIL hawkBit drop-in: $*"; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
state=$T/data/svc creds=$T/data/etc img=$T/image
mkdir -p "$state/bin" "$creds" "$img/etc"
cp "$1" "$state/bin/svc-agent"
printf 'fedcba9876543210fedcba9876543210\n' >"$img/etc/machine-id"
t="dropin-hawkbit-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
(umask 077 && printf '%s\n' "$t" >"$T/token")
SVC_HAWKBIT_URL=https://hawkbit.example.com SVC_HAWKBIT_TENANT=DEFAULT SVC_HAWKBIT_AUTH=gateway-token \
	SVC_HAWKBIT_TOKEN_FILE=$T/token sh dist/svc-agent-hawkbit-image.sh "$img" /usr/lib/systemd/system "$state" SVC_HAWKBIT_ >/dev/null ||
	{ bad "dist/svc-agent-hawkbit-image.sh refused the settings"; exit 1; }
cmd=$(sed -n 's/^ExecStartPre=-//p' "$img/usr/lib/systemd/system/svc-agent.service.d/hawkbit.conf")
[ -n "$cmd" ] || { bad "no ExecStartPre in the drop-in"; exit 1; }
# start: the command line as systemd runs it (its quoting is the shell's for this line), with
# the data-partition environment, /etc the image's.
start() {
	unshare --mount --propagation private sh -c 'mount --bind "$1" /etc && shift && exec env -i PATH=/usr/bin:/bin \
		SVC_STATE_DIR="$1" SVC_CREDENTIALS_DIR="$2" sh -c "$3"' start "$img/etc" "$state" "$creds" "$cmd" >>"$T/out" 2>&1
}
if start && [ "$(stat -c '%a %u' "$creds/svc-hawkbit.token" 2>/dev/null)" = "600 0" ] &&
	[ "$(cat "$creds/svc-hawkbit.token")" = "$t" ] && [ -e "$state/hawkbit-image-joined" ] &&
	python3 -c 'import json, sys
h = json.load(open(sys.argv[1]))["agent"]["svc-agent"]["hawkbit"]
sys.exit(not (h["server_url"] == "https://hawkbit.example.com" and h["tenant"] == "DEFAULT" and h["auth"] == "gateway-token" and h["controller_id"] == "fedcba9876543210fedcba9876543210"))' "$state/config.json"; then
	ok "the first start joins: token 0600 in the credentials directory, the hawkbit section, the mark"
else
	tail -n 5 "$T/out"
	bad "the first start did not join as the settings say"
fi
# The fleet's config moves the device to another tenant; the next start must keep it.
sed -i 's/"DEFAULT"/"moved-by-the-fleet"/' "$state/config.json"
if start && grep -q '"moved-by-the-fleet"' "$state/config.json"; then
	ok "a later start finds the mark and keeps what the fleet's config says"
else bad "a later start joined again over the fleet's config"; fi
rm -rf "$state/hawkbit-image-joined" "$state/config.json" "$creds/svc-hawkbit.token" "$img/etc/svc-hawkbit.token"
if ! start && [ ! -e "$state/hawkbit-image-joined" ] && [ ! -e "$state/config.json" ] && [ ! -e "$creds/svc-hawkbit.token" ]; then
	ok "without the token file the join fails (systemd's '-' lets the agent start), no mark, nothing written"
else bad "without the token file the start left a mark or files"; fi
if grep -qF -- "$t" "$T/out" "$img/usr/lib/systemd/system/svc-agent.service.d/hawkbit.conf"; then
	bad "the token is in the drop-in or the join's output"
else ok "the token is neither in the drop-in nor in the join's output"; fi
[ "$fails" -eq 0 ]
