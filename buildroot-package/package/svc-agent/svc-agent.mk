################################################################################
#
# svc-agent
#
################################################################################

SVC_AGENT_VERSION = 0.1.0
SVC_AGENT_SITE = $(BR2_EXTERNAL_SVC_AGENT_PATH)/..
SVC_AGENT_SITE_METHOD = local
SVC_AGENT_LICENSE = Apache-2.0

# The unit and defaults come from the source tree's dist/ (single source, no copy here).
define SVC_AGENT_INSTALL_INIT_SYSTEMD
	$(INSTALL) -D -m 0644 $(@D)/dist/svc-agent.service \
		$(TARGET_DIR)/usr/lib/systemd/system/svc-agent.service
endef

SVC_AGENT_CREDS = $(call qstrip,$(BR2_PACKAGE_SVC_AGENT_CREDENTIALS_FILE))
SVC_AGENT_DEFAULTS = $(or $(call qstrip,$(BR2_PACKAGE_SVC_AGENT_DEFAULTS_FILE)),$(@D)/dist/svc-defaults.json)

define SVC_AGENT_INSTALL_LAYOUT
	mkdir -p $(TARGET_DIR)/opt/svc/cache $(TARGET_DIR)/opt/svc/bin
	mv $(TARGET_DIR)/usr/bin/svc-agent $(TARGET_DIR)/opt/svc/cache/svc-agent-$(SVC_AGENT_VERSION)
	ln -sf ../cache/svc-agent-$(SVC_AGENT_VERSION) $(TARGET_DIR)/opt/svc/bin/svc-agent
	$(INSTALL) -D -m 0600 $(SVC_AGENT_DEFAULTS) $(TARGET_DIR)/etc/svc-defaults.json
	$(if $(SVC_AGENT_CREDS),$(INSTALL) -D -m 0600 $(SVC_AGENT_CREDS) $(TARGET_DIR)/etc/svc.json)
endef
SVC_AGENT_POST_INSTALL_TARGET_HOOKS += SVC_AGENT_INSTALL_LAYOUT

$(eval $(cargo-package))
