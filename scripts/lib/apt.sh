# shellcheck shell=sh
# One way for every tier to install Debian packages, safe on the stock image of this machine
# kind: `. scripts/lib/apt.sh`, then
#
#   apt_need COMMAND PACKAGE...   queue PACKAGE... when COMMAND is not on PATH
#   apt_need_file FILE PACKAGE... queue PACKAGE... when FILE does not exist
#   apt_install_needed [PKG=VER...]  install the queue (plus pinned versions), then check
#
# apt may *remove* an installed package to resolve a conflict and still exit 0 (the stock
# image's qemu-utils from bookworm-backports Breaks bookworm's qemu-system-common, so apt
# removed it). Here apt runs with --no-remove, so it refuses instead, and afterwards every
# package installed before must still be installed and every queued command and file must be
# there; anything else fails loudly, naming what went missing. POSIX sh: sourced by sh and
# bash scripts alike.

APT_QUEUE=""
APT_CHECK_CMDS=""
APT_CHECK_FILES=""

apt_log() { echo "apt: $*" >&2; }

apt_need() {
	_cmd=$1
	shift
	APT_CHECK_CMDS="$APT_CHECK_CMDS $_cmd"
	command -v "$_cmd" >/dev/null 2>&1 || APT_QUEUE="$APT_QUEUE $*"
}

apt_need_file() {
	_file=$1
	shift
	APT_CHECK_FILES="$APT_CHECK_FILES $_file"
	[ -e "$_file" ] || APT_QUEUE="$APT_QUEUE $*"
}

# The installed packages, one "name:arch" a line, sorted.
apt_installed() {
	dpkg-query -W -f '${db:Status-Abbrev} ${Package}:${Architecture}\n' 2>/dev/null |
		awk '$1 == "ii" { print $2 }' | sort
}

# apt_get_install ARG...: apt-get install that never removes a package; one apt-get update
# and a second try when the first fails (stale or missing package lists).
# dpkg's lock held by someone else (a fresh machine's unattended-upgrades) is waited for.
apt_get_install() {
	if DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends --no-remove "$@" >&2; then
		return 0
	fi
	apt_log "install failed; apt-get update and one more try"
	apt-get -o DPkg::Lock::Timeout=600 update >&2 || return 1
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends --no-remove "$@" >&2
}

# apt_install_needed [EXTRA...]: installs the queued packages (and EXTRA, e.g. PKG=VERSION to
# line versions up) when anything is queued, then checks that nothing was removed and that
# every command and file asked for is present. Returns non-zero, having said why, otherwise.
apt_install_needed() {
	if [ -n "$APT_QUEUE" ]; then
		command -v apt-get >/dev/null 2>&1 || {
			apt_log "need$APT_QUEUE and there is no apt-get"
			return 1
		}
		_before=$(mktemp)
		_after=$(mktemp)
		# One install at a time: the test command runs tiers side by side, and apt refuses a
		# second run while dpkg's lock is held; the snapshots around it must see ours alone.
		{
			command -v flock >/dev/null 2>&1 && flock 9
			apt_installed >"$_before"
			apt_log "installing$APT_QUEUE${1:+ $*}"
			# shellcheck disable=SC2086 # the queue is a word list
			apt_get_install $APT_QUEUE "$@"
			_rc=$?
			apt_installed >"$_after"
		} 9>>/run/lock/svc-apt.lock
		_removed=$(comm -23 "$_before" "$_after" | tr '\n' ' ')
		rm -f "$_before" "$_after"
		if [ -n "$_removed" ]; then
			apt_log "ERROR: installing$APT_QUEUE removed installed packages: $_removed"
			return 1
		fi
		if [ "$_rc" != 0 ]; then
			apt_log "ERROR: apt-get install$APT_QUEUE failed"
			return 1
		fi
		APT_QUEUE=""
	fi
	_missing=""
	for _c in $APT_CHECK_CMDS; do
		command -v "$_c" >/dev/null 2>&1 || _missing="$_missing $_c"
	done
	for _f in $APT_CHECK_FILES; do
		[ -e "$_f" ] || _missing="$_missing $_f"
	done
	if [ -n "$_missing" ]; then
		apt_log "ERROR: still missing after the install:$_missing"
		return 1
	fi
	return 0
}

# apt_candidate PACKAGE: the version apt would install, or nothing.
apt_candidate() {
	apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '^(none)$'
}
