#!/usr/bin/env bash
# Build the static musl binaries (svc-agent, svc-server) for x86_64 and/or aarch64.
#
#   scripts/build-static.sh x86_64|aarch64|all [--profile dist|release|lab-v2]
#
# `--profile lab-v2` is the VM lab's second version (SVC_BUILD_VERSION=0.2.0, made only to be
# updated to: it must run, not be small or fast). It is not a Cargo profile of its own, whose
# folder would compile every dependency again (156 s of a test run on two cores): it is
# `dist`, in `dist`'s folder, with this package alone at opt-level 1 and 16 codegen units
# (`--config profile.dist.package.svc-agent...`). The dependencies are `dist`'s, already
# built; only svc-agent's own units are new, under their own hashes, so the 0.1.x build
# stays cached beside them. Cargo links its outputs to target/TRIPLE/dist/, where the 0.1.x
# binaries live: they are copied to target/TRIPLE/lab-v2/ and `dist`'s are linked back
# (a build of nothing), all under one lock, which every build of this script takes.
#
# Installs its own prerequisites when missing (rustup targets; apt: musl-tools for x86_64,
# gcc-aarch64-linux-gnu for aarch64's C code in aws-lc-sys and ring). Progress goes to stderr; the
# paths of the built binaries go to stdout, one per line, so callers can capture them.
# Every binary is checked to be static-pie (ELF type DYN, no program interpreter): a dynamic
# or a fixed-address one fails the build.
set -euo pipefail

usage() { echo "usage: $0 x86_64|aarch64|all [--profile PROFILE]" >&2; exit 2; }

arch="${1:-}"; [ -n "$arch" ] || usage; shift
profile=release
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) [ $# -ge 2 ] || usage; profile="$2"; shift 2 ;;
        --profile=*) profile="${1#--profile=}"; shift ;;
        *) usage ;;
    esac
done
case "$arch" in
    x86_64|aarch64) arches=("$arch") ;;
    all) arches=(x86_64 aarch64) ;;
    *) usage ;;
esac

root="$(cd "$(dirname "$0")/.." && pwd)"
log() { echo "build-static: $*" >&2; }
die() { echo "build-static: ERROR: $*" >&2; exit 1; }

# shellcheck source=scripts/lib/apt.sh
. "$root/scripts/lib/apt.sh"
# shellcheck source=scripts/lib/toolchain.sh
. "$root/scripts/lib/toolchain.sh"
toolchain_ensure "$root" || die "the pinned Rust toolchain (rust-toolchain.toml) is not available"
toolchain=$(toolchain_pin "$root")
apt_ensure() { # apt_ensure COMMAND PACKAGE...: install the packages unless COMMAND exists
    apt_need "$@"
    apt_install_needed || die "could not install $2 (for $1)"
}

rust_target_ensure() {
    local t="$1"
    if rustup target list --toolchain "$toolchain" --installed | grep -qx "$t"; then return 0; fi
    log "rustup target add --toolchain $toolchain $t"
    rustup target add --toolchain "$toolchain" "$t" >&2 || die "rustup target add $t failed"
}

envs=() targets=()
for a in "${arches[@]}"; do
    triple="$a-unknown-linux-musl"
    rust_target_ensure "$triple"
    targets+=(--target "$triple")
    case "$a" in
        x86_64)
            # The cc crate falls back to musl-gcc for the C code of aws-lc-sys and ring.
            apt_ensure musl-gcc musl-tools ;;
        aarch64)
            apt_ensure aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu libc6-dev-arm64-cross
            # static-pie, as rustc links x86_64 musl on its own (its aarch64 target lacks
            # static-position-independent-executables): position-independent code, no start
            # files from rustc, and cross/aarch64-static-pie-ld, the link the cross route
            # makes too (musl's rcrt1.o, -pie --no-dynamic-linker; docs/packaging.md).
            envs+=(CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
                   AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar
                   CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER="$root/cross/aarch64-static-pie-ld"
                   CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C relocation-model=pie -C link-self-contained=no"
                   CROSS_RUST_SYSROOT="$(cd "$root" && rustc --print sysroot)") ;;
    esac
