# svc-agent as the prebuilt static musl binary of a release (built by
# scripts/build-static.sh or `cross build --profile dist`): no Rust toolchain in the build,
# any Yocto release. Either from the release server (URL + sha256 per architecture) or from
# a folder on the build host (SVC_AGENT_BIN_DIR holding svc-agent-x86_64 / svc-agent-aarch64).
require svc-agent.inc

LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/Apache-2.0;md5=89aea4e17d99a7cacdbeed46a0096b10"

COMPATIBLE_HOST = "(x86_64|aarch64).*-linux.*"

SVC_RELEASE_URL ??= "https://github.com/svc-agent/svc-agent/releases/download/v${PV}"
SVC_AGENT_BIN_DIR ??= ""
SVC_AGENT_ARCH = "${@'aarch64' if d.getVar('TARGET_ARCH') == 'aarch64' else 'x86_64'}"

# Release checksums (the release's svc-agent-<arch>.sha256 files).
SVC_AGENT_SHA256_X86_64 ??= "0000000000000000000000000000000000000000000000000000000000000000"
SVC_AGENT_SHA256_AARCH64 ??= "0000000000000000000000000000000000000000000000000000000000000000"

SRC_URI = "${@'file://' + d.getVar('SVC_AGENT_BIN_DIR') + '/svc-agent-' + d.getVar('SVC_AGENT_ARCH') + ';subdir=bin' if d.getVar('SVC_AGENT_BIN_DIR') else ''}"
SRC_URI:append:x86-64 = " ${@'' if d.getVar('SVC_AGENT_BIN_DIR') else '${SVC_RELEASE_URL}/svc-agent-x86_64;name=x86-64;subdir=bin'}"
SRC_URI:append:aarch64 = " ${@'' if d.getVar('SVC_AGENT_BIN_DIR') else '${SVC_RELEASE_URL}/svc-agent-aarch64;name=aarch64;subdir=bin'}"
SRC_URI[x86-64.sha256sum] = "${SVC_AGENT_SHA256_X86_64}"
SRC_URI[aarch64.sha256sum] = "${SVC_AGENT_SHA256_AARCH64}"

# The one unit file of the repository; this layer lives in the same tree.
# nooelint: oelint.vars.fileextrapaths,oelint.vars.outofcontext
FILESEXTRAPATHS:prepend := "${THISDIR}/../../../dist:"
SRC_URI += "file://svc-agent.service"

S = "${@(d.getVar('UNPACKDIR') or d.getVar('WORKDIR'))}"
UNPACK_ROOT = "${@(d.getVar('UNPACKDIR') or d.getVar('WORKDIR'))}"

do_configure[noexec] = "1"
do_compile[noexec] = "1"

do_install() {
    bin="${UNPACK_ROOT}/bin/svc-agent-${SVC_AGENT_ARCH}"
    [ -f "$bin" ] || bin="${UNPACK_ROOT}/bin${SVC_AGENT_BIN_DIR}/svc-agent-${SVC_AGENT_ARCH}"
    install_svc_layout "$bin" ${UNPACK_ROOT}/svc-agent.service
}

# A static, already stripped binary: no ldflags of ours, nothing for Yocto to strip.
# nooelint: oelint.vars.insaneskip
INSANE_SKIP:${PN} += "already-stripped ldflags"

RCONFLICTS:${PN} = "svc-agent"
