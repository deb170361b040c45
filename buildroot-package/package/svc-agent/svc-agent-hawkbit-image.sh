#!/bin/sh
# An image that joins an Eclipse hawkBit (or gooseBit) fleet (docs/hawkbit.md "From the
# image"). One implementation for the Yocto layer (its svc-hawkbit image class) and the
# Buildroot package; both keep an identical copy of this file.
#
#   svc-agent-hawkbit-image.sh ROOT UNITDIR STATE_DIR NAME_PREFIX
#
# reads SVC_HAWKBIT_URL, _TENANT, _CONTROLLER_ID (default @machine-id), _AUTH (default
# target-token), _AUTO_CONFIRM (1/y: consent at once) and _TOKEN_FILE (a build-host path) from
# the environment. None of URL, tenant and token file set: nothing is written. All three: the
# image gets
#   ROOT/etc/svc-hawkbit.token                          the token, 0600 (root's: the caller
#                                                       runs under fakeroot/pseudo or lists it
#                                                       in its permissions table)
#   ROOT/UNITDIR/svc-agent.service.d/hawkbit.conf       a drop-in (0644, no secret in it):
#       before the first start that finds no mark, the agent runs `svc-agent hawkbit join`
#       (the install command's own step) with these settings and that token file; the mark
#       STATE_DIR/hawkbit-image-joined keeps later starts from undoing what the fleet's config
#       says since. A failed join (its reason in the journal) does not stop the agent; the
#       next start tries again.
# Anything else is refused, naming the setting (NAME_PREFIX + URL, ...), before anything is
# written. The token is never printed: its file is copied, not read into a variable.
set -eu
[ $# -eq 4 ] || { echo "usage: $0 ROOT UNITDIR STATE_DIR NAME_PREFIX" >&2; exit 2; }
root=$1 unitdir=$2 state=$3 name=$4
die() { echo "svc-agent hawkBit settings: $*" >&2; exit 1; }

url=${SVC_HAWKBIT_URL:-} tenant=${SVC_HAWKBIT_TENANT:-} token=${SVC_HAWKBIT_TOKEN_FILE:-}
id=${SVC_HAWKBIT_CONTROLLER_ID:-@machine-id} auth=${SVC_HAWKBIT_AUTH:-target-token}
n=0
for v in "$url" "$tenant" "$token"; do [ -z "$v" ] || n=$((n + 1)); done
[ "$n" = 0 ] && exit 0
[ "$n" = 3 ] || die "${name}URL, ${name}TENANT and ${name}TOKEN_FILE go together: $n of 3 are set"

# Each value becomes a word of a unit's command line: no quote, space, `%` (a systemd
# specifier) or `$` can reach it. The agent's own validator checks the rest on the device.
case "$url" in
http://* | https://*) ;;
*) die "${name}URL must start with https:// (or, explicitly, http://): '$url'" ;;
esac
case "${url#*://}" in
"" | *[!]A-Za-z0-9._~:/[-]*) die "${name}URL may hold only A-Z a-z 0-9 . _ ~ : / [ ] - after the scheme: '$url'" ;;
esac
case "$tenant" in
"" | *[!A-Za-z0-9._~:-]*) die "${name}TENANT must be 1 to 128 of A-Z a-z 0-9 - . _ ~ : ('$tenant')" ;;
esac
[ "${#tenant}" -le 128 ] || die "${name}TENANT is longer than 128 characters"
case "$id" in
@machine-id | @hostname) ;;
"" | *[!A-Za-z0-9._~:-]*) die "${name}CONTROLLER_ID must be @machine-id, @hostname or 1 to 128 of A-Z a-z 0-9 - . _ ~ : ('$id')" ;;
esac
[ "${#id}" -le 128 ] || die "${name}CONTROLLER_ID is longer than 128 characters"
case "$auth" in
target-token | gateway-token) ;;
*) die "${name}AUTH must be target-token or gateway-token ('$auth')" ;;
esac
confirm=
case "${SVC_HAWKBIT_AUTO_CONFIRM:-}" in
1 | y | yes) confirm=" --auto-confirm" ;;
"" | 0 | n | no) ;;
*) die "${name}AUTO_CONFIRM must be 1 or empty" ;;
esac
case "$token" in
/*) ;;
*) die "${name}TOKEN_FILE must be an absolute path on the build host: '$token'" ;;
esac
if [ ! -f "$token" ] || [ ! -r "$token" ]; then die "${name}TOKEN_FILE $token is not a readable file"; fi
size=$(wc -c <"$token")
if [ "$size" -eq 0 ] || [ "$size" -gt 4096 ]; then die "${name}TOKEN_FILE $token must hold one token (1 to 4096 bytes)"; fi

# The token: never readable by others, not even for a moment (umask before the copy).
dest=$root/etc/svc-hawkbit.token
mkdir -p "$root/etc"
rm -f "$dest"
(umask 077 && cp "$token" "$dest")
chmod 0600 "$dest"
[ "$(id -u)" != 0 ] || chown 0:0 "$dest"

dropin=$root$unitdir/svc-agent.service.d
mkdir -p "$dropin"
cat >"$dropin/hawkbit.conf.tmp" <<EOF
# Written by svc-agent-hawkbit-image.sh (docs/hawkbit.md "From the image"): the image joins the
# hawkBit fleet below at the agent's first start, with the token file the image carries
# (/etc/svc-hawkbit.token, 0600). The mark $state/hawkbit-image-joined keeps later
# starts from undoing what the fleet's own config says since; a failed join is in the journal
# and is tried again at the next start.
[Service]
ExecStartPre=-/bin/sh -c 'test -e $state/hawkbit-image-joined || { $state/bin/svc-agent hawkbit join --url $url --tenant $tenant --controller-id $id --auth $auth$confirm --token-file /etc/svc-hawkbit.token && touch $state/hawkbit-image-joined; }'
EOF
chmod 0644 "$dropin/hawkbit.conf.tmp"
mv -f "$dropin/hawkbit.conf.tmp" "$dropin/hawkbit.conf"
echo "svc-agent: the image joins the hawkBit fleet $url (tenant $tenant, controller id $id, $auth)"
