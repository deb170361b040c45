# svc-agent built from source with oe-core's cargo class, at a pinned commit. Needs a Rust
# of at least 1.80 (wrynose ships 1.94; on scarthgap, whose Rust is 1.75, use svc-agent-bin).
require svc-agent.inc

LIC_FILES_CHKSUM = "file://LICENSE;md5=3b83ef96387f14655fc854ddc3c6bd57"

# PV is the version the source at SRCREV declares (Cargo.toml), as a git build;
# do_configure checks that they agree.
SVC_BASE_VERSION = "0.1.0"
PV = "${SVC_BASE_VERSION}+git"

SRC_URI = "git://github.com/svc-agent/svc-agent.git;protocol=https;branch=main"
# A fixed commit (never AUTOREV): parsing needs no network and a build is exact.
SRCREV = "7135e1231d719b34830d2f42163e68fbeb03332b"

inherit cargo cargo-update-recipe-crates

require ${BPN}-crates.inc

# Only the agent ships from this recipe.
CARGO_BUILD_FLAGS += "--bin svc-agent"

# The state and credentials directories are also compiled in (build.rs), so that the tools
# find them without the unit's environment.
export SVC_STATE_DIR
export SVC_CREDENTIALS_DIR

# The binary reports the version of its Cargo.toml (build.rs); PV must not claim another.
do_configure:prepend() {
    cargo_version=$(sed -n 's/^version = "\(.*\)"/\1/p' ${S}/Cargo.toml | head -n 1)
    if [ "$cargo_version" != "${SVC_BASE_VERSION}" ]; then
        bbfatal "the source at ${SRCREV} is version $cargo_version, the recipe says ${SVC_BASE_VERSION}"
    fi
}

do_install() {
    install -d ${D}/opt/svc/cache ${D}${systemd_system_unitdir}
    install -m 0755 ${B}/target/${CARGO_TARGET_SUBDIR}/svc-agent ${D}/opt/svc/cache/svc-agent-${SVC_BASE_VERSION}
    install_svc_layout ${SVC_BASE_VERSION}
    install -m 0644 ${S}/dist/svc-agent.service ${D}${systemd_system_unitdir}/svc-agent.service
}

RCONFLICTS:${PN} = "svc-agent-bin"
