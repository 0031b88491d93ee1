#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the static engines for boards: a statically linked, stripped, release
# rtlab-probe per build architecture, each installed as
#   DIR/<arch>/rtlab-probe        (DIR: --into, default $VENV/share/rtlab/engines)
# with DIR/<arch>/rtlab-probe.json beside it (what built it: version, libc,
# toolchain). rtlab/engine/builds.py picks one by the board's `uname -m`.
#
# Toolchains (--toolchain, default zig when the ziglang package is importable):
#   zig   the Zig toolchain from PyPI (`pip install ziglang`): clang and musl for
#         every architecture, engine/cross/musl-<arch>.ini; no system compiler needed
#   gnu   Debian's gcc and static glibc: native `cc` for this machine's architecture,
#         the cross compilers engine/cross/<arch>.ini for the others (the fallback)
#
# Build directories: build/cross/<toolchain>-<arch>/ (--build-root). An engine is
# rebuilt only when the engine's sources (or this script, the meson or cross files,
# the toolchain) changed since it was installed (a content stamp in its build dir). One line
# per architecture: built / up to date (with its size) or skipped (no toolchain). A
# toolchain that is there but fails to build fails the script (after the other
# architectures), with the end of its build log.
#
#   scripts/cross-build.sh [--toolchain zig|gnu] [--into DIR] [--build-root DIR]
#                          [--python PY] [ARCH...]   default: x86_64 aarch64 armhf ppc64 ppc
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)

usage() { echo "cross-build: $1 (usage: scripts/cross-build.sh [--toolchain zig|gnu] [--into DIR] [--build-root DIR] [--python PY] [ARCH...])" >&2; exit 2; }
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

VENV=$(abspath "${VENV:-.venv}")  # an absolute VENV (make VENV=/path) works too
toolchain=${RTLAB_CROSS_TOOLCHAIN:-}
into="" build_root="" py=""
arches=()
while (($#)); do
  case $1 in
    --toolchain) (($# > 1)) || usage "--toolchain needs zig or gnu"; toolchain=$2; shift 2 ;;
    --into) (($# > 1)) || usage "--into needs a directory"; into=$(abspath "$2"); shift 2 ;;
    --build-root) (($# > 1)) || usage "--build-root needs a directory"; build_root=$(abspath "$2"); shift 2 ;;
    --python) (($# > 1)) || usage "--python needs an interpreter"; py=$2; shift 2 ;;
    -*) usage "unknown option $1" ;;
    *) arches+=("$1"); shift ;;
  esac
done
cd "$src"
[[ -d "$VENV/bin" ]] && export PATH="$VENV/bin:$PATH"
into=${into:-$VENV/share/rtlab/engines}
build_root=${build_root:-$PWD/build/cross}
if [[ -z $py ]]; then
  if [[ -x "$VENV/bin/python" ]]; then py=$VENV/bin/python; else py=python3; fi
fi
MESON=$(command -v meson || true)
if [[ -z $MESON ]]; then
  echo "cross-build: meson not found (run scripts/setup.sh, or pip install meson ninja)" >&2
  exit 1
fi

# The zig binary of the ziglang package (empty when it is not installed).
zig=$("$py" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))' \
      2>/dev/null || true)
[[ -n $zig && -x $zig ]] || zig=""
if [[ -z $toolchain ]]; then
  if [[ -n $zig ]]; then toolchain=zig; else toolchain=gnu; fi
fi
case $toolchain in
  zig) [[ -n $zig ]] || { echo "cross-build: --toolchain zig: $py has no ziglang package (pip install ziglang)" >&2; exit 1; } ;;
  gnu) ;;
  *) usage "unknown toolchain '$toolchain' (zig or gnu)" ;;
esac

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
version=$(sed -n "s/^ *version: '\([^']*\)'.*/\1/p" meson.build | head -n 1)
zig_version=""
[[ -z $zig ]] || zig_version=$("$zig" version)

