################################################################################
#
# svc-agent
#
################################################################################

SVC_AGENT_LICENSE = Apache-2.0
SVC_AGENT_LICENSE_FILES = LICENSE

# Both routes install a position-independent binary, which the kernel maps at a random
# address (docs/packaging.md, "Position-independent binaries"): the release's is static-pie;
# from source, the toolchain is glibc (systemd needs it) and rustc's *-linux-gnu targets link
# a dynamically linked PIE with the toolchain's gcc.
ifeq ($(BR2_PACKAGE_SVC_AGENT_PREBUILT),y)
# A release's static musl binary (static-pie), with the release's LICENSE next to it.
SVC_AGENT_VERSION = 0.1.0
SVC_AGENT_INSTALLED_VERSION = $(SVC_AGENT_VERSION)
SVC_AGENT_ARCH = $(if $(BR2_aarch64),aarch64,x86_64)
SVC_AGENT_SITE = https://github.com/svc-agent/svc-agent/releases/download/v$(SVC_AGENT_VERSION)
SVC_AGENT_SOURCE = svc-agent-$(SVC_AGENT_ARCH)
SVC_AGENT_EXTRA_DOWNLOADS = LICENSE

define SVC_AGENT_EXTRACT_CMDS
	$(INSTALL) -D -m 0755 $(SVC_AGENT_DL_DIR)/$(SVC_AGENT_SOURCE) $(@D)/svc-agent
	$(INSTALL) -D -m 0644 $(SVC_AGENT_DL_DIR)/LICENSE $(@D)/LICENSE
endef
SVC_AGENT_BINARY = $(@D)/svc-agent
else
# A pinned commit of the sources (the release's), vendored at download time by the cargo
# package infrastructure, so that the build itself is offline.
SVC_AGENT_VERSION = 7135e1231d719b34830d2f42163e68fbeb03332b
SVC_AGENT_INSTALLED_VERSION = 0.1.0
SVC_AGENT_SITE = https://github.com/svc-agent/svc-agent.git
SVC_AGENT_SITE_METHOD = git
SVC_AGENT_CARGO_BUILD_OPTS = --bin svc-agent
# The state and credentials directories are also compiled in (build.rs), so that the tools
# find them without the unit's environment.
SVC_AGENT_CARGO_ENV = \
	SVC_STATE_DIR="$(SVC_AGENT_STATE_DIR)" \
	SVC_CREDENTIALS_DIR="$(SVC_AGENT_CREDENTIALS_DIR)"
SVC_AGENT_BINARY = $(@D)/target/$(RUSTC_TARGET_NAME)/$(if $(BR2_ENABLE_DEBUG),debug,release)/svc-agent

# The binary reports its Cargo.toml version: the installed name must say the same.
define SVC_AGENT_CHECK_VERSION
	grep -qx 'version = "$(SVC_AGENT_INSTALLED_VERSION)"' $(@D)/Cargo.toml || \
		{ echo "svc-agent: $(SVC_AGENT_VERSION) is not version $(SVC_AGENT_INSTALLED_VERSION)"; exit 1; }
endef
SVC_AGENT_POST_EXTRACT_HOOKS += SVC_AGENT_CHECK_VERSION
endif

SVC_AGENT_STATE_DIR = $(call qstrip,$(BR2_PACKAGE_SVC_AGENT_STATE_DIR))
SVC_AGENT_CREDENTIALS_DIR = $(call qstrip,$(BR2_PACKAGE_SVC_AGENT_CREDENTIALS_DIR))
SVC_AGENT_IMAGE_AGENT = /usr/lib/svc-agent/svc-agent
SVC_AGENT_DEFAULTS = $(or $(call qstrip,$(BR2_PACKAGE_SVC_AGENT_DEFAULTS_FILE)),$(SVC_AGENT_PKGDIR)/svc-defaults.json)
SVC_AGENT_SIGNING_KEY = $(call qstrip,$(BR2_PACKAGE_SVC_AGENT_SIGNING_KEY_FILE))

# The device layout (the project's docs/packaging.md): the binary in /opt/svc/cache under
# its version, a relative link in /opt/svc/bin, as the agent's own updates make them; only
# svc-agent (the sources also hold svc-server). No credentials: they are per device.
ifeq ($(SVC_AGENT_STATE_DIR):$(SVC_AGENT_CREDENTIALS_DIR),/opt/svc:/etc)
define SVC_AGENT_INSTALL_LAYOUT
	$(INSTALL) -D -m 0755 $(SVC_AGENT_BINARY) \
		$(TARGET_DIR)/opt/svc/cache/svc-agent-$(SVC_AGENT_INSTALLED_VERSION)
	mkdir -p $(TARGET_DIR)/opt/svc/bin
	ln -sfn ../cache/svc-agent-$(SVC_AGENT_INSTALLED_VERSION) $(TARGET_DIR)/opt/svc/bin/svc-agent
