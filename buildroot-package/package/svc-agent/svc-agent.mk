################################################################################
#
# svc-agent
#
################################################################################

SVC_AGENT_VERSION = 0.1.0
SVC_AGENT_LICENSE = Apache-2.0
# The unit and the defaults template are the source tree's single copies (dist/).
SVC_AGENT_DIST = $(BR2_EXTERNAL_SVC_AGENT_PATH)/../dist

ifeq ($(BR2_PACKAGE_SVC_AGENT_PREBUILT),y)
SVC_AGENT_ARCH = $(if $(BR2_aarch64),aarch64,x86_64)
SVC_AGENT_SITE = https://github.com/svc-agent/svc-agent/releases/download/v$(SVC_AGENT_VERSION)
SVC_AGENT_SOURCE = svc-agent-$(SVC_AGENT_ARCH)

define SVC_AGENT_EXTRACT_CMDS
	$(INSTALL) -D -m 0755 $(SVC_AGENT_DL_DIR)/$(SVC_AGENT_SOURCE) $(@D)/svc-agent
endef
SVC_AGENT_BINARY = $(@D)/svc-agent
else
SVC_AGENT_SITE = $(BR2_EXTERNAL_SVC_AGENT_PATH)/..
SVC_AGENT_SITE_METHOD = local
SVC_AGENT_LICENSE_FILES = LICENSE
SVC_AGENT_CARGO_BUILD_OPTS = --bin svc-agent
SVC_AGENT_CARGO_ENV = SVC_BUILD_VERSION=$(SVC_AGENT_VERSION)
SVC_AGENT_BINARY = $(TARGET_DIR)/usr/bin/svc-agent
endif

SVC_AGENT_CREDS = $(call qstrip,$(BR2_PACKAGE_SVC_AGENT_CREDENTIALS_FILE))
SVC_AGENT_DEFAULTS = $(or $(call qstrip,$(BR2_PACKAGE_SVC_AGENT_DEFAULTS_FILE)),$(SVC_AGENT_DIST)/svc-defaults.json)
SVC_AGENT_SIGNING_KEY = $(call qstrip,$(BR2_PACKAGE_SVC_AGENT_SIGNING_KEY_FILE))

# The device layout (docs/packaging.md): the binary in /opt/svc/cache under its version,
# a relative link in /opt/svc/bin, as the agent's own updates make them.
define SVC_AGENT_INSTALL_LAYOUT
	mkdir -p $(TARGET_DIR)/opt/svc/cache $(TARGET_DIR)/opt/svc/bin
	$(INSTALL) -m 0755 $(SVC_AGENT_BINARY) \
		$(TARGET_DIR)/opt/svc/cache/svc-agent-$(SVC_AGENT_VERSION)
	rm -f $(TARGET_DIR)/usr/bin/svc-agent
	ln -sf ../cache/svc-agent-$(SVC_AGENT_VERSION) $(TARGET_DIR)/opt/svc/bin/svc-agent
	$(INSTALL) -D -m 0644 $(SVC_AGENT_DEFAULTS) $(TARGET_DIR)/etc/svc-defaults.json
	$(if $(SVC_AGENT_CREDS),$(INSTALL) -D -m 0600 $(SVC_AGENT_CREDS) $(TARGET_DIR)/etc/svc.json)
	$(if $(SVC_AGENT_SIGNING_KEY),$(INSTALL) -D -m 0644 $(SVC_AGENT_SIGNING_KEY) $(TARGET_DIR)/etc/svc-signing.pub)
endef

# Enabled by Buildroot's `systemctl preset-all` (the unit has WantedBy=multi-user.target).
define SVC_AGENT_INSTALL_INIT_SYSTEMD
	$(INSTALL) -D -m 0644 $(SVC_AGENT_DIST)/svc-agent.service \
		$(TARGET_DIR)/usr/lib/systemd/system/svc-agent.service
endef

ifeq ($(BR2_PACKAGE_SVC_AGENT_PREBUILT),y)
SVC_AGENT_INSTALL_TARGET_CMDS = $(SVC_AGENT_INSTALL_LAYOUT)
$(eval $(generic-package))
else
SVC_AGENT_POST_INSTALL_TARGET_HOOKS += SVC_AGENT_INSTALL_LAYOUT
$(eval $(cargo-package))
endif
