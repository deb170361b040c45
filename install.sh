#!/bin/sh
# svc-agent installer (spec section 4). As the spec writes it, with the machine's credentials
# as plain shell variables inside the root shell (not exported, not before `sudo`):
#   sudo /bin/sh -c "SVC_API_KEY_ID=<key id> SVC_API_KEY=<key> SVC_PART_ID=<part id>; $(curl -fsSL <install_url>)"
# or, with the credentials file /etc/svc.json placed on the machine beforehand:
#   sudo /bin/sh -c "$(curl -fsSL <install_url>)"
# `curl -fsSL <install_url> | sudo sh` and `sh install.sh` (as root) work the same way; the
# variables may also come exported. `sh install.sh --uninstall` (or SVC_UNINSTALL=1) removes it.
#
# The app address and the release URL are written into the published copy of this script
# (scripts/publish-install.sh fills PUBLISHED_* below), so the spec's three variables are all a
# user supplies; SVC_APP_ADDRESS and SVC_RELEASE_URL override them. Without credentials and
# without /etc/svc.json the script refuses (variables put before `sudo` are dropped by sudo's
# env_reset, and that must not end in a silently unprovisioned machine); SVC_UNPROVISIONED=1
# installs anyway, for machines provisioned later through the agent's hotspot portal.
# The credentials are written 0600 by the shell itself and are never a process argument here.
#
# A hawkBit fleet (docs/hawkbit.md) in the same shape, the token a plain shell variable too:
#   sudo /bin/sh -c "SVC_HAWKBIT_URL=<server> SVC_HAWKBIT_TENANT=<tenant> SVC_HAWKBIT_TOKEN=<token>; $(curl -fsSL <install_url>)"
# with SVC_HAWKBIT_CONTROLLER_ID (default @machine-id: /etc/machine-id; @hostname, or an id)
# and SVC_HAWKBIT_AUTH (target-token, the default, or gateway-token). The machine then needs
# no management-app credentials. The token reaches `svc-agent hawkbit join` on its standard
# input (a shell builtin's output), never as an argument; the agent writes it 0600.
set -eu

# Filled in when the script is published (scripts/publish-install.sh); empty in the sources.
PUBLISHED_APP_ADDRESS=""
PUBLISHED_RELEASE_URL=""

RELEASE_URL="${SVC_RELEASE_URL:-$PUBLISHED_RELEASE_URL}"
APP_ADDRESS="${SVC_APP_ADDRESS:-$PUBLISHED_APP_ADDRESS}"
# SVC_INSTALL_ROOT=DIR (checks and sandboxes, not devices): every path under DIR, the agent's
# own `--root DIR`; systemd is then left alone (the agent enables its unit only at /).
ROOT="${SVC_INSTALL_ROOT:-}"
ROOT_ARGS=""
[ -z "$ROOT" ] || ROOT_ARGS="--root $ROOT"
case "$ROOT" in
*[!A-Za-z0-9._/-]*) echo "install.sh: error: SVC_INSTALL_ROOT must be a plain path" >&2 && exit 1 ;;
esac
CREDS="${SVC_CREDENTIALS_PATH:-$ROOT/etc/svc.json}"
AGENT=$ROOT/opt/svc/bin/svc-agent

die() { echo "install.sh: error: $*" >&2; exit 1; }
info() { echo "install.sh: $*" >&2; }

# Escape a value for a JSON string: backslash, double quote, control characters are refused.
json_escape() {
	case "$1" in
	*[[:cntrl:]]*) die "credential values must not contain control characters" ;;
	esac
	printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g'
}

uninstall() {
	if [ -x "$AGENT" ]; then
		# shellcheck disable=SC2086 # ROOT_ARGS: none, or --root and a plain path
		"$AGENT" uninstall --purge $ROOT_ARGS || die "svc-agent uninstall failed"
	fi
	rm -f "$CREDS" "$ROOT/etc/systemd/system/svc-agent.service"
	rm -rf "$ROOT/opt/svc"
	info "svc-agent removed"
}

[ "$(uname -s)" = Linux ] || die "svc-agent runs on Linux only (found $(uname -s))"
case "$(uname -m)" in
x86_64 | amd64) ARCH=x86_64 ;;
aarch64 | arm64) ARCH=aarch64 ;;
*) die "unsupported CPU $(uname -m): svc-agent ships for x86_64 and aarch64 only" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root"

if [ "${1:-}" = "--uninstall" ] || [ "${SVC_UNINSTALL:-}" = 1 ]; then
	uninstall
	exit 0
fi

# hawkBit: all three or none, decided before anything is downloaded or installed.
hb=0
for v in "${SVC_HAWKBIT_URL:-}" "${SVC_HAWKBIT_TENANT:-}" "${SVC_HAWKBIT_TOKEN:-}"; do
	[ -z "$v" ] || hb=$((hb + 1))
done
[ "$hb" = 0 ] || [ "$hb" = 3 ] || die "SVC_HAWKBIT_URL, SVC_HAWKBIT_TENANT and SVC_HAWKBIT_TOKEN go together: $hb of 3 are set"
case "${SVC_HAWKBIT_TOKEN:-}" in
*[[:cntrl:]]* | *" "*) die "SVC_HAWKBIT_TOKEN must be one token of printable characters" ;;
esac

# What the credentials will be, decided before anything is downloaded or installed.
have=0
for v in "${SVC_API_KEY_ID:-}" "${SVC_API_KEY:-}" "${SVC_PART_ID:-}"; do
	[ -z "$v" ] || have=$((have + 1))
