################################################################################
#
# rtlab-probe
#
################################################################################

RTLAB_PROBE_TARBALL = $(call qstrip,$(BR2_PACKAGE_RTLAB_PROBE_TARBALL))
ifeq ($(RTLAB_PROBE_TARBALL),)
# The rtlab source tree around this BR2_EXTERNAL tree; keep VERSION equal to
# meson.build's project version.
RTLAB_PROBE_VERSION = 0.1.0
RTLAB_PROBE_SITE = $(BR2_EXTERNAL_RTLAB_PATH)/../..
RTLAB_PROBE_SITE_METHOD = local
# Copy only what the engine is built from (not .venv, build trees, the host package).
RTLAB_PROBE_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--include=/meson.build --include=/meson_options.txt \
	--include=/engine/*** --exclude=*
else
RTLAB_PROBE_SOURCE = $(notdir $(RTLAB_PROBE_TARBALL))
RTLAB_PROBE_SITE = $(patsubst %/,%,$(dir $(RTLAB_PROBE_TARBALL)))
RTLAB_PROBE_VERSION = $(patsubst rtlab-%,%,$(basename $(basename $(RTLAB_PROBE_SOURCE))))
endif

RTLAB_PROBE_LICENSE = MIT

# The engine only: no Python host package, no C unit tests, not the other
# architectures' engines. Linked like the rest of the image (shared libc),
# static only when the image is static.
RTLAB_PROBE_CONF_OPTS = \
	-Dpython=false \
	-Dtests=false \
	-Dboard_engines=disabled \
	-Dstatic=$(if $(BR2_STATIC_LIBS),enabled,disabled) \
	-Daf_xdp=$(if $(BR2_TOOLCHAIN_HEADERS_AT_LEAST_5_9),enabled,disabled)

$(eval $(meson-package))
