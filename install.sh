#!/bin/sh
# svc-agent installer. Usage (as root):
#   export SVC_APP_ADDRESS=https://.. SVC_PART_ID=.. SVC_API_KEY_ID=..
#   read -r SVC_API_KEY && export SVC_API_KEY       # typed or pasted: not in shell history
#   curl -fsSL https://…/install.sh | sudo -E sh
#   sh install.sh --uninstall        (or SVC_UNINSTALL=1)
# Credentials come from the environment only, never from the command line (ps-visible).
# SVC_RELEASE_URL overrides where svc-agent-<arch> and svc-agent-<arch>.sha256 are fetched from.
set -eu

RELEASE_URL="${SVC_RELEASE_URL:-https://releases.example.invalid/svc-agent/stable}"
CREDS="${SVC_CREDENTIALS_PATH:-/etc/svc.json}"
AGENT=/opt/svc/bin/svc-agent

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
		"$AGENT" uninstall --purge || die "svc-agent uninstall failed"
	fi
	rm -f "$CREDS" /etc/systemd/system/svc-agent.service
	rm -rf /opt/svc
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

if [ -n "${SVC_API_KEY_ID:-}" ] && [ -n "${SVC_API_KEY:-}" ] && [ -n "${SVC_PART_ID:-}" ]; then
	[ -n "${SVC_APP_ADDRESS:-}" ] || die "SVC_APP_ADDRESS is required with the credentials (https://..., or file:///dir)"
	addr=$(json_escape "$SVC_APP_ADDRESS")
	part=$(json_escape "$SVC_PART_ID")
	kid=$(json_escape "$SVC_API_KEY_ID")
	key=$(json_escape "$SVC_API_KEY")
	(
		umask 077
		cat >"$TMP/svc.json" <<JSON
{"cloud":{"app_address":"$addr","id":"$part","api_key":{"id":"$kid","key":"$key"}}}
JSON
	)
	if [ -f "$CREDS" ] && cmp -s "$TMP/svc.json" "$CREDS"; then
		info "$CREDS unchanged"
	else
		mkdir -p "$(dirname "$CREDS")"
		mv -f "$TMP/svc.json" "$CREDS.tmp.$$"
		chmod 0600 "$CREDS.tmp.$$"
		mv -f "$CREDS.tmp.$$" "$CREDS"
		info "wrote $CREDS"
	fi
elif [ -f "$CREDS" ]; then
	info "keeping existing $CREDS"
else
	info "warning: no credentials (SVC_API_KEY_ID, SVC_API_KEY, SVC_PART_ID) and no $CREDS; the agent starts unprovisioned"
fi

"$TMP/svc-agent" install || die "svc-agent install failed"
info "svc-agent installed; logs: journalctl -u svc-agent"