done
if [ "$have" = 3 ]; then
	MODE="write"
	[ -n "$APP_ADDRESS" ] || die "no app address: this copy of install.sh was not published (scripts/publish-install.sh) and SVC_APP_ADDRESS is not set"
	case "$APP_ADDRESS" in
	https://* | http://* | file:///*) ;;
	*) die "the app address must be https://... (http://... or file:///dir when meant so), not '$APP_ADDRESS'" ;;
	esac
elif [ "$have" != 0 ]; then
	die "SVC_API_KEY_ID, SVC_API_KEY and SVC_PART_ID go together: $have of 3 are set"
elif [ -f "$CREDS" ]; then
	MODE="keep"
elif [ "${SVC_UNPROVISIONED:-}" = 1 ]; then
	MODE="none"
elif [ "$hb" = 3 ]; then
	MODE="hawkbit-only"
else
	die "no credentials: set SVC_API_KEY_ID, SVC_API_KEY and SVC_PART_ID inside the root shell (sudo /bin/sh -c \"SVC_API_KEY_ID=... SVC_API_KEY=... SVC_PART_ID=...; \$(curl -fsSL URL)\"; variables before sudo are dropped), or place $CREDS first, or set SVC_UNPROVISIONED=1 to provision through the hotspot portal later"
fi
[ -n "$RELEASE_URL" ] || die "no release URL: this copy of install.sh was not published (scripts/publish-install.sh) and SVC_RELEASE_URL is not set"

command -v curl >/dev/null 2>&1 || die "curl is required (install it with your package manager)"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum is required"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

# An https release URL is fetched over https only, on every redirect hop too (curl would
# otherwise follow https -> http); an explicit http:// URL (a lab, a factory LAN) stays on
# http. Nothing else is fetched.
case "$RELEASE_URL" in
https://*) PROTO="=https" ;;
http://*) PROTO="=http" ;;
*) die "SVC_RELEASE_URL must start with https:// (or, explicitly, http://)" ;;
esac
fetch() { curl -fsSL --proto "$PROTO" --proto-redir "$PROTO" -o "$1" "$2"; }
fetch "$TMP/svc-agent" "$RELEASE_URL/svc-agent-$ARCH" || die "download of $RELEASE_URL/svc-agent-$ARCH failed"
fetch "$TMP/svc-agent.sha256" "$RELEASE_URL/svc-agent-$ARCH.sha256" || die "download of the .sha256 failed"
want=$(cut -d' ' -f1 <"$TMP/svc-agent.sha256")
got=$(sha256sum "$TMP/svc-agent" | cut -d' ' -f1)
if [ -z "$want" ] || [ "$want" != "$got" ]; then die "checksum mismatch: expected $want, got $got"; fi
chmod 0755 "$TMP/svc-agent"

case "$MODE" in
write)
	addr=$(json_escape "$APP_ADDRESS")
	part=$(json_escape "$SVC_PART_ID")
	kid=$(json_escape "$SVC_API_KEY_ID")
	key=$(json_escape "$SVC_API_KEY")
	# Nothing started from here on needs the key: keep it out of every child's environment.
	unset SVC_API_KEY
	(
		umask 077
		cat >"$TMP/svc.json" <<JSON
{"cloud":{"app_address":"$addr","id":"$part","api_key":{"id":"$kid","key":"$key"}}}
JSON
	)
	key=""
	if [ -f "$CREDS" ] && cmp -s "$TMP/svc.json" "$CREDS"; then
		info "$CREDS unchanged"
	else
		mkdir -p "$(dirname "$CREDS")"
		mv -f "$TMP/svc.json" "$CREDS.tmp.$$"
		chmod 0600 "$CREDS.tmp.$$"
		mv -f "$CREDS.tmp.$$" "$CREDS"
		info "wrote $CREDS"
	fi
	;;
keep)
	# A file placed by hand may have been made readable to others: the agent wants 0600 root.
	chown 0:0 "$CREDS" && chmod 0600 "$CREDS" || die "cannot make $CREDS 0600 root"
	info "keeping existing $CREDS"
	;;
none) info "warning: no credentials (SVC_UNPROVISIONED=1): provision the machine through the agent's hotspot portal" ;;
hawkbit-only) info "no management-app credentials: the update server is hawkBit" ;;
esac

if [ "$hb" = 3 ]; then
	# Before the service starts, so that its first poll goes to the fleet's server.
	# shellcheck disable=SC2086 # ROOT_ARGS: none, or --root and a plain path
	printf '%s\n' "$SVC_HAWKBIT_TOKEN" | "$TMP/svc-agent" hawkbit join $ROOT_ARGS \
		--url "$SVC_HAWKBIT_URL" --tenant "$SVC_HAWKBIT_TENANT" \
		--controller-id "${SVC_HAWKBIT_CONTROLLER_ID:-@machine-id}" \
		--auth "${SVC_HAWKBIT_AUTH:-target-token}" --token-file - ||
		die "svc-agent hawkbit join failed (its message above)"
	unset SVC_HAWKBIT_TOKEN
fi

# shellcheck disable=SC2086 # ROOT_ARGS: none, or --root and a plain path
"$TMP/svc-agent" install $ROOT_ARGS || die "svc-agent install failed"
info "svc-agent installed; logs: journalctl -u svc-agent"
