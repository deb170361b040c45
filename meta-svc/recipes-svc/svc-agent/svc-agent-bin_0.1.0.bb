# svc-agent as the release's prebuilt static musl binary (x86_64, aarch64; static-pie, see
# the project's docs/packaging.md): no Rust toolchain in the build, any Yocto release. PV is
# the release (this file's name); the binary is fetched from that release with its pinned
# sha256.
require svc-agent.inc

# The release binary carries no licence file: oe-core's copy of the same Apache-2.0 text.
# nooelint: oelint.var.licenseremotefile
LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/Apache-2.0;md5=89aea4e17d99a7cacdbeed46a0096b10"

COMPATIBLE_HOST = "(x86_64|aarch64).*-linux.*"

inherit bin_package

SVC_RELEASE_URL ??= "https://github.com/svc-agent/svc-agent/releases/download/v${PV}"
SVC_AGENT_ARCH = "${@'aarch64' if d.getVar('TARGET_ARCH') == 'aarch64' else 'x86_64'}"

# The release's checksums (its svc-agent-<arch>.sha256 files; scripts/release-hashes.sh).
SVC_AGENT_SHA256_X86_64 ??= "0000000000000000000000000000000000000000000000000000000000000000"
SVC_AGENT_SHA256_AARCH64 ??= "0000000000000000000000000000000000000000000000000000000000000000"

# bin_package installs the tree under ${S} as it is: the binary lands in /opt/svc/cache,
# the unit in the systemd unit folder.
SRC_URI = "file://svc-agent.service;subdir=${BP}${systemd_system_unitdir}"
SRC_URI:append:x86-64 = " ${SVC_RELEASE_URL}/svc-agent-x86_64;name=x86-64;subdir=${BP}/opt/svc/cache"
SRC_URI:append:aarch64 = " ${SVC_RELEASE_URL}/svc-agent-aarch64;name=aarch64;subdir=${BP}/opt/svc/cache"
SRC_URI[x86-64.sha256sum] = "${SVC_AGENT_SHA256_X86_64}"
SRC_URI[aarch64.sha256sum] = "${SVC_AGENT_SHA256_AARCH64}"

do_install:append() {
    mv ${D}/opt/svc/cache/svc-agent-${SVC_AGENT_ARCH} ${D}/opt/svc/cache/svc-agent-${PV}
    install_svc_layout ${PV}
}

# A static(-pie), already stripped binary: no ldflags of ours, nothing for Yocto to strip.
# nooelint: oelint.vars.insaneskip
INSANE_SKIP:${PN} += "already-stripped ldflags"

RCONFLICTS:${PN} = "svc-agent"
