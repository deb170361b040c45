# svc-hawkbit: an image whose svc-agent joins an Eclipse hawkBit (or gooseBit) fleet at its
# first start (README "hawkBit fleets"). In local.conf or the distro/product layer:
#   IMAGE_CLASSES += "svc-hawkbit"
#   SVC_HAWKBIT_URL = "https://hawkbit.example.com"
#   SVC_HAWKBIT_TENANT = "DEFAULT"
#   SVC_HAWKBIT_CONTROLLER_ID = "@machine-id"    (default; @hostname, or one id)
#   SVC_HAWKBIT_AUTH = "gateway-token"           (default target-token)
#   SVC_HAWKBIT_AUTO_CONFIRM = "1"               (default empty: consent waits for the device)
#   SVC_HAWKBIT_TOKEN_FILE = "/srv/secrets/hawkbit.token"   (build host, outside every layer)
# The three of URL, tenant and token file go together; without them the class does nothing.
# The token is copied into the image's root file system only, when the image is made
# (/etc/svc-hawkbit.token, 0600, root's): never into a package, a package feed, sstate or a log.
# The files and the rules are the project's dist/svc-agent-hawkbit-image.sh (a copy of it in
# recipes-svc/svc-agent/files/, found through BBPATH), shared with the Buildroot package.

SVC_HAWKBIT_URL ??= ""
SVC_HAWKBIT_TENANT ??= ""
SVC_HAWKBIT_CONTROLLER_ID ??= "@machine-id"
SVC_HAWKBIT_AUTH ??= "target-token"
SVC_HAWKBIT_AUTO_CONFIRM ??= ""
SVC_HAWKBIT_TOKEN_FILE ??= ""
# The same defaults as svc-agent.inc: the state directory holds the agent and the join's mark.
SVC_STATE_DIR ??= "/opt/svc"
SVC_HAWKBIT_SCRIPT = "${@bb.utils.which(d.getVar('BBPATH'), 'recipes-svc/svc-agent/files/svc-agent-hawkbit-image.sh')}"

# The values reach the script through its environment (no shell quoting of them here).
export SVC_HAWKBIT_URL
export SVC_HAWKBIT_TENANT
export SVC_HAWKBIT_CONTROLLER_ID
export SVC_HAWKBIT_AUTH
export SVC_HAWKBIT_AUTO_CONFIRM
export SVC_HAWKBIT_TOKEN_FILE

svc_hawkbit_rootfs() {
    sh ${SVC_HAWKBIT_SCRIPT} ${IMAGE_ROOTFS} ${systemd_system_unitdir} ${SVC_STATE_DIR} SVC_HAWKBIT_
}
ROOTFS_POSTPROCESS_COMMAND += "svc_hawkbit_rootfs"
do_rootfs[vardeps] += "SVC_HAWKBIT_URL SVC_HAWKBIT_TENANT SVC_HAWKBIT_CONTROLLER_ID SVC_HAWKBIT_AUTH SVC_HAWKBIT_AUTO_CONFIRM SVC_HAWKBIT_TOKEN_FILE SVC_STATE_DIR"
