# SPDX-License-Identifier: MIT
SUMMARY = "rtlab-probe, the measuring engine of the rtlab real-time latency lab"
DESCRIPTION = "One C11 binary (libc and pthreads only) with the timer, task \
               switch, OS noise, UDP round trip and event latency probes and the \
               journaled system primitives that rtlab's host uses to shield and \
               restore a board. It writes JSON Lines on stdout."
SECTION = "devel"
LICENSE = "MIT"
LIC_FILES_CHKSUM = "file://meson.build;beginline=1;endline=1;md5=b2dccaa94b3629a08bfb4f983cad6f89"
CVE_PRODUCT = "rtlab"

# The release tarball that `meson dist` makes (rtlab-VERSION.tar.xz): set where it
# is and its sha256 in local.conf (docs/embedded.md), e.g.
#   RTLAB_RELEASE_URL = "https://HOST/PATH"      (or "file:///DIR")
#   RTLAB_SHA256 = "<sha256sum of rtlab-0.1.0.tar.xz>"
# For a git repository or a checkout instead, see docs/embedded.md (a bbappend
# with SRC_URI and SRCREV, or externalsrc).
RTLAB_RELEASE_URL ??= ""
RTLAB_SHA256 ??= ""
SRC_URI = "${RTLAB_RELEASE_URL}/rtlab-${PV}.tar.xz"
SRC_URI[sha256sum] = "${RTLAB_SHA256}"
S = "${UNPACKDIR}/rtlab-${PV}"

inherit meson

# The engine only: no Python host package, no C unit tests, not the other
# architectures' engines. Linked dynamically against the image's C library
# (docs/embedded.md says why).
EXTRA_OEMESON = "-Dpython=false -Dtests=false -Dboard_engines=disabled -Dstatic=disabled"

# The udp probe's AF_XDP path needs only the kernel's UAPI headers (5.9 or later).
PACKAGECONFIG ??= "af-xdp"
PACKAGECONFIG[af-xdp] = "-Daf_xdp=enabled,-Daf_xdp=disabled"

# One line that says what to set, instead of a fetch error about "/rtlab-0.1.0.tar.xz".
# nooelint: oelint.task.noanonpython
python () {
    if not d.getVar("RTLAB_RELEASE_URL") and d.getVar("SRC_URI").startswith("/"):
        raise bb.parse.SkipRecipe("set RTLAB_RELEASE_URL and RTLAB_SHA256 in local.conf "
                                  "(or SRC_URI and SRCREV in a bbappend), see docs/embedded.md of rtlab")
}
