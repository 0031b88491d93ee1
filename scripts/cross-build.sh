#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the static engines for boards: a statically linked, stripped, release
# rtlab-probe for this machine's architecture and for every architecture whose
# Debian cross compiler is installed, each installed as
#   $VENV/share/rtlab/engines/<arch>/rtlab-probe
# (rtlab/engine/builds.py picks one by the board's `uname -m`). Build directories:
# build/cross/<arch>/. An engine is rebuilt only when the engine's sources (or this
# script, or the meson files) changed since it was installed (a content stamp
# beside it). One line per architecture: built / up to date (with its size) or
# skipped (no toolchain). A toolchain that is there but fails to build fails the
# script (after the other architectures), with the end of its build log.
#
#   scripts/cross-build.sh [ARCH...]     default: x86_64 aarch64 armhf ppc64 ppc
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
[[ -d "$VENV/bin" ]] && export PATH="$PWD/$VENV/bin:$PATH"
MESON=$(command -v meson || true)
if [[ -z $MESON ]]; then
  echo "cross-build: meson not found (run scripts/setup.sh, or apt-get install meson ninja-build)" >&2
  exit 1
fi

ALL_ARCHES=(x86_64 aarch64 armhf ppc64 ppc)
declare -A TRIPLET=([x86_64]=x86_64-linux-gnu [aarch64]=aarch64-linux-gnu
                    [armhf]=arm-linux-gnueabihf [ppc64]=powerpc64-linux-gnu
                    [ppc]=powerpc-linux-gnu)
declare -A DEBPKG=([x86_64]="gcc-x86-64-linux-gnu libc6-dev-amd64-cross"
                   [aarch64]="gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
                   [armhf]="gcc-arm-linux-gnueabihf libc6-dev-armhf-cross"
                   [ppc64]="gcc-powerpc64-linux-gnu libc6-dev-ppc64-cross"
                   [ppc]="gcc-powerpc-linux-gnu libc6-dev-powerpc-cross")

# This machine's build architecture (the names of rtlab/engine/builds.py).
case "$(uname -m)" in
  x86_64) native=x86_64 ;;
  aarch64 | arm64) native=aarch64 ;;
  armv6l | armv7l | armv7hl | armv8l) native=armhf ;;
  ppc64) native=ppc64 ;;
  ppc) native=ppc ;;
  *) native="" ;;
esac

# Everything the engines are built from; a change of any of it rebuilds them.
stamp_of() {
  {
    find engine -type f \( -name '*.c' -o -name '*.h' -o -name 'meson.build' -o -name '*.ini' \) \
      -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    sha256sum meson.build meson_options.txt scripts/cross-build.sh
    echo "arch=$1"
  } | sha256sum | cut -d' ' -f1
}

arches=("$@")
((${#arches[@]})) || arches=("${ALL_ARCHES[@]}")
failed=()
for arch in "${arches[@]}"; do
  if [[ -z ${TRIPLET[$arch]:-} ]]; then
    echo "cross-build: unknown architecture '$arch' (known: ${ALL_ARCHES[*]})" >&2
    exit 2
  fi
  triplet=${TRIPLET[$arch]}
  dest="$VENV/share/rtlab/engines/$arch"
  bdir="build/cross/$arch"
  # -O2, not release's -O3: 2-3 % smaller, and the measuring loops are no slower
  # (the overhead probe's clock-read and syscall loops measured alike). No unwind
  # tables (nothing unwinds: no C++, no pthread_cancel/pthread_exit) and no PIE
  # code in a binary that is linked static non-PIE anyway. docs/engine.md has the sizes.
  setup_args=(-Dpython=false -Dstatic=enabled -Dtests=false -Doptimization=2 -Ddebug=false
              -Db_ndebug=true "-Dc_args=-fno-asynchronous-unwind-tables -fno-pie"
              -Dc_link_args=-no-pie)
  if [[ $arch == "$native" ]]; then
    strip_tool=strip
    command -v cc >/dev/null || { printf 'cross-build: %-8s skipped: no C compiler\n' "$arch"; continue; }
  else
    if ! command -v "$triplet-gcc" >/dev/null; then
      printf 'cross-build: %-8s skipped: no %s (apt-get install %s)\n' "$arch" "$triplet-gcc" \
        "${DEBPKG[$arch]}"
      continue
    fi
    setup_args+=(--cross-file "engine/cross/$arch.ini")
    strip_tool=$triplet-strip
  fi

  stamp=$(stamp_of "$arch")
  if [[ -x "$dest/rtlab-probe" && -f "$dest/.stamp" && "$(cat "$dest/.stamp")" == "$stamp" ]]; then
    printf 'cross-build: %-8s up to date  %8d bytes  %s\n' "$arch" \
      "$(stat -c %s "$dest/rtlab-probe")" "$dest/rtlab-probe"
    continue
  fi

  mkdir -p "$bdir"
  log="$bdir/build.log"
  if [[ -f "$bdir/build.ninja" ]]; then
    setup=("$MESON" setup --reconfigure "$bdir" "${setup_args[@]}")
  else
    setup=("$MESON" setup "$bdir" "${setup_args[@]}")
  fi
  if ! { "${setup[@]}" && "$MESON" compile -C "$bdir" rtlab-probe; } >"$log" 2>&1; then
    printf 'cross-build: %-8s FAILED (toolchain %s is installed); the end of %s:\n' "$arch" \
      "$triplet-gcc" "$log" >&2
    tail -n 25 "$log" | sed 's/^/    /' >&2
    failed+=("$arch")
    continue
  fi
  bin="$bdir/engine/rtlab-probe"
  if LC_ALL=C readelf -lW "$bin" | grep -q 'program interpreter'; then
    printf 'cross-build: %-8s FAILED: %s is not statically linked\n' "$arch" "$bin" >&2
    failed+=("$arch")
    continue
  fi
  mkdir -p "$dest"
  "$strip_tool" -o "$dest/.rtlab-probe.new" "$bin"
  chmod 0755 "$dest/.rtlab-probe.new"
  mv -f "$dest/.rtlab-probe.new" "$dest/rtlab-probe"
  echo "$stamp" >"$dest/.stamp"
  size=$(stat -c %s "$dest/rtlab-probe")
  note=""
  ((size < 1048576)) || note="  (over 1 MiB: static glibc on this architecture)"
  printf 'cross-build: %-8s built       %8d bytes  %s%s\n' "$arch" "$size" "$dest/rtlab-probe" "$note"
done

if ((${#failed[@]})); then
  echo "cross-build: FAILED for: ${failed[*]}" >&2
  exit 1
fi
