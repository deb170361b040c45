#!/bin/sh
# Writes the install.sh that a management app publishes as its install_url: the sources'
# install.sh with the app address and the release URL filled in, so that the spec's command
# needs only the three credentials (docs/packaging.md, "install.sh").
#   scripts/publish-install.sh --app-address URL --release-url URL [-o FILE]   (default: stdout)
# URL: https://..., or http://... / file:///dir (app address only) when meant so. Values with
# quotes, backslashes, `$`, backquotes or whitespace are refused: they land in shell code.
set -eu
cd "$(dirname "$0")/.."
die() { echo "publish-install: $*" >&2; exit 2; }
app="" rel="" out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--app-address) app=${2:?}; shift 2 ;;
	--release-url) rel=${2:?}; shift 2 ;;
	-o) out=${2:?}; shift 2 ;;
	*) die "usage: $0 --app-address URL --release-url URL [-o FILE]" ;;
	esac
done
[ -n "$app" ] && [ -n "$rel" ] || die "usage: $0 --app-address URL --release-url URL [-o FILE]"
check() { # NAME VALUE ALLOWED-SCHEMES
	case "$2" in
	*[\"\'\\\`\$[:space:]]*) die "$1 must not contain quotes, backslashes, \$, backquotes or whitespace" ;;
	esac
	for s in $3; do
		case "$2" in "$s"?*) return 0 ;; esac
	done
	die "$1 must start with one of: $3"
}
check --app-address "$app" "https:// http:// file:///"
check --release-url "$rel" "https:// http://"
rel=${rel%/}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# Exactly one line each, replaced whole; anything else means install.sh changed shape.
awk -v app="$app" -v rel="$rel" '
	$0 == "PUBLISHED_APP_ADDRESS=\"\"" { print "PUBLISHED_APP_ADDRESS=\"" app "\""; a++; next }
	$0 == "PUBLISHED_RELEASE_URL=\"\"" { print "PUBLISHED_RELEASE_URL=\"" rel "\""; r++; next }
	{ print }
	END { if (a != 1 || r != 1) exit 1 }
' install.sh >"$tmp" || die "install.sh has not exactly one empty PUBLISHED_APP_ADDRESS and PUBLISHED_RELEASE_URL line"
sh -n "$tmp" || die "the published script does not parse"
if [ -n "$out" ]; then
	chmod 0644 "$tmp"
	mv -f "$tmp" "$out"
else
	cat "$tmp"
fi
