# svc-agent built from source with oe-core's cargo class. Needs a Rust of at least 1.80
# (wrynose ships 1.94; on scarthgap, whose Rust is 1.75, use meta-rust-bin or svc-agent-bin).
require svc-agent.inc

LIC_FILES_CHKSUM = "file://LICENSE;md5=3b83ef96387f14655fc854ddc3c6bd57"

SRC_URI = "git://github.com/svc-agent/svc-agent.git;protocol=https;branch=main"
# Pin the release commit in a product layer or local.conf (builds are offline and exact).
SVC_SRCREV ??= "${AUTOREV}"
SRCREV = "${SVC_SRCREV}"

# Scarthgap unpacks git to ${WORKDIR}/git, wrynose to ${UNPACKDIR}/${BP}.
S = "${@(d.getVar('UNPACKDIR') or d.getVar('WORKDIR')) + '/' + (d.getVar('BB_GIT_DEFAULT_DESTSUFFIX') or 'git')}"

inherit cargo cargo-update-recipe-crates

require ${BPN}-crates.inc

# Only the agent ships from this recipe.
CARGO_BUILD_FLAGS += "--bin svc-agent"
# The version svc-agent reports (`version --json`) and checks updates against.
export SVC_BUILD_VERSION = "${SVC_VERSION}"

do_install() {
    install_svc_layout ${B}/target/${CARGO_TARGET_SUBDIR}/svc-agent ${S}/dist/svc-agent.service
}

RCONFLICTS:${PN} = "svc-agent-bin"
