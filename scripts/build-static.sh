#!/usr/bin/env bash
# Build the static musl binaries (svc-agent, svc-server) for x86_64 and/or aarch64.
#
#   scripts/build-static.sh x86_64|aarch64|all [--profile dist|release]
#
# Installs its own prerequisites when missing (rustup targets; apt: musl-tools for x86_64,
# gcc-aarch64-linux-gnu for aarch64's C code in aws-lc-sys). Progress goes to stderr; the
# paths of the built binaries go to stdout, one per line, so callers can capture them.
# Every binary is checked to be statically linked (no program interpreter); a dynamic one
# fails the build.
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

for a in "${arches[@]}"; do
    triple="$a-unknown-linux-musl"
    rust_target_ensure "$triple"
    envs=()
    case "$a" in
        x86_64)
            # The cc crate falls back to musl-gcc for aws-lc-sys' C code.
            apt_ensure musl-gcc musl-tools ;;
        aarch64)
            apt_ensure aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu libc6-dev-arm64-cross
            envs=(CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
                  AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar
                  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld) ;;
    esac
    # The device binaries only: svc-release (the vendor's host-side tool) is not shipped.
    log "cargo build --locked --profile $profile --target $triple --bin svc-agent --bin svc-server"
    start=$(date +%s)
    (cd "$root" && env "${envs[@]}" cargo build --locked --profile "$profile" --target "$triple" --bin svc-agent --bin svc-server >&2) \
        || die "cargo build for $triple failed"
    log "$triple built in $(( $(date +%s) - start )) s"
    # Cargo names the output folder after the profile, except dev -> debug.
    outdir="$profile"; [ "$profile" = dev ] && outdir=debug
    for bin in svc-agent svc-server; do
        path="${CARGO_TARGET_DIR:-$root/target}/$triple/$outdir/$bin"
        [ -x "$path" ] || die "missing output $path"
        if LC_ALL=C readelf -l "$path" | grep -q 'program interpreter'; then
            die "$path is dynamically linked"
        fi
        echo "$path"
    done
done