endef
else
# State on a data partition (read-only root): the image's agent outside the state directory,
# which the first start seeds (`svc-agent seed`, from the unit's drop-in); a profile script
# gives shells the same paths as the unit.
define SVC_AGENT_INSTALL_LAYOUT
	$(INSTALL) -D -m 0755 $(SVC_AGENT_BINARY) $(TARGET_DIR)$(SVC_AGENT_IMAGE_AGENT)
	mkdir -p $(TARGET_DIR)/etc/profile.d
	printf 'SVC_STATE_DIR=%s\nSVC_CREDENTIALS_DIR=%s\nexport SVC_STATE_DIR SVC_CREDENTIALS_DIR\n' \
		"$(SVC_AGENT_STATE_DIR)" "$(SVC_AGENT_CREDENTIALS_DIR)" >$(TARGET_DIR)/etc/profile.d/svc-agent.sh
endef
define SVC_AGENT_INSTALL_DATA_PARTITION_DROPIN
	mkdir -p $(TARGET_DIR)/usr/lib/systemd/system/svc-agent.service.d
	sed -e 's#@STATE_DIR@#$(SVC_AGENT_STATE_DIR)#g' \
		-e 's#@CREDENTIALS_DIR@#$(SVC_AGENT_CREDENTIALS_DIR)#g' \
		-e 's#@IMAGE_AGENT@#$(SVC_AGENT_IMAGE_AGENT)#g' \
		$(SVC_AGENT_PKGDIR)/svc-agent-data-partition.conf.in \
		>$(TARGET_DIR)/usr/lib/systemd/system/svc-agent.service.d/data-partition.conf
endef
endif

define SVC_AGENT_INSTALL_TARGET_CMDS
	$(SVC_AGENT_INSTALL_LAYOUT)
	$(INSTALL) -D -m 0644 $(SVC_AGENT_DEFAULTS) $(TARGET_DIR)/etc/svc-defaults.json
	$(if $(SVC_AGENT_SIGNING_KEY),$(INSTALL) -D -m 0644 $(SVC_AGENT_SIGNING_KEY) $(TARGET_DIR)/etc/svc-signing.pub)
endef

# A hawkBit fleet (README "hawkBit fleets"): the token file (0600, root's: the permissions
# table below) and a unit drop-in that joins at the first start, by the script the Yocto layer
# shares (a copy of the project's dist/svc-agent-hawkbit-image.sh). It checks the settings
# and refuses a partial set, naming the option. The values reach it in its environment,
# quoted for the shell; the token is copied, never printed.
svc-agent-shq = '$(subst ','\'',$(call qstrip,$(1)))'
SVC_AGENT_HAWKBIT_ENV = \
	SVC_HAWKBIT_URL=$(call svc-agent-shq,$(BR2_PACKAGE_SVC_AGENT_HAWKBIT_URL)) \
	SVC_HAWKBIT_TENANT=$(call svc-agent-shq,$(BR2_PACKAGE_SVC_AGENT_HAWKBIT_TENANT)) \
	SVC_HAWKBIT_CONTROLLER_ID=$(call svc-agent-shq,$(BR2_PACKAGE_SVC_AGENT_HAWKBIT_CONTROLLER_ID)) \
	SVC_HAWKBIT_AUTH=$(call svc-agent-shq,$(BR2_PACKAGE_SVC_AGENT_HAWKBIT_AUTH)) \
	SVC_HAWKBIT_AUTO_CONFIRM=$(if $(BR2_PACKAGE_SVC_AGENT_HAWKBIT_AUTO_CONFIRM),1) \
	SVC_HAWKBIT_TOKEN_FILE=$(call svc-agent-shq,$(BR2_PACKAGE_SVC_AGENT_HAWKBIT_TOKEN_FILE))

define SVC_AGENT_INSTALL_HAWKBIT
	$(SVC_AGENT_HAWKBIT_ENV) sh $(SVC_AGENT_PKGDIR)/svc-agent-hawkbit-image.sh \
		$(TARGET_DIR) /usr/lib/systemd/system $(SVC_AGENT_STATE_DIR) BR2_PACKAGE_SVC_AGENT_HAWKBIT_
endef
SVC_AGENT_POST_INSTALL_TARGET_HOOKS += SVC_AGENT_INSTALL_HAWKBIT

ifneq ($(call qstrip,$(BR2_PACKAGE_SVC_AGENT_HAWKBIT_TOKEN_FILE)),)
define SVC_AGENT_PERMISSIONS
	/etc/svc-hawkbit.token f 600 0 0 - - - - -
endef
endif

# Enabled by Buildroot's `systemctl preset-all` (the unit has WantedBy=multi-user.target).
define SVC_AGENT_INSTALL_INIT_SYSTEMD
	$(INSTALL) -D -m 0644 $(SVC_AGENT_PKGDIR)/svc-agent.service \
		$(TARGET_DIR)/usr/lib/systemd/system/svc-agent.service
	$(SVC_AGENT_INSTALL_DATA_PARTITION_DROPIN)
endef

ifeq ($(BR2_PACKAGE_SVC_AGENT_PREBUILT),y)
$(eval $(generic-package))
else
$(eval $(cargo-package))
endif
