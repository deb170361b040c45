#!/usr/bin/env bash
# Ecosystems tier: the ecosystems' own tools on meta-svc/ and buildroot-package/, offline.
# Unpacks the vendor snapshots (Buildroot, OpenEmbedded-Core, BitBake; see
# ../shared/vendor/README.md, or SVC_VENDOR_DIR) into a work folder and runs, with the network
# cut off (a private network namespace):
#   Yocto:     bitbake -p with meta-svc and no SRCREV override; bitbake -e of each recipe;
#              yocto-check-layer's offline checks; oelint-adv with its default rule set;
#              the layer's own copies of dist/ files against dist/.
#   Buildroot: utils/check-package; a defconfig with the package enabled as its README says;
#              `make svc-agent-source` for both routes; the from-source route's vendored
#              sources built offline with the CARGO_HOME Buildroot uses.
#   cross:     the zig wrapper of cross/Dockerfile.musl, exactly as cc-rs calls it, compiling
#              aws-lc-sys and ring for aarch64 and x86_64 musl; the aarch64 static-pie link
#              of Cross.toml (cross/aarch64-static-pie-ld) on a small program, run under qemu.
# Runs as root on a fresh Debian 12 (installs what it needs; BitBake runs as an unprivileged
# user). Prints "ecosystems: N passed, M failed"; exit 1 when anything failed.
#   ECO_WORK   work folder (default /var/tmp/svc-ecosystems; kept between runs as a cache)
#   ECO_ONLY   a subset: any of "yocto buildroot cross" (default: all)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2
REPO=$(pwd)
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
log() { echo "ecosystems: $*" >&2; }
finish() {
	echo "ecosystems: $PASS passed, $FAIL failed"
	[ "$FAIL" -eq 0 ]
	exit
}
want() { case " ${ECO_ONLY:-yocto buildroot cross} " in *" $1 "*) return 0 ;; esac; return 1; }

VENDOR=${SVC_VENDOR_DIR:-$REPO/../shared/vendor}
W=${ECO_WORK:-/var/tmp/svc-ecosystems}
BBUSER=svc-eco
OELINT_VERSION=9.11.2

[ "$(id -u)" = 0 ] || { bad "run as root (installs tools, creates the $BBUSER user)"; finish; }
for t in buildroot openembedded-core bitbake; do
	ls "$VENDOR"/"$t"-*.tar.xz >/dev/null 2>&1 || { bad "no $t snapshot in $VENDOR"; finish; }
done

# --- tools -------------------------------------------------------------------------------
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh
# BitBake's host tools (oe-core's sanity list) and the locale it insists on.
for c in chrpath cpio diffstat gawk lz4 rsync zstd file git make gcc g++ patch bzip2 unzip wget \
	bc perl xz python3 pip3 locale-gen runuser unshare; do
	case $c in
	g++) apt_need g++ g++ ;;
	pip3) apt_need pip3 python3-pip ;;
	locale-gen) apt_need locale-gen locales ;;
	runuser | unshare) apt_need "$c" util-linux ;;
	xz) apt_need xz xz-utils ;;
	lz4) apt_need lz4 lz4 ;;
	*) apt_need "$c" "$c" ;;
	esac
done
# Buildroot's check-package: python3 with magic and flake8.
apt_need flake8 flake8
# The cross part runs its aarch64 static-pie test program.
apt_need qemu-aarch64-static qemu-user-static
apt_need_file /usr/lib/python3/dist-packages/magic/__init__.py python3-magic
apt_install_needed || { bad "apt: installing the ecosystem tools"; finish; }
# Debian's python3 (not a per-user pyenv) for everything below.
PY=/usr/bin/python3

if ! locale -a 2>/dev/null | grep -qi '^en_US\.utf-\?8$'; then
	sed -i 's/^# *\(en_US.UTF-8 UTF-8\)/\1/' /etc/locale.gen
	grep -q '^en_US.UTF-8 UTF-8' /etc/locale.gen || echo 'en_US.UTF-8 UTF-8' >>/etc/locale.gen
	locale-gen >/dev/null || { bad "locale-gen en_US.UTF-8"; finish; }
fi
id "$BBUSER" >/dev/null 2>&1 || useradd --system --create-home --shell /bin/bash "$BBUSER" ||
	{ bad "useradd $BBUSER"; finish; }

# oelint-adv in a venv of its own (PEP 668: not into Debian's python).
VENV=$W/venv
mkdir -p "$W"
if ! "$VENV/bin/oelint-adv" --version 2>/dev/null | grep -q "$OELINT_VERSION"; then
	"$PY" -m venv "$VENV" >/dev/null 2>&1 || { apt_need_file /usr/lib/python3.11/ensurepip/__init__.py python3-venv && apt_install_needed && "$PY" -m venv "$VENV"; } ||
		{ bad "python3 -m venv"; finish; }
	"$VENV/bin/pip" install -q "oelint-adv==$OELINT_VERSION" >/dev/null || { bad "pip install oelint-adv==$OELINT_VERSION"; finish; }
fi

# --- the snapshots -----------------------------------------------------------------------
# Unpacked once per snapshot (the file name carries the commit); the layer under test is
# copied fresh every run, so the unprivileged user reads only its own copy.
unpack() { # NAME -> prints the unpacked top folder
	local tarball stamp
	tarball=$(ls "$VENDOR"/"$1"-*.tar.xz | head -n1)
	stamp="$W/src/$(basename "$tarball" .tar.xz)"
	if [ ! -f "$stamp/.unpacked" ]; then
		rm -rf "$stamp" && mkdir -p "$stamp"
		tar -xJf "$tarball" -C "$stamp" || return 1
		touch "$stamp/.unpacked"
	fi
	echo "$stamp/$1"
}
OE=$(unpack openembedded-core) && BB=$(unpack bitbake) && BR=$(unpack buildroot) ||
	{ bad "unpacking the vendor snapshots"; finish; }
chmod -R a+rX "$W/src"

# Offline: a network namespace of its own has only a loopback that is down.
offline() { unshare --net -- "$@"; }
unshare --net true 2>/dev/null || { bad "unshare --net (the offline runs need a network namespace)"; finish; }
# As the BitBake user, offline, in the en_US.UTF-8 locale, with Debian's python first.
as_user() {
	offline runuser -u "$BBUSER" -- env -i HOME="/home/$BBUSER" LANG=en_US.UTF-8 LC_ALL=en_US.UTF-8 \
		PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin "$@"
}

