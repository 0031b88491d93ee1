# SPDX-License-Identifier: MIT
include $(sort $(wildcard $(BR2_EXTERNAL_RTLAB_PATH)/package/*/*.mk))
