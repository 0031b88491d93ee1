#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up rtlab on a fresh Debian/Ubuntu machine: system packages (apt, when root),
# a local virtual environment (.venv) with the Python package and the engine
# (rtlab-probe) built and installed into it. Safe to run again: it only does
# what is missing or out of date.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
# Debian packages rtlab needs to build, to run its loads and peers, and to test.
# libpq5: the client library of the PostgreSQL driver (psycopg); postgresql: the server
# binaries the tests start a throw-away server from (no system cluster, see below).
PKGS=(python3 python3-venv python3-dev gcc libc6-dev make meson ninja-build
      rt-tests stress-ng sockperf jitterdebugger iproute2 util-linux procps
      chromium linux-perf libpq5 postgresql
      # the monitor's shipped Prometheus configuration and rules are checked with
      # promtool, and a real Prometheus server scrapes a monitor in the tests
      prometheus
      # boards: the SSH client (the user's ~/.ssh/config), the cross compilers of the
      # static engines, qemu-user to test them, qemu-system and cpio for the emulated
      # board lab, dropbear (binaries only, no daemon) as the board-side SSH server
      openssh-client dropbear-bin cpio qemu-user-static qemu-system-x86 qemu-system-arm
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
      gcc-powerpc64-linux-gnu libc6-dev-ppc64-cross gcc-powerpc-linux-gnu libc6-dev-powerpc-cross)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    if [[ " ${missing[*]} " == *" postgresql "* ]]; then
      # Debian's postgresql package creates and starts a system cluster ("main", port
      # 5432) when none exists: a daemon on the machine being measured that rtlab does
      # not use. Skip that for this installation only (postgresql-common reads
      # createcluster.d/); `pg_createcluster --start 15 main` creates it later if wanted.
      apt-get install -y -qq --no-install-recommends postgresql-common >/dev/null
      dropdir=/etc/postgresql-common/createcluster.d
      dropin=$dropdir/rtlab-setup-no-main-cluster.conf
      [[ -d $dropdir ]] && undo="rm -f $dropin" || undo="rm -rf $dropdir"
      mkdir -p "$dropdir"
      echo "create_main_cluster = false" >"$dropin"
      trap '$undo' EXIT
    fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [[ -z ${undo:-} ]] || { $undo; trap - EXIT; }
  else
    echo "setup: missing system packages: ${missing[*]}" >&2
    echo "setup: install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup: creating virtual environment $VENV"
  python3 -m venv "$VENV"
fi
stamp="$VENV/.rtlab-installed"
if [[ ! -f "$VENV/.rtlab-buildtools" ]]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
      "meson-python>=0.15" "meson>=1.0.1" ninja
  touch "$VENV/.rtlab-buildtools"
fi
# Reinstall when any source of the package or engine changed since the last install.
if [[ ! -f "$stamp" ]] || [[ -n "$(find rtlab engine scenarios docs/schema meson.build \
      meson_options.txt pyproject.toml -newer "$stamp" -type f -print -quit 2>/dev/null)" ]]; then
  echo "setup: building and installing rtlab (engine + Python package) into $VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
      ".[dev,postgres]"
  touch "$stamp"
fi

# The static engines for boards, one per architecture whose cross compiler is
# installed (rebuilt only when the engine's sources changed).
VENV="$VENV" scripts/cross-build.sh