# =========================================================================================
# Yocto
# =========================================================================================
yocto() {
	local Y=$W/yocto start layer r out
	mkdir -p "$Y"
	rsync -a --delete "$REPO/meta-svc/" "$Y/meta-svc/"
	# A git repository of its own, so that yocto-check-layer looks at the layer only.
	chown -R "$BBUSER:" "$Y"
	mkdir -p "$Y/build/conf"
	cat >"$Y/build/conf/bblayers.conf" <<EOF
BBPATH = "\${TOPDIR}"
BBFILES ?= ""
BBLAYERS ?= "$OE/meta $Y/meta-svc"
EOF
	# oe-core's defaults plus: no network, and the download and sstate folders in the
	# work folder. Nothing pins SVC_SRCREV: the layer must parse as it ships.
	cat >"$Y/build/conf/local.conf" <<EOF
MACHINE ??= "qemux86-64"
DISTRO ?= ""
INIT_MANAGER = "systemd"
BB_NO_NETWORK = "1"
DL_DIR = "$Y/downloads"
SSTATE_DIR = "$Y/sstate"
TMPDIR = "$Y/build/tmp"
CONNECTIVITY_CHECK_URIS = ""
EOF
	chown -R "$BBUSER:" "$Y"
	bbrun() { as_user bash -c 'cd "$1" && shift && export BITBAKEDIR="$1" && shift && . ./oe-init-build-env "$1" >/dev/null && shift && "$@"' \
		bbrun "$OE" "$BB" "$Y/build" "$@"; }

	start=$SECONDS
	local parsed=yes
	rm -f "$Y"/env-*.txt
	if bbrun bitbake -p >"$Y/parse.log" 2>&1; then
		ok "bitbake -p with meta-svc, offline, no SRCREV override ($((SECONDS - start)) s)"
	else
		grep -E 'ERROR|NetworkAccess' "$Y/parse.log" | head -n 15
		bad "bitbake -p with meta-svc, offline, no SRCREV override"
		# A failed parse leaves no cache: every further bitbake call would parse all of
		# oe-core again (minutes) and fail the same way.
		parsed=no
	fi

	for r in $(cd "$Y/meta-svc" && ls recipes-*/*/*.bb | sed 's#.*/##; s#_.*##' | sort -u); do
		[ "$parsed" = yes ] || { bad "bitbake -e $r (not run: the parse failed)"; continue; }
		if bbrun bitbake -e "$r" >"$Y/env-$r.txt" 2>&1; then
			ok "bitbake -e $r"
		else
			grep -E 'ERROR' "$Y/env-$r.txt" | head -n 10
			bad "bitbake -e $r"
		fi
	done
	yocto_recipe_checks "$Y"
	[ "$parsed" = yes ] && yocto_image "$Y"

	# yocto-check-layer's checks that need neither a network nor a world build.
	if out=$(bbrun env CHECK_LAYER_PARSED="$parsed" "$PY" "$REPO/scripts/lib/check-layer-offline.py" "$OE" "$Y/meta-svc" 2>&1); then
		echo "$out" | grep -E '^(ok|skip)' | sed 's/^/     /'
		ok "yocto-check-layer (offline checks) meta-svc"
	else
		echo "$out" | tail -n 30
		bad "yocto-check-layer (offline checks) meta-svc"
	fi

	# oelint-adv, default rule set: every recipe and include, no suppression file (run from
	# outside the layer so that none is read), findings of warning and error level. Only
	# homepageping is off: it needs the network.
	layer=$Y/meta-svc
	if (cd "$Y" && HOME=$Y "$VENV/bin/oelint-adv" --quiet --hide info --release wrynose \
		--suppress oelint.vars.homepageping --constantmods "+$layer/oelint-constants.json" -- \
		"$layer"/recipes-*/*/*.bb "$layer"/recipes-*/*/*.inc "$layer/conf/layer.conf"); then
		ok "oelint-adv $OELINT_VERSION, default rule set"
	else bad "oelint-adv $OELINT_VERSION, default rule set"; fi
}

# fragment FILE NAME: the fenced block after `<!-- fragment: NAME -->` in FILE.
fragment() {
	awk -v m="<!-- fragment: $2 -->" '$0 == m { f = 1; next } f && /^```/ { if (n++) exit; next } f && n { print }' "$1"
}

# yocto_image Y: a second build on the same oe-core, with meta-rauc and the README's `rauc`
# and `hawkbit` fragments in its local.conf (as a vendor's image build would have them):
# parsed clean, what BitBake makes of the image and of rauc, and the svc-hawkbit class's step
# as BitBake expands it, run on empty root file systems. Its own TMPDIR keeps its parse cache
# between runs like the first build's.
yocto_image() {
	local Y=$1 I=$1/build-image RAUC tok t envi rootfs step out start readme frauc fhb unitdir drop
	[ -n "$Y" ] || return 1
	RAUC=$(unpack meta-rauc) || { bad "unpacking the meta-rauc snapshot"; return; }
	chmod -R a+rX "$W/src"
	readme=$Y/meta-svc/README.md
	frauc=$(fragment "$readme" rauc) && fhb=$(fragment "$readme" hawkbit)
	[ -n "$frauc" ] && [ -n "$fhb" ] || { bad "meta-svc/README.md has no rauc or hawkbit fragment"; return; }
	# A token nobody could guess, 0600 outside every layer, as a vendor keeps it.
	tok=$W/yocto-secret/hawkbit.token
	t="svc-eco-hawkbit-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
	rm -rf "$W/yocto-secret" && mkdir -m 0700 "$W/yocto-secret" && (umask 077 && printf '%s\n' "$t" >"$tok")
	mkdir -p "$I/conf"
	printf 'BBPATH = "${TOPDIR}"\nBBFILES ?= ""\nBBLAYERS ?= "%s %s %s"\n' "$OE/meta" "$RAUC" "$Y/meta-svc" >"$I/conf/bblayers.conf"
	{
		sed "s#^TMPDIR = .*#TMPDIR = \"$I/tmp\"#; s#^SSTATE_DIR = .*#SSTATE_DIR = \"$I/sstate\"#" "$Y/build/conf/local.conf"
		echo "$frauc"
		echo "$fhb" | sed "s#^SVC_HAWKBIT_TOKEN_FILE = .*#SVC_HAWKBIT_TOKEN_FILE = \"$tok\"#"
	} >"$I/conf/local.conf"
	chown -R "$BBUSER:" "$I"
	bbimg() { as_user bash -c 'cd "$1" && shift && export BITBAKEDIR="$1" && shift && . ./oe-init-build-env "$1" >/dev/null && shift && "$@"' \
		bbimg "$OE" "$BB" "$I" "$@"; }
	start=$SECONDS
	if bbimg bitbake -p >"$I/parse.log" 2>&1 && ! grep -qE '^ERROR|has not been enabled in your DISTRO_FEATURES|meta-svc' "$I/parse.log"; then
		ok "bitbake -p with meta-rauc, meta-svc and the README's rauc and hawkbit fragments, offline ($((SECONDS - start)) s)"
	else
		grep -E 'ERROR|WARNING|meta-svc' "$I/parse.log" | head -n 15
		bad "bitbake -p with meta-rauc, meta-svc and the README's rauc and hawkbit fragments"
		return
	fi
	envi=$I/env-image.txt
	if bbimg bitbake -e core-image-minimal >"$envi" 2>&1 && bbimg bitbake -e rauc >"$I/env-rauc.txt" 2>&1; then
		ok "bitbake -e core-image-minimal and rauc (meta-rauc)"
	else
		grep ERROR "$envi" "$I/env-rauc.txt" | head -n 10
		bad "bitbake -e core-image-minimal or rauc with meta-rauc"
		return
	fi
	if env_has "$envi" IMAGE_INSTALL rauc && env_has "$envi" IMAGE_INSTALL svc-agent-bin && env_has "$envi" DISTRO_FEATURES rauc &&
		env_has "$envi" BAD_RECOMMENDATIONS rauc-mark-good; then
		ok "rauc: the image installs rauc and the agent, DISTRO_FEATURES has rauc, rauc-mark-good is kept out"
	else bad "rauc: the image lacks rauc or svc-agent-bin in IMAGE_INSTALL, rauc in DISTRO_FEATURES or rauc-mark-good in BAD_RECOMMENDATIONS"; fi
	if env_has "$I/env-rauc.txt" PACKAGECONFIG service && env_has "$I/env-rauc.txt" RDEPENDS:rauc rauc-service &&
		sed -n 's/^FILES:rauc-service="\(.*\)"/\1/p' "$I/env-rauc.txt" | grep -q 'dbus-1/system.d/de.pengutronix.rauc.conf'; then
		ok "rauc: the rauc package brings rauc-service, with RAUC's D-Bus policy de.pengutronix.rauc.conf"
	else bad "rauc: rauc does not bring rauc-service with the D-Bus policy (PACKAGECONFIG service)"; fi
	if env_has "$envi" ROOTFS_POSTPROCESS_COMMAND svc_hawkbit_rootfs; then
		ok "hawkbit: the svc-hawkbit class adds its step to the image's ROOTFS_POSTPROCESS_COMMAND"
	else bad "hawkbit: svc_hawkbit_rootfs is not in the image's ROOTFS_POSTPROCESS_COMMAND"; fi

	# The class's step as BitBake expands it (its exports and its function), run as the
	# image's do_rootfs runs it under pseudo (here: as root), on empty root file systems.
	rootfs=$(sed -n 's/^IMAGE_ROOTFS="\(.*\)"/\1/p' "$envi")
	unitdir=$(sed -n 's/^\(export \)\{0,1\}systemd_system_unitdir="\(.*\)"/\2/p' "$envi")
	step=$I/step.sh
	{
		grep '^export SVC_HAWKBIT_' "$envi"
		awk '/^svc_hawkbit_rootfs\(\) \{/ { f = 1 } f { print } f && /^\}/ { exit }' "$envi"
	} >"$step"
	if [ -z "$rootfs" ] || ! grep -q '^svc_hawkbit_rootfs() {' "$step"; then
		bad "hawkbit: no IMAGE_ROOTFS or svc_hawkbit_rootfs function in bitbake -e"
		return
	fi
	out=$(image_step "$step" "$rootfs" "$I/rootfs-none" SVC_HAWKBIT_URL= SVC_HAWKBIT_TENANT= SVC_HAWKBIT_TOKEN_FILE=)
	if [ -z "$(find "$I/rootfs-none" -mindepth 1 | head -n1)" ]; then
		ok "hawkbit: without the settings the class's step writes nothing"
	else bad "hawkbit: without the settings the class's step wrote $(find "$I/rootfs-none" -mindepth 1 | head -n3)"; fi
	out=$(image_step "$step" "$rootfs" "$I/rootfs-partial" SVC_HAWKBIT_TOKEN_FILE=)
	if echo "$out" | grep -q 'SVC_HAWKBIT_URL, SVC_HAWKBIT_TENANT and SVC_HAWKBIT_TOKEN_FILE go together: 2 of 3' &&
		[ -z "$(find "$I/rootfs-partial" -mindepth 1 | head -n1)" ]; then
		ok "hawkbit: a partial set is refused by name, nothing written"
	else
		echo "$out" | tail -n 3
		bad "hawkbit: a partial set of settings is not refused by name"
	fi
	out=$(image_step "$step" "$rootfs" "$I/rootfs-full")
	echo "$out" >"$I/step-full.log"
	drop=$I/rootfs-full$unitdir/svc-agent.service.d/hawkbit.conf
	if [ "$(stat -c '%a %u' "$I/rootfs-full/etc/svc-hawkbit.token" 2>/dev/null)" = "600 0" ] &&
		cmp -s "$tok" "$I/rootfs-full/etc/svc-hawkbit.token" &&
		grep -q "hawkbit join --url https://hawkbit.example.com --tenant DEFAULT --controller-id @machine-id --auth gateway-token --token-file /etc/svc-hawkbit.token" "$drop"; then
		ok "hawkbit: the image gets /etc/svc-hawkbit.token (0600, root's) and the drop-in that joins the README's fleet"
	else
		echo "$out" | tail -n 3
		bad "hawkbit: the image lacks the 0600 token or the filled-in drop-in"
	fi
	hawkbit_leaks "$t" "$I/rootfs-full" "$I/parse.log" "$envi" "$I/env-rauc.txt" "$I/step-full.log"
	rm -rf "$W/yocto-secret" "$I/rootfs-none" "$I/rootfs-partial" "$I/rootfs-full"
}

# env_has ENV_FILE VAR WORD: bitbake -e's VAR holds WORD.
env_has() { sed -n "s/^$2=\"\(.*\)\"/\1/p" "$1" | tr ' ' '\n' | grep -qx -- "$3"; }

# image_step STEP ROOTFS DIR SETTINGS...: the expanded step with ROOTFS moved to a fresh DIR,
# the settings (NAME=VALUE) exported after BitBake's; prints its output.
image_step() {
	local step=$1 rootfs=$2 dir=$3
	shift 3
	rm -rf "$dir" && mkdir -p "$dir"
	sed "s#$rootfs#$dir#g" "$step" >"$dir.sh"
	# shellcheck disable=SC1090 # the step is made above
	(. "$dir.sh" && for a in "$@"; do export "${a?}"; done && svc_hawkbit_rootfs) 2>&1
	rm -f "$dir.sh"
}

# Checks of what BitBake made of each recipe (bitbake -e output) and of the layer's files.
yocto_recipe_checks() {
	local Y=$1 f e
	# The layer uses only what is inside it.
	if grep -rnE 'FILESEXTRAPATHS|(THISDIR|LAYERDIR)\}/\.\.' "$REPO/meta-svc/recipes-"* "$REPO/meta-svc/conf"; then
		bad "meta-svc reaches outside itself (../, FILESEXTRAPATHS)"
	else ok "meta-svc is self-contained"; fi
	for f in svc-agent.service svc-defaults.json svc-agent-data-partition.conf.in svc-agent-hawkbit-image.sh; do
		e=$(find "$REPO/meta-svc" -name "$f" | head -n1)
		if [ -n "$e" ] && cmp -s "$e" "$REPO/dist/$f"; then
			ok "meta-svc's $f is identical to dist/$f"
		else bad "meta-svc has no copy of dist/$f identical to it"; fi
	done
	if cmp -s "$REPO/meta-svc/LICENSE" "$REPO/LICENSE"; then ok "meta-svc/LICENSE is the project's LICENSE"; else bad "meta-svc/LICENSE differs from LICENSE or is missing"; fi
	# No recipe packages machine credentials: one image must not give every device one
	# identity (it would also sit in sstate and package feeds).
	if grep -lE 'svc\.json' "$Y"/env-*.txt 2>/dev/null | xargs -r grep -hE '^(do_install|    ).*sysconfdir\}?/svc\.json' | grep -q .; then
		bad "a recipe installs /etc/svc.json (credentials in the image)"
	else ok "no recipe installs /etc/svc.json"; fi
	if grep -rn 'svc\.json' "$REPO/meta-svc/recipes-"* | grep -vE '^[^:]+:[0-9]+:\s*#'; then
		bad "a recipe of meta-svc names /etc/svc.json (credentials in the image)"
	else ok "no recipe of meta-svc names /etc/svc.json"; fi
	if grep -q '^SVC_CREDENTIALS_FILE' "$Y"/env-*.txt 2>/dev/null; then
		bad "SVC_CREDENTIALS_FILE still exists (credentials baked into images)"
	else ok "no credentials variable in any recipe"; fi
	# The prebuilt recipe uses oe-core's bin_package class.
	if [ -f "$Y/env-svc-agent-bin.txt" ] && grep -q 'classes-recipe/bin_package\.bbclass:' "$Y/env-svc-agent-bin.txt"; then
		ok "svc-agent-bin inherits bin_package"
	else bad "svc-agent-bin does not inherit bin_package"; fi
	# The from-source recipe: a pinned commit (no AUTOREV) and a version that says so.
	if [ -f "$Y/env-svc-agent.txt" ]; then
		local srcrev pv
		srcrev=$(sed -n 's/^SRCREV="\(.*\)"/\1/p' "$Y/env-svc-agent.txt")
		pv=$(sed -n 's/^PV="\(.*\)"/\1/p' "$Y/env-svc-agent.txt")
		if echo "$srcrev" | grep -Eq '^[0-9a-f]{40}$'; then ok "svc-agent: SRCREV pinned ($srcrev)"; else bad "svc-agent: SRCREV is '$srcrev', not a commit"; fi
		case "$pv" in
		*+git*) ok "svc-agent: PV $pv (a git build)" ;;
		*) bad "svc-agent: PV '$pv' does not say it is a git build" ;;
		esac
		# The version at the pinned commit is the PV's base (when the commit is in this clone).
		if git cat-file -e "$srcrev^{commit}" 2>/dev/null; then
			local cv
			cv=$(git show "$srcrev:Cargo.toml" | sed -n 's/^version = "\(.*\)"/\1/p' | head -n1)
			if [ "${pv%%+git*}" = "$cv" ]; then ok "svc-agent: PV base $cv is the version at $srcrev"; else bad "svc-agent: PV $pv but Cargo.toml at $srcrev says $cv"; fi
		fi
		# A position-independent binary (docs/packaging.md, "Position-independent binaries"):
		# oe-core's generated Rust target says position-independent-executables and links
		# dynamically with the target's gcc; nothing in the recipe's RUSTFLAGS asks otherwise.
		local rf
		rf=$(sed -n 's/^\(export \)\{0,1\}RUSTFLAGS="\(.*\)"/\2/p' "$Y/env-svc-agent.txt" | head -n1)
		if grep -q "tspec\['position-independent-executables'\] = True" "$OE/meta/classes-recipe/rust-target-config.bbclass" &&
			! echo "$rf" | grep -qE 'crt-static|relocation-model=(static|dynamic-no-pic)|no-pie'; then
			ok "svc-agent: oe-core's Rust target links a PIE, RUSTFLAGS do not undo it"
		else bad "svc-agent: not a PIE (oe-core's rust-target-config.bbclass, or RUSTFLAGS '$rf')"; fi
	fi
}

# =========================================================================================
# Buildroot
# =========================================================================================
# br_make OUT ARG...: Buildroot's make on the external tree, offline.
br_make() {
	local out=$1
	shift
	offline env CARGO_NET_OFFLINE=true make -s -C "$BR" O="$out" BR2_EXTERNAL="$EXT" "$@"
}

# br_fragment NAME: the README's fenced block after `<!-- fragment: NAME -->`.
br_fragment() {
	awk -v m="<!-- fragment: $1 -->" '$0 == m { f = 1; next } f && /^```/ { if (n++) exit; next } f && n { print }' "$EXT/README.md"
}

# br_config ROUTE [FRAGMENT...]: a defconfig with the package enabled as the README's fragment
# for ROUTE says, plus the further fragments (the output folder is named after all of them),
# on Buildroot's qemu aarch64 board.
br_config() {
	local route=$1 out=$BRW/out-$1 frag more f
	frag=$(br_fragment "$route")
	[ -n "$frag" ] || { bad "buildroot-package/README.md has no '$route' fragment"; return 1; }
	shift
	for f in "$@"; do
		more=$(br_fragment "$f")
		[ -n "$more" ] || { bad "buildroot-package/README.md has no '$f' fragment"; return 1; }
		frag="$frag"$'\n'"$more"
		out=$out-$f
		route="$route + $f"
	done
	rm -rf "$out" && mkdir -p "$out"
	br_make "$out" qemu_aarch64_virt_defconfig >/dev/null || { bad "make qemu_aarch64_virt_defconfig ($route)"; return 1; }
	echo "$frag" >>"$out/.config"
	br_make "$out" olddefconfig >/dev/null 2>&1 || { bad "make olddefconfig ($route)"; return 1; }
	local want
	for want in $(echo "$frag" | grep -E '^BR2_[A-Z0-9_]+=(y|"[^" ]*")$'); do
		grep -qx "$want" "$out/.config" || { bad "$route: README's $want did not survive olddefconfig"; return 1; }
	done
	ok "defconfig + the README's $route fragment: svc-agent enabled"
}

buildroot() {
	BRW=$W/buildroot
	EXT=$BRW/ext
	local dl=$BRW/dl f pv
	mkdir -p "$BRW"
	rsync -a --delete "$REPO/buildroot-package/" "$EXT/"

	# Buildroot's own coding-style checker on every file of the external tree.
	if (cd "$EXT" && find . -type f ! -name '*.md' | sed 's#^\./##' | xargs "$PY" "$BR/utils/check-package" -b); then
		ok "utils/check-package -b buildroot-package"
	else bad "utils/check-package -b buildroot-package"; fi
	for f in svc-agent.service svc-defaults.json svc-agent-data-partition.conf.in svc-agent-hawkbit-image.sh; do
		if cmp -s "$EXT/package/svc-agent/$f" "$REPO/dist/$f"; then ok "buildroot-package's $f is identical to dist/$f"; else bad "buildroot-package has no copy of dist/$f identical to it"; fi
	done
	if grep -rnE '_PATH\)/\.\.|TOPDIR\)/\.\.|/dist/' "$EXT/package" "$EXT/external.mk"; then
		bad "buildroot-package reaches outside itself"
	else ok "buildroot-package is self-contained"; fi

	# --- prebuilt route: a stand-in release (what the release publishes: the binaries and
	# LICENSE), its hash lines added as the release adds them (scripts/release-hashes.sh).
	if br_config prebuilt; then
		local rel=$BRW/release ext_rel=$BRW/ext-released out=$BRW/out-prebuilt
		rm -rf "$rel" "$ext_rel" && mkdir -p "$rel"
		for a in x86_64 aarch64; do printf 'stand-in svc-agent-%s\n' "$a" >"$rel/svc-agent-$a"; done
		cp "$REPO/LICENSE" "$rel/LICENSE"
		cp -a "$EXT" "$ext_rel"
		sh "$REPO/scripts/release-hashes.sh" "$rel" | sed -n '/svc-agent\.hash/,/^# meta-svc/p' | grep '^sha256' \
			>>"$ext_rel/package/svc-agent/svc-agent.hash"
		sed -i "s#^BR2_PRIMARY_SITE=.*##" "$out/.config"
		printf 'BR2_PRIMARY_SITE="file://%s"\nBR2_PRIMARY_SITE_ONLY=y\n' "$rel" >>"$out/.config"
		rm -rf "$dl/svc-agent"
		if EXT=$ext_rel br_make "$out" olddefconfig >/dev/null 2>&1 && EXT=$ext_rel br_make "$out" DL_DIR="$dl" svc-agent-source >"$BRW/prebuilt-source.log" 2>&1; then
			ok "make svc-agent-source (prebuilt, from a released mirror)"
		else
			tail -n 5 "$BRW/prebuilt-source.log"
			bad "make svc-agent-source (prebuilt, from a released mirror)"
		fi
		# The licence the route declares is one it has (legal-info copies it). Host tar 1.34
		# would make Buildroot build its own host-tar first: not ours to test (-o host-tar).
		if EXT=$ext_rel br_make "$out" DL_DIR="$dl" -o host-tar svc-agent-legal-info >"$BRW/prebuilt-legal.log" 2>&1 &&
			ls "$out"/legal-info/licenses/svc-agent-*/LICENSE >/dev/null 2>&1; then
			ok "prebuilt route declares its licence file (legal-info)"
		else
			tail -n 5 "$BRW/prebuilt-legal.log"
			bad "prebuilt route declares no licence file (legal-info)"
		fi
		br_hawkbit "$rel" "$ext_rel"
	fi
	# RAUC beside the agent (README "OS images through the agent"): the pairing survives
	# olddefconfig (br_config checks every option of both fragments).
	br_config prebuilt rauc || :

	# --- from source: the pinned commit, vendored by Buildroot's cargo download
	# post-process into the tarball, with the CARGO_HOME Buildroot uses (DL_DIR/br-cargo-home).
	if br_config source; then
		local out=$BRW/out-source vars
		vars=$(br_make "$out" printvars VARS='SVC_AGENT_%' QUOTED_VARS=YES 2>/dev/null)
		if echo "$vars" | grep -q "^SVC_AGENT_SITE_METHOD='local'"; then
			bad "from source: SITE_METHOD local (Buildroot's cargo vendoring never runs; rsync copies target/)"
		else ok "from source: a download Buildroot vendors (not SITE_METHOD local)"; fi
		if echo "$vars" | grep -A12 "^SVC_AGENT_INSTALL_TARGET_CMDS=" | grep -q -- '--bins'; then
			bad "from source: cargo install --bins installs svc-server too"
		else ok "from source: installs svc-agent only"; fi
		# A position-independent binary (docs/packaging.md, "Position-independent binaries"):
		# systemd needs a glibc toolchain, and rustc's *-linux-gnu targets link a PIE.
		if grep -qx 'BR2_TOOLCHAIN_USES_GLIBC=y' "$out/.config" && ! echo "$vars" | grep -qE 'crt-static|relocation-model'; then
			ok "from source: a glibc toolchain, rustc's PIE (no flags of ours undo it)"
		else bad "from source: not a glibc toolchain, or the package changes rustc's linking"; fi
		pv=$(echo "$vars" | sed -n "s/^SVC_AGENT_VERSION='\(.*\)'/\1/p")
		# The crates, fetched beforehand from the registry into Buildroot's CARGO_HOME (the
		# download step itself runs offline, CARGO_NET_OFFLINE=true).
		local pin=$BRW/pin
		rm -rf "$pin" && mkdir -p "$pin"
		if git -C "$REPO" archive "$pv" 2>/dev/null | tar -x -C "$pin"; then
			CARGO_HOME=$dl/br-cargo-home cargo fetch --locked --manifest-path "$pin/Cargo.toml" >/dev/null 2>&1 ||
				bad "cargo fetch into $dl/br-cargo-home"
		fi
		# The pinned commit from this clone instead of the git host (same commit, so the same
		# tarball and hash). Buildroot's host Rust and host tar are not built (their sources
		# are not offline): the machine's cargo vendors and its tar packs (make -o).
		rm -rf "$out/build/svc-agent-"*
		mkdir -p "$out/host/bin"
		ln -sf "$(command -v tar)" "$out/host/bin/tar"
		if br_make "$out" DL_DIR="$dl" SVC_AGENT_SITE="$REPO" -o host-rustc -o host-rust-bin -o host-tar svc-agent-source \
			>"$BRW/source-source.log" 2>&1; then
			ok "make svc-agent-source (from source, offline)"
		else
			tail -n 8 "$BRW/source-source.log"
			bad "make svc-agent-source (from source, offline)"
			# After a move of the pin: the line svc-agent.hash needs, from Buildroot's own
			# download and cargo post-process (it keeps the file when no hash is listed).
			if grep -q '^ERROR: No hash found for ' "$BRW/source-source.log"; then
				local f
				f=$(sed -n 's/^ERROR: No hash found for //p' "$BRW/source-source.log" | head -n1)
				[ -f "$dl/svc-agent/$f" ] && echo "     svc-agent.hash needs: sha256  $(sha256sum <"$dl/svc-agent/$f" | cut -d' ' -f1)  $f"
			fi
		fi
		local tarball
		tarball=$(ls "$dl"/svc-agent/svc-agent-*-cargo*.tar.gz 2>/dev/null | head -n1)
		if [ -n "$tarball" ]; then
			if tar -tzf "$tarball" | grep -q '^[^/]*/target/'; then bad "the vendored tarball holds target/"; else ok "the vendored tarball holds no target/ ($(du -h "$tarball" | cut -f1))"; fi
			local srcb=$BRW/srcbuild
			rm -rf "$srcb" && mkdir -p "$srcb" && tar -xzf "$tarball" -C "$srcb" --strip-components=1
			# Each of the two builds of a vendored tree has a target folder of its own, kept
			# between runs: in one folder they took turns invalidating every dependency (cargo
			# fingerprints a vendored crate by its path, which differs between the two trees),
			# two whole debug builds a run. With an unchanged pin only aws-lc-sys (its build
			# script watches its folder, new at every extraction) and the six crates above it
			# compile again (7 of 61); a moved pin or toolchain compiles all.
			if (cd "$srcb" && offline env CARGO_HOME="$dl/br-cargo-home" CARGO_TARGET_DIR="$BRW/target" \
				nice cargo build --offline --locked --bin svc-agent) >"$BRW/source-build.log" 2>&1; then
				ok "the vendored sources build offline with CARGO_HOME=DL_DIR/br-cargo-home"
			else
				tail -n 8 "$BRW/source-build.log"
				bad "the vendored sources do not build offline"
			fi
		else bad "from source: no vendored tarball in DL_DIR"; fi
		br_data_partition "$pv"
	fi
}

# br_hawkbit REL EXT_REL: the prebuilt route with the README's hawkbit fragment, installed
# into the target three times by Buildroot's own install step (the stand-in release of
# REL, the hashes of EXT_REL): without the hawkBit options, with a partial set, with all.
br_hawkbit() {
	local rel=$1 ext_rel=$2 out=$BRW/out-prebuilt-hawkbit tok=$BRW/hawkbit-secret/hawkbit.token t deps vars log
	br_config prebuilt hawkbit || return
	sed -i "s#^BR2_PRIMARY_SITE=.*##" "$out/.config"
	printf 'BR2_PRIMARY_SITE="file://%s"\nBR2_PRIMARY_SITE_ONLY=y\n' "$rel" >>"$out/.config"
	# A token nobody could guess, in a 0600 file outside the tree, as a vendor keeps it.
	t="svc-eco-hawkbit-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
	rm -rf "${tok%/*}" && mkdir -m 0700 "${tok%/*}" && (umask 077 && printf '%s\n' "$t" >"$tok")
	sed -i "s#^BR2_PACKAGE_SVC_AGENT_HAWKBIT_TOKEN_FILE=.*#BR2_PACKAGE_SVC_AGENT_HAWKBIT_TOKEN_FILE=\"$tok\"#" "$out/.config"
	EXT=$ext_rel br_make "$out" olddefconfig >/dev/null 2>&1 || { bad "hawkbit: make olddefconfig"; return; }
	vars=$(EXT=$ext_rel br_make "$out" printvars VARS='SVC_AGENT_FINAL_%DEPENDENCIES SVC_AGENT_PERMISSIONS' QUOTED_VARS=YES 2>/dev/null)
	deps=$(echo "$vars" | sed -n "s/^SVC_AGENT_FINAL_[A-Z_]*DEPENDENCIES='\(.*\)'/\1/p" | tr ' ' '\n' | sort -u | sed '/^$/d; s/^/-o /' | tr '\n' ' ')
	if echo "$vars" | grep -A2 '^SVC_AGENT_PERMISSIONS=' | grep -q '/etc/svc-hawkbit.token f 600 0 0'; then
		ok "hawkbit: the permissions table makes /etc/svc-hawkbit.token 0600 root's"
	else bad "hawkbit: no 0600 root line for /etc/svc-hawkbit.token in SVC_AGENT_PERMISSIONS"; fi
	# install_step LOG MAKE-ARGS...: a fresh install step of the package.
	install_step() {
		local log=$1
		shift
		rm -rf "$out/target/etc/svc-hawkbit.token" "$out/target/usr/lib/systemd/system/svc-agent.service.d" \
			"$out/build/svc-agent-"*/.stamp_target_installed "$out/build/svc-agent-"*/.stamp_installed
		# shellcheck disable=SC2086 # -o NAME pairs
		EXT=$ext_rel br_make "$out" DL_DIR="$dl" BR2_PACKAGE_SVC_AGENT_DEFAULTS_FILE= BR2_PACKAGE_SVC_AGENT_SIGNING_KEY_FILE= \
			$deps "$@" svc-agent-install-target >"$log" 2>&1
	}
	local target=$out/target drop=$out/target/usr/lib/systemd/system/svc-agent.service.d/hawkbit.conf
	if install_step "$BRW/hb-none.log" BR2_PACKAGE_SVC_AGENT_HAWKBIT_URL= BR2_PACKAGE_SVC_AGENT_HAWKBIT_TENANT= \
		BR2_PACKAGE_SVC_AGENT_HAWKBIT_TOKEN_FILE= && [ -x "$target/opt/svc/bin/svc-agent" ] &&
		[ ! -e "$target/etc/svc-hawkbit.token" ] && [ ! -e "$drop" ]; then
		ok "hawkbit: without its options the image has no token and no drop-in"
	else
		tail -n 5 "$BRW/hb-none.log"
		bad "hawkbit: without its options the install differs"
	fi
	if ! install_step "$BRW/hb-partial.log" BR2_PACKAGE_SVC_AGENT_HAWKBIT_TOKEN_FILE= &&
		grep -q 'BR2_PACKAGE_SVC_AGENT_HAWKBIT_URL, BR2_PACKAGE_SVC_AGENT_HAWKBIT_TENANT and BR2_PACKAGE_SVC_AGENT_HAWKBIT_TOKEN_FILE go together: 2 of 3' "$BRW/hb-partial.log" &&
		[ ! -e "$target/etc/svc-hawkbit.token" ] && [ ! -e "$drop" ]; then
		ok "hawkbit: a partial set fails the build, naming the options, nothing written"
	else
		tail -n 5 "$BRW/hb-partial.log"
		bad "hawkbit: a partial set of options is not refused by name"
	fi
	log=$BRW/hb-full.log
	if install_step "$log" && [ "$(stat -c %a "$target/etc/svc-hawkbit.token" 2>/dev/null)" = 600 ] &&
		cmp -s "$tok" "$target/etc/svc-hawkbit.token" &&
		grep -q "hawkbit join --url https://hawkbit.example.com --tenant DEFAULT --controller-id @machine-id --auth gateway-token --token-file /etc/svc-hawkbit.token" "$drop"; then
		ok "hawkbit: the image has the token (0600) and the drop-in that joins the README's fleet"
	else
		tail -n 5 "$log"
		bad "hawkbit: the image lacks the 0600 token or the filled-in drop-in"
	fi
	hawkbit_leaks "$t" "$target" "$log" "$out/.config"
	rm -rf "${tok%/*}"
}

# hawkbit_leaks TOKEN ROOT FILE...: the token in no file of ROOT others may read (the token
# file itself is 0600), nor in any of the FILEs (build logs, configurations).
hawkbit_leaks() {
	local t=$1 root=$2 leak
	shift 2
	leak=$(find "$root" -type f -perm -o=r -print0 | xargs -0r grep -lF -- "$t" 2>/dev/null | head -n 3)
	if [ -z "$leak" ]; then ok "hawkbit: the token is in no file of the image others may read"; else bad "hawkbit: the token is in world-readable $leak"; fi
	leak=$(grep -lF -- "$t" "$@" 2>/dev/null | head -n 3)
	if [ -z "$leak" ]; then ok "hawkbit: the token is not in the build's output or configuration"; else bad "hawkbit: the token is in $leak"; fi
}

# br_data_partition PV: the from-source route with the README's data-partition fragment
# (state and credentials on /data): Buildroot's own extract, patch and install steps on the
# pinned commit's vendored download; the build step in between (Buildroot's cargo build needs
# its host-rustc and cross toolchain, whose sources are not offline) is the machine's cargo on
# the same extracted tree, offline, with the package's SVC_AGENT_CARGO_ENV.
br_data_partition() {
	local pv=$1 out vars deps tdir bdir rtarget senv cenv tgt d bin doc
	br_config source data-partition || return
	out=$BRW/out-source-data-partition
	vars=$(br_make "$out" printvars VARS='SVC_AGENT_% RUSTC_TARGET_NAME' QUOTED_VARS=YES 2>/dev/null)
	senv=$(echo "$vars" | sed -n "s/^SVC_AGENT_STATE_DIR='\(.*\)'/\1/p")
	cenv=$(echo "$vars" | sed -n "s/^SVC_AGENT_CREDENTIALS_DIR='\(.*\)'/\1/p")
	rtarget=$(echo "$vars" | sed -n "s/^RUSTC_TARGET_NAME='\(.*\)'/\1/p")
	if [ "$senv:$cenv" = /data/svc:/data/etc ] && echo "$vars" | grep -q "SVC_STATE_DIR=\"/data/svc\" SVC_CREDENTIALS_DIR=\"/data/etc\""; then
		ok "data partition: state /data/svc, credentials /data/etc, both in SVC_AGENT_CARGO_ENV"
	else bad "data partition: the fragment gives state '$senv', credentials '$cenv' (or not in SVC_AGENT_CARGO_ENV)"; return; fi
	# Every package the steps would build first (toolchain, host-rustc, host-tar, ...) is
	# taken as made (make -o): their sources are not offline.
	deps=$(echo "$vars" | sed -n "s/^SVC_AGENT_FINAL_[A-Z_]*DEPENDENCIES='\(.*\)'/\1/p" | tr ' ' '\n' | sort -u | sed '/^$/d; s/^/-o /' | tr '\n' ' ')
	mkdir -p "$out/host/bin" && ln -sf "$(command -v tar)" "$out/host/bin/tar"
	# shellcheck disable=SC2086 # -o NAME pairs
	if br_make "$out" DL_DIR="$dl" SVC_AGENT_SITE="$REPO" $deps svc-agent-configure >"$BRW/dp-configure.log" 2>&1; then
		ok "data partition: make svc-agent-configure (download, extract, patch; offline)"
	else
		tail -n 8 "$BRW/dp-configure.log"
		bad "data partition: make svc-agent-configure"; return
	fi
	bdir=$out/build/svc-agent-$pv
	tgt=$bdir/target/$rtarget/release
	# Its own target folder (see "the vendored sources build offline" above).
	if (cd "$bdir" && offline env CARGO_HOME="$dl/br-cargo-home" CARGO_TARGET_DIR="$BRW/target-dp" \
		SVC_STATE_DIR="$senv" SVC_CREDENTIALS_DIR="$cenv" nice cargo build --offline --locked --bin svc-agent) \
		>"$BRW/dp-build.log" 2>&1 && install -D -m 0755 "$BRW/target-dp/debug/svc-agent" "$tgt/svc-agent"; then
		ok "data partition: the extracted sources build offline with the package's cargo environment"
	else
		tail -n 8 "$BRW/dp-build.log"
		bad "data partition: the extracted sources do not build offline"; return
	fi
	touch "$bdir/.stamp_built"
	# shellcheck disable=SC2086 # -o NAME pairs
	if br_make "$out" DL_DIR="$dl" SVC_AGENT_SITE="$REPO" $deps svc-agent-install-target >"$BRW/dp-install.log" 2>&1; then
		ok "data partition: make svc-agent-install-target"
	else
		tail -n 8 "$BRW/dp-install.log"
		bad "data partition: make svc-agent-install-target"; return
	fi
	tdir=$out/target
	d=$tdir/usr/lib/systemd/system/svc-agent.service.d/data-partition.conf
	bin=$tdir/usr/lib/svc-agent/svc-agent
	if [ -x "$bin" ] && [ ! -e "$tdir/opt/svc" ] && [ -f "$tdir/usr/lib/systemd/system/svc-agent.service" ] &&
		[ -f "$d" ] && ! grep -q '@[A-Z_]*@' "$d" && grep -q "SVC_STATE_DIR=/data/svc" "$d" &&
		grep -qx 'SVC_STATE_DIR=/data/svc' "$tdir/etc/profile.d/svc-agent.sh"; then
		ok "data partition: the image has the agent in /usr/lib/svc-agent, the unit and its filled-in drop-in, nothing in /opt/svc"
	else
		find "$tdir" -path '*svc*' | head -n 20
		bad "data partition: the installed layout is not the README's"
	fi
	# The paths are compiled in: the image's agent finds them with no environment at all.
	doc=$(env -i "$bin" doctor 2>&1)
	if echo "$doc" | grep -q 'state-dir.*/data/svc' && echo "$doc" | grep -q '/data/etc/svc.json'; then
		ok "data partition: the image's agent knows /data/svc and /data/etc/svc.json without its unit's environment"
	else
		echo "$doc" | head -n 5
		bad "data partition: the image's agent does not have the data-partition paths compiled in"
	fi
}

# =========================================================================================
# cross: the C compiler the committed Cross.toml and cross/Dockerfile.musl give cc-rs
# =========================================================================================
cross_check() {
	local C=$W/cross t zt log
	mkdir -p "$C"
	# The image must not need pip: cross 0.2.5's images have pip 9 (too old for the ziglang
	# wheel), Ubuntu 24.04's refuses system installs (PEP 668).
	if grep -nE '^[^#]*(pip[0-9.]*|-m pip) install' cross/Dockerfile.musl; then
		bad "cross/Dockerfile.musl installs with pip"
	else ok "cross/Dockerfile.musl needs no pip"; fi
	# What the image runs is these committed files, so running them here is running the image's.
	if grep -q '^COPY cross/install-zig.sh cross/zig-cc cross/zig-ar cross/aarch64-static-pie-ld /usr/local/bin/$' cross/Dockerfile.musl &&
		grep -q '^RUN /usr/local/bin/install-zig.sh /opt/zig$' cross/Dockerfile.musl &&
		grep -q 'CC_aarch64_unknown_linux_musl=/usr/local/bin/zig-cc' Cross.toml &&
		grep -q 'CC_x86_64_unknown_linux_musl=/usr/local/bin/zig-cc' Cross.toml; then
		ok "the image's compiler is the committed cross/zig-cc, its zig from cross/install-zig.sh"
	else bad "Cross.toml / cross/Dockerfile.musl do not use the committed cross/zig-cc and install-zig.sh"; return; fi

	# The pinned wheel, fetched by pip (the image fetches the same file and checks the same
	# sha256), unpacked by the committed install script.
	local ver
	ver=$(sed -n 's/^ZIG_VERSION=//p' cross/install-zig.sh)
	rm -rf "$C/wheel"
	if "$PY" -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_12_x86_64 \
		-d "$C/wheel" "ziglang==$ver" >/dev/null 2>&1 && sh cross/install-zig.sh "$C/zig" "$C"/wheel/*.whl >/dev/null; then
		ok "zig $ver from the pinned ziglang wheel (cross/install-zig.sh)"
	else bad "cross/install-zig.sh with the ziglang==$ver wheel"; return; fi
	rustup target add aarch64-unknown-linux-musl x86_64-unknown-linux-musl >/dev/null 2>&1 || true
	cargo fetch --locked >/dev/null 2>&1 || bad "cargo fetch"

	# The crates with C code (aws-lc-sys: minreq's rustls default, linked by svc-release only;
	# ring: the device binaries' crypto) for both targets, offline, with CC/AR exactly as
	# Cross.toml sets them (the wrapper) and ZIG/ZIG_TARGET as the image sets them; cc-rs adds
	# --target=<rust triple>.
	local crate
	for t in aarch64-unknown-linux-musl x86_64-unknown-linux-musl; do
		zt=${t%%-*}-linux-musl
		for crate in aws-lc-sys ring; do
			log=$C/$crate-$t.log
			rm -rf "$C/target/$t/release/build/$crate-"*
			if offline env "CC_${t//-/_}=$REPO/cross/zig-cc" "AR_${t//-/_}=$REPO/cross/zig-ar" \
				ZIG="$C/zig/zig" ZIG_TARGET="$zt" CC_ENABLE_DEBUG_OUTPUT=1 CARGO_TARGET_DIR="$C/target" \
				nice cargo build --offline --locked --release -vv -p "$crate" --target "$t" >"$log" 2>&1 &&
				grep -q -- "zig-cc.*--target=$t" "$log"; then
				ok "$crate for $t compiled by cross/zig-cc (cc-rs passed --target=$t)"
			else
				grep -E 'error|unable' "$log" | head -n 5
				bad "$crate for $t with cross/zig-cc"
			fi
		done
	done

	# The image's aarch64 link (Cross.toml's linker, the committed cross/aarch64-static-pie-ld,
	# and its RUSTFLAGS; CROSS_RUST_SYSROOT as cross sets it: the Rust sysroot) on a small
	# program, offline: static-pie (ELF type DYN, no interpreter), and it runs.
	local flags linker
	flags=$(sed -n 's/^ *"CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS=\(.*\)",$/\1/p' Cross.toml)
	linker=$(sed -n 's/^ *"CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=\(.*\)",$/\1/p' Cross.toml)
	mkdir -p "$C/pie"
	echo 'fn main() { println!("static-pie ok"); }' >"$C/pie/main.rs"
	# shellcheck disable=SC2086 # the flags are words, as cargo splits them
	if [ "$linker" = /usr/local/bin/aarch64-static-pie-ld ] && [ -n "$flags" ] &&
		offline env CROSS_RUST_SYSROOT="$(rustc --print sysroot)" rustc --target aarch64-unknown-linux-musl \
			$flags -C linker="$REPO/cross/aarch64-static-pie-ld" -o "$C/pie/main" "$C/pie/main.rs" &&
		LC_ALL=C readelf -h "$C/pie/main" | grep -q 'Type:[[:space:]]*DYN' &&
		! readelf -l "$C/pie/main" | grep -q INTERP &&
		qemu-aarch64-static "$C/pie/main" | grep -q 'static-pie ok'; then
		ok "Cross.toml's aarch64 link ($flags, cross/aarch64-static-pie-ld) makes a static-pie that runs"
	else bad "Cross.toml's aarch64 link (linker '$linker', RUSTFLAGS '$flags') does not make a static-pie that runs"; fi
}

# The three parts side by side: each uses about one core (BitBake's parse, Buildroot's make,
# one crate compiling at the end of a build) and waits on the rest, and they share nothing
# but the tools installed above (their own folders under $W; Buildroot's builds have a
# CARGO_HOME of their own). Each part's output is printed whole, in this order, when all
# have ended; its ok/FAIL lines count as before.
parts=()
for part in yocto buildroot cross; do
	want "$part" || continue
	parts+=("$part")
	(
		PASS=0 FAIL=0 t0=$SECONDS
		trap 'echo "$PASS $FAIL" >"$W/part-$part.count"' EXIT
		case $part in yocto) yocto ;; buildroot) buildroot ;; cross) cross_check ;; esac
		echo "time $part: $((SECONDS - t0)) s"
	) >"$W/part-$part.log" 2>&1 &
done
wait
for part in "${parts[@]}"; do
	cat "$W/part-$part.log"
	read -r p f <"$W/part-$part.count" 2>/dev/null || { p=0 f=1; echo "FAIL the $part part ended without its counts"; }
	PASS=$((PASS + p)) FAIL=$((FAIL + f))
	rm -f "$W/part-$part.log" "$W/part-$part.count"
done
finish
