# What an image pre-seeds for svc-agent: the manufacturer provisioning defaults
# /etc/svc-defaults.json and the vendor's update-signing public key /etc/svc-signing.pub.
# Never machine credentials (/etc/svc.json): one image goes to many devices, and each device
# needs its own identity (README, "Device identity"). Override from a product layer
# (svc-agent-config.bbappend) or with these variables in local.conf:
#   SVC_DEFAULTS_FILE     build-host path of a defaults file; empty: files/svc-defaults.json
#                         (a copy of the project's dist/svc-defaults.json).
#   SVC_SIGNING_KEY_FILE  build-host path of the ed25519 public key; empty: none (updates are
#                         then checked by sha256, ELF and version only).
SUMMARY = "svc-agent provisioning defaults and update-signing key"
DESCRIPTION = "Pre-seeds /etc/svc-defaults.json and /etc/svc-signing.pub for svc-agent."
HOMEPAGE = "https://github.com/svc-agent/svc-agent"
BUGTRACKER = "https://github.com/svc-agent/svc-agent/issues"
SECTION = "admin"
LICENSE = "Apache-2.0"
# Configuration files carry no licence file: oe-core's copy of the Apache-2.0 text.
# nooelint: oelint.var.licenseremotefile
LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/Apache-2.0;md5=89aea4e17d99a7cacdbeed46a0096b10"
CVE_PRODUCT = "svc-agent"

INHIBIT_DEFAULT_DEPS = "1"

SVC_DEFAULTS_FILE ??= ""
SVC_SIGNING_KEY_FILE ??= ""

# Absolute build-host paths in SRC_URI: their checksums are tracked, so a changed file
# rebuilds the image; they unpack under subdir=<name> with the path kept.
SRC_URI = "${@'file://' + d.getVar('SVC_DEFAULTS_FILE') + ';subdir=defaults' if d.getVar('SVC_DEFAULTS_FILE') else 'file://svc-defaults.json;subdir=defaults'}"
SRC_URI += "${@'file://' + d.getVar('SVC_SIGNING_KEY_FILE') + ';subdir=key' if d.getVar('SVC_SIGNING_KEY_FILE') else ''}"

# Scarthgap unpacks into ${WORKDIR}, later releases into ${UNPACKDIR}.
UNPACK_ROOT = "${@(d.getVar('UNPACKDIR') or d.getVar('WORKDIR'))}"
S = "${UNPACK_ROOT}"

do_configure[noexec] = "1"
do_compile[noexec] = "1"

do_install() {
    install -d ${D}${sysconfdir}
    if [ -n "${SVC_DEFAULTS_FILE}" ]; then
        install -m 0644 "${UNPACK_ROOT}/defaults${SVC_DEFAULTS_FILE}" ${D}${sysconfdir}/svc-defaults.json
    else
        install -m 0644 ${UNPACK_ROOT}/defaults/svc-defaults.json ${D}${sysconfdir}/svc-defaults.json
    fi
    if [ -n "${SVC_SIGNING_KEY_FILE}" ]; then
        install -m 0644 "${UNPACK_ROOT}/key${SVC_SIGNING_KEY_FILE}" ${D}${sysconfdir}/svc-signing.pub
    fi
}

do_install[vardeps] += "SVC_DEFAULTS_FILE SVC_SIGNING_KEY_FILE"

CONFFILES:${PN} = "${sysconfdir}/svc-defaults.json ${sysconfdir}/svc-signing.pub"
