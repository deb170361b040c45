# shellcheck shell=sh
# The Rust toolchain pin (rust-toolchain.toml, `channel = "X.Y.Z"`), honoured without a
# download: `. scripts/lib/toolchain.sh; toolchain_ensure REPO_ROOT` before any cargo runs in
# the repository.
#
# rustup runs cargo/rustc in the repository with the toolchain named `X.Y.Z-HOST`. A machine
# whose rustup has that toolchain uses it. A machine whose installed stable (or any other
# installed toolchain) *is* X.Y.Z but is not installed under that name gets the name as an
# alias: a link in rustup's toolchains folder to that toolchain (rustup's `toolchain link`
# refuses official names, so the link is made directly; `rustup toolchain uninstall X.Y.Z`
# removes it). A machine with neither gets an error naming the pinned version and what is
# installed, at once: rustup's automatic installation is switched off for the scripts, so
# no download is tried (none is reachable here). Without rustup, rustc on PATH must be X.Y.Z.
# POSIX sh: sourced by sh and bash scripts alike.

toolchain_log() { echo "toolchain: $*" >&2; }

# The pinned version: the `channel` of rust-toolchain.toml under $1.
toolchain_pin() {
	sed -n 's/^[[:space:]]*channel[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$1/rust-toolchain.toml" 2>/dev/null | head -n1
}

# The version an installed toolchain's rustc prints (`1.95.0`, `1.97.0-nightly`), or nothing.
toolchain_version_of() {
	rustup run "$1" rustc --version 2>/dev/null | cut -d' ' -f2
}

toolchain_ensure() {
	_tc_root=${1:-.}
	_tc_pin=$(toolchain_pin "$_tc_root")
	if [ -z "$_tc_pin" ]; then
		toolchain_log "no channel in $_tc_root/rust-toolchain.toml"
		return 1
	fi
	# Never a silent download attempt: a missing toolchain is an error.
	RUSTUP_AUTO_INSTALL=0
	export RUSTUP_AUTO_INSTALL
	if ! command -v rustup >/dev/null 2>&1; then
		_tc_have=$(rustc --version 2>/dev/null | cut -d' ' -f2)
		[ "$_tc_have" = "$_tc_pin" ] && return 0
		toolchain_log "this repository pins Rust $_tc_pin (rust-toolchain.toml); rustc on PATH is ${_tc_have:-missing} and there is no rustup"
		return 1
	fi
	_tc_have=$(toolchain_version_of "$_tc_pin")
	if [ "$_tc_have" = "$_tc_pin" ]; then
		return 0
	fi
	if [ -n "$_tc_have" ]; then
		toolchain_log "the toolchain named $_tc_pin prints rustc $_tc_have, not $_tc_pin: fix or remove it (rustup toolchain uninstall $_tc_pin)"
		return 1
	fi
	# Installed toolchains, stable first: one whose rustc is exactly the pinned version
	# (not a nightly or beta of it) is linked under the pinned name.
	_tc_all=$(rustup toolchain list 2>/dev/null | cut -d' ' -f1 | grep -- '-')
	_tc_list="$(echo "$_tc_all" | grep '^stable-') $(echo "$_tc_all" | grep -v '^stable-')"
	_tc_seen=""
	for _tc in $_tc_list; do
		_tc_v=$(toolchain_version_of "$_tc")
		_tc_seen="$_tc_seen $_tc=${_tc_v:-?}"
		[ "$_tc_v" = "$_tc_pin" ] || continue
		_tc_sysroot=$(rustup run "$_tc" rustc --print sysroot 2>/dev/null) || continue
		_tc_host=$(rustup run "$_tc" rustc -vV 2>/dev/null | sed -n 's/^host: //p')
		_tc_home=$(rustup show home 2>/dev/null) || _tc_home=${RUSTUP_HOME:-$HOME/.rustup}
		_tc_link="$_tc_home/toolchains/$_tc_pin-$_tc_host"
		if [ -z "$_tc_host" ] || [ -e "$_tc_link" ] || [ -L "$_tc_link" ]; then
			toolchain_log "cannot make $_tc_link (a link to $_tc_sysroot): it exists or the host is unknown"
			return 1
		fi
		ln -s "$_tc_sysroot" "$_tc_link" || return 1
		if [ "$(toolchain_version_of "$_tc_pin")" = "$_tc_pin" ]; then
			toolchain_log "Rust $_tc_pin is the installed $_tc; linked as $_tc_pin-$_tc_host"
			return 0
		fi
		rm -f "$_tc_link"
		toolchain_log "linked $_tc as $_tc_pin-$_tc_host but rustup does not run it; link removed"
		return 1
	done
	toolchain_log "this repository pins Rust $_tc_pin (rust-toolchain.toml) and no installed toolchain is $_tc_pin (installed:${_tc_seen:- none}); install it with: rustup toolchain install $_tc_pin"
	return 1
}