done
# One cargo invocation for every architecture: the host-side build scripts and proc macros
# are built once, and one target's single-threaded LTO runs beside the other's compile.
# The device binaries only: svc-release (the vendor's host-side tool) is not shipped.
cargo_profile=("--profile" "$profile")
if [ "$profile" = lab-v2 ]; then
    [ -n "${SVC_BUILD_VERSION:-}" ] || die "--profile lab-v2 needs SVC_BUILD_VERSION (the version it stamps)"
    cargo_profile=(--profile dist --config 'profile.dist.package.svc-agent.opt-level=1'
                   --config 'profile.dist.package.svc-agent.codegen-units=16')
fi
tdir="${CARGO_TARGET_DIR:-$root/target}"
cargo_build() { # cargo_build PROFILE-ARGS...: the device binaries for every architecture asked
    (cd "$root" && env "${envs[@]}" cargo build --locked "$@" "${targets[@]}" --bin svc-agent --bin svc-server >&2)
}
log "cargo build --locked ${cargo_profile[*]} ${targets[*]} --bin svc-agent --bin svc-server"
start=$(date +%s)
# One build-static at a time in this target folder, whole: the lab-v2 build puts 0.2.0
# binaries in dist's place until it links dist's back, and the test command runs the system
# tier (which makes both) beside the packaging tier (which checks dist's).
mkdir -p "$tdir"
exec 9>"$tdir/.build-static.lock"
flock 9
cargo_build "${cargo_profile[@]}" || die "cargo build for ${arches[*]} failed"
if [ "$profile" = lab-v2 ]; then
    for a in "${arches[@]}"; do
        triple="$a-unknown-linux-musl"
        mkdir -p "$tdir/$triple/lab-v2"
        for bin in svc-agent svc-server; do
            cp "$tdir/$triple/dist/$bin" "$tdir/$triple/lab-v2/$bin.tmp" &&
                mv -f "$tdir/$triple/lab-v2/$bin.tmp" "$tdir/$triple/lab-v2/$bin" || die "copying the 0.2.0 $bin"
        done
    done
    # dist's own outputs back in place: nothing to compile when its build is up to date.
    # (SVC_BUILD_VERSION unset, not empty: its build script reruns when the value changes.)
    (unset SVC_BUILD_VERSION; cargo_build --profile dist) || die "linking dist's outputs back after the lab-v2 build"
fi
exec 9>&-
log "${arches[*]} built in $(( $(date +%s) - start )) s"
for a in "${arches[@]}"; do
    triple="$a-unknown-linux-musl"
    # Cargo names the output folder after the profile, except dev -> debug.
    outdir="$profile"; [ "$profile" = dev ] && outdir=debug
    for bin in svc-agent svc-server; do
        path="$tdir/$triple/$outdir/$bin"
        [ -x "$path" ] || die "missing output $path"
        if LC_ALL=C readelf -l "$path" | grep -q 'program interpreter'; then
            die "$path is dynamically linked"
        fi
        # static-pie (ELF type DYN, no interpreter): the kernel places the image at a random
        # address. An EXEC is a fixed-address static build (e.g. RUSTFLAGS in the
        # environment, which makes cargo ignore the per-target flags above).
        if ! LC_ALL=C readelf -h "$path" | grep -q 'Type:[[:space:]]*DYN'; then
            die "$path is not static-pie ($(LC_ALL=C readelf -h "$path" | sed -n 's/^ *Type: *//p'))"
        fi
        # aws-lc is compiled (minreq turns on rustls's default provider) but the device
        # binaries use ring: linked in by a stray reference, it would cost 0.7 MB and ~0.1 ms
        # of every start (its version text is a marker it cannot be linked without).
        if grep -qa 'AWS-LC' "$path"; then
            die "$path links aws-lc (docs/packaging.md: the device binaries use ring)"
        fi
        echo "$path"
    done
done