# Everything the engines are built from; a change of any of it rebuilds them.
stamp_of() {
  {
    find engine -type f \( -name '*.c' -o -name '*.h' -o -name 'meson.build' -o -name '*.ini' \
      -o -name '*.def' \) -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    sha256sum meson.build meson_options.txt scripts/cross-build.sh
    echo "arch=$1 toolchain=$toolchain zig=$zig_version"
  } | sha256sum | cut -d' ' -f1
}

# A program interpreter (PT_INTERP) means a dynamically linked ELF: exit 1 then.
is_static() {
  "$py" - "$1" <<'EOF'
import struct, sys
d = open(sys.argv[1], "rb").read()
end = "<" if d[5] == 1 else ">"
if d[4] == 2:
    phoff, = struct.unpack_from(end + "Q", d, 32); phentsize, phnum = struct.unpack_from(end + "HH", d, 54)
else:
    phoff, = struct.unpack_from(end + "I", d, 28); phentsize, phnum = struct.unpack_from(end + "HH", d, 42)
types = [struct.unpack_from(end + "I", d, phoff + i * phentsize)[0] for i in range(phnum)]
sys.exit(1 if 3 in types else 0)
EOF
}

# JSON string of a value (no quotes or backslashes are expected, but be safe).
jstr() { "$py" -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"; }

((${#arches[@]})) || arches=("${ALL_ARCHES[@]}")
for arch in "${arches[@]}"; do  # all of them before anything is created
  if [[ -z ${TRIPLET[$arch]:-} ]]; then
    echo "cross-build: unknown architecture '$arch' (known: ${ALL_ARCHES[*]})" >&2
    exit 2
  fi
done
failed=()
mkdir -p "$build_root"
if [[ $toolchain == zig ]]; then
  # the machine file that tells the musl-*.ini cross files where zig is
  zig_ini="$build_root/zig.ini"
  printf "# written by scripts/cross-build.sh\n[constants]\nzig = '%s'\n" "$zig" >"$zig_ini.new"
  mv -f "$zig_ini.new" "$zig_ini"
fi
for arch in "${arches[@]}"; do
  triplet=${TRIPLET[$arch]}
  dest="$into/$arch"
  bdir="$build_root/$toolchain-$arch"
  # -O2, not release's -O3: 2-3 % smaller, and the measuring loops are no slower
  # (the overhead probe's clock-read and syscall loops measured alike). No unwind
  # tables (nothing unwinds: no C++, no pthread_cancel/pthread_exit) and no PIE
  # code in a binary that is linked static non-PIE anyway. docs/engine.md has the sizes.
  c_args="-fno-asynchronous-unwind-tables -fno-pie"
  link_args="-no-pie"
  if [[ $toolchain == zig ]]; then
    # zig links the stripped binary itself (it has no strip for every target); musl's
    # CMSG_NXTHDR and NLMSG_OK macros compare signed with unsigned in the expansion
    # clang warns about inside our code (-Wsign-compare): theirs, not ours; zig's own
    # strchr & co. scan the whole string first: src/strscan.c replaces them
    c_args+=" -Wno-sign-compare -DRL_OWN_STRING_SCANS=1"
    link_args+=" -s"
    setup_args=(--cross-file "$zig_ini" --cross-file "$src/engine/cross/musl-$arch.ini")
    strip_tool=""
    libc="musl"  # (zig names no musl version; the toolchain line names zig's)
    tc_name="zig $zig_version cc -target $(sed -n "s/^c = .*'-target', '\([^']*\)'.*/\1/p" \
      "engine/cross/musl-$arch.ini")"
  elif [[ $arch == "$native" ]]; then
    strip_tool=strip
    command -v cc >/dev/null || { printf 'cross-build: %-8s skipped: no C compiler\n' "$arch"; continue; }
    setup_args=()
    libc="glibc $(ldd --version 2>/dev/null | sed -n '1s/.* //p')"
    tc_name="$(cc -dumpfullversion 2>/dev/null || echo cc) (native cc)"
    tc_name="gcc $tc_name"
  else
    if ! command -v "$triplet-gcc" >/dev/null; then
      printf 'cross-build: %-8s skipped: no %s (apt-get install %s, or pip install ziglang)\n' \
        "$arch" "$triplet-gcc" "${DEBPKG[$arch]}"
      continue
    fi
    setup_args=(--cross-file "$src/engine/cross/$arch.ini")
    strip_tool=$triplet-strip
    libc="glibc $(dpkg-query -W -f='${Version}' "${DEBPKG[$arch]##* }" 2>/dev/null || echo '?')"
    tc_name="gcc $("$triplet-gcc" -dumpfullversion) ($triplet)"
  fi
  setup_args+=(-Dpython=false -Dstatic=enabled -Dtests=false -Doptimization=2 -Ddebug=false
               -Db_ndebug=true "-Dc_args=$c_args" "-Dc_link_args=$link_args")

  # the stamp of what is installed at $dest, kept in the build directory (not in
  # $dest: a wheel carries everything there)
  stamp="$(stamp_of "$arch") $dest"
  rm -f "$dest/.stamp"  # where earlier versions of this script kept it
  if [[ -x "$dest/rtlab-probe" && -f "$bdir/installed.stamp" &&
        "$(cat "$bdir/installed.stamp")" == "$stamp" ]]; then
    printf 'cross-build: %-8s up to date  %8d bytes  %s\n' "$arch" \
      "$(stat -c %s "$dest/rtlab-probe")" "$dest/rtlab-probe"
    continue
  fi

  # meson keeps the compiler of a configured directory: a changed cross file (or
  # toolchain, or option) needs a fresh directory, not --reconfigure
  configured=$({ printf '%s\n' "${setup_args[@]}"; cat "${setup_args[@]/#/}" 2>/dev/null || true
                 [[ -z ${zig_ini:-} ]] || cat "$zig_ini"; } | sha256sum | cut -d' ' -f1)
  if [[ -d $bdir && "$(cat "$bdir/configured.stamp" 2>/dev/null)" != "$configured" ]]; then
    rm -rf "$bdir"
  fi
  mkdir -p "$bdir"
  echo "$configured" >"$bdir/configured.stamp"
  log="$bdir/build.log"
  if [[ -f "$bdir/build.ninja" ]]; then
    setup=("$MESON" setup --reconfigure "$bdir" "${setup_args[@]}")
  else
    setup=("$MESON" setup "$bdir" "${setup_args[@]}")
  fi
  if ! { "${setup[@]}" && "$MESON" compile -C "$bdir" rtlab-probe; } >"$log" 2>&1; then
    printf 'cross-build: %-8s FAILED (toolchain %s is installed); the end of %s:\n' "$arch" \
      "$tc_name" "$log" >&2
    tail -n 25 "$log" | sed 's/^/    /' >&2
    failed+=("$arch")
    continue
  fi
  bin="$bdir/engine/rtlab-probe"
  if ! is_static "$bin"; then
    printf 'cross-build: %-8s FAILED: %s is not statically linked\n' "$arch" "$bin" >&2
    failed+=("$arch")
    continue
  fi
  mkdir -p "$dest"
  if [[ -n $strip_tool ]]; then
    "$strip_tool" -o "$dest/.rtlab-probe.new" "$bin"
  else
    cp -f "$bin" "$dest/.rtlab-probe.new"
  fi
  chmod 0755 "$dest/.rtlab-probe.new"
  mv -f "$dest/.rtlab-probe.new" "$dest/rtlab-probe"
  printf '{"schema": 1, "arch": %s, "engine_version": %s, "libc": %s, "toolchain": %s}\n' \
    "$(jstr "$arch")" "$(jstr "$version")" "$(jstr "$libc")" "$(jstr "$tc_name")" \
    >"$dest/rtlab-probe.json"
  echo "$stamp" >"$bdir/installed.stamp"
  size=$(stat -c %s "$dest/rtlab-probe")
  note=""
  ((size < 1048576)) || note="  (over 1 MiB: static glibc on this architecture)"
  printf 'cross-build: %-8s built       %8d bytes  %s%s\n' "$arch" "$size" "$dest/rtlab-probe" "$note"
done

if ((${#failed[@]})); then
  echo "cross-build: FAILED for: ${failed[*]}" >&2
  exit 1
fi
