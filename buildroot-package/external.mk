include $(sort $(wildcard $(BR2_EXTERNAL_SVC_AGENT_PATH)/package/*/*.mk))
