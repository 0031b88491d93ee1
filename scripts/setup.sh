#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up rtlab on a Debian/Ubuntu machine: system packages (apt, when root), a local
# virtual environment (.venv) with the Python package and the engine (rtlab-probe)
# built and installed into it, and the static board engines. Safe to run again: it
# only does what is missing or out of date.
#
#   scripts/setup.sh run     what `make run` needs: build, measure, loads, boards
#   scripts/setup.sh test    what `make test` needs: the above, and every test's tools
#   scripts/setup.sh         the same as `test`
#
# No set-up leaves a service enabled or running, or a new listening socket: package
# installs run with service starts refused (a temporary /usr/sbin/policy-rc.d), any
# service they enable is disabled again, and Prometheus (whose Debian package enables
# and starts a server on :9090) is only unpacked into the venv. docs/setup.md has the
# lists and the reasons. The file can be sourced (tests/setup/) to use its functions.

VENV=${VENV:-.venv}

# What running needs (`make run`): building the engine and the Python package, the
# loads and network probe of the built-in scenarios (stress-ng, sockperf, ip), the
# shield's tools (util-linux, procps), the SSH client for boards (the user's
# ~/.ssh/config), libpq5 for a `--store postgresql://` (the psycopg driver's C library).
# None of them ships a service.
RUN_PKGS=(python3 python3-venv python3-dev gcc libc6-dev make meson ninja-build
          stress-ng sockperf iproute2 util-linux procps openssh-client libpq5)
# Debian cross compilers, for the tests only: the board engines are built with the
# Zig toolchain from PyPI (ziglang, in BUILD_TOOLS below), which needs none. The
# aarch64 one builds the engine the way the Yocto recipe and the Buildroot package do
# (tests/packaging). `scripts/cross-build.sh --toolchain gnu` names the others.
CROSS_PKGS=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
# What testing needs on top (`make test`).
TEST_PKGS=(
  # peers whose real output the importers and comparisons are tested against
  rt-tests jitterdebugger
  # bench/overhead_vs_perf.py (perf bench)
  linux-perf
  # the HTML report rendered in a real browser
  chromium
  # the server binaries the tests start a throw-away PostgreSQL from (no system
  # cluster: see guarded_apt_install)
  postgresql
  # the emulated board lab: qemu-system and cpio; qemu-user for the cross engines;
  # dropbear (binaries only, no daemon) as the board-side SSH server
  dropbear-bin cpio qemu-user-static qemu-system-x86 qemu-system-arm)
# Debian packages of the tests whose programs are only unpacked into $VENV/opt/PKG and
# linked into $VENV/bin, never installed: prometheus (promtool checks the shipped
# configuration and rules, and the tests start their own server on 127.0.0.1). The
# package would create a user and enable and start prometheus.service on :9090.
PRIVATE_PKGS=(prometheus)
# Packages of the lists above (or pulled in by them) that ship a service. They are
# installed with starts refused and their service disabled again (guarded_apt_install):
# postgresql-common (postgresql.service and its init script, pulled in by postgresql).
SERVICE_PKGS=(postgresql-common)
# Python build tools in the venv (the engine is built through meson-python; ziglang's
# clang and musl build the static board engines, scripts/cross-build.sh).
BUILD_TOOLS=("meson-python>=0.15" "meson>=1.0.1" ninja ziglang)

POLICY=/usr/sbin/policy-rc.d
POLICY_SAVED=/usr/sbin/policy-rc.d.rtlab-saved
POLICY_MARK="rtlab set-up: temporary"
PG_DROPIN=/etc/postgresql-common/createcluster.d/rtlab-setup-no-main-cluster.conf
# One set-up installs at a time (the start policy is one file for the whole machine).
SETUP_LOCK=/run/rtlab-setup.lock

is_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# Every enabled service of this machine, one per line: the symlinks `systemctl enable`
# (or deb-systemd-helper, which works without systemd) makes, and the start links of
# the SysV init scripts in the multi-user runlevels (update-rc.d; rcS holds boot-time
# one-shots such as procps' sysctl, no daemons). Read from the files, so it works with
# and without systemd running.
enabled_services() {
  local f
  for f in /etc/systemd/system/*.wants/* /etc/systemd/system/*.requires/* \
           /etc/rc[2-5].d/S*; do
    [[ -e $f || -L $f ]] && echo "$f"
  done
  return 0
}

# Services and sockets systemd runs (only where systemd is the init system).
running_units() {
  [[ -d /run/systemd/system ]] || return 0
  systemctl list-units --type=service,socket --state=running,listening --no-legend \
    --plain 2>/dev/null | awk '{print $1}' | sort
}

# Put back the policy-rc.d that was there before refuse_starts (or none), also after a
# set-up that was killed: the saved copy and the marker are its journal.
restore_starts() {
  if [[ -e $POLICY_SAVED || -L $POLICY_SAVED ]]; then
    mv -f "$POLICY_SAVED" "$POLICY"
  elif [[ -f $POLICY ]] && grep -q "$POLICY_MARK" "$POLICY"; then
    rm -f "$POLICY"
  fi
}

# While it is in place, invoke-rc.d and deb-systemd-invoke (what package scripts call)
# start no service.
refuse_starts() {
  restore_starts
  if [[ -e $POLICY || -L $POLICY ]]; then
    cp -a "$POLICY" "$POLICY_SAVED"
  fi
  printf '%s\n' '#!/bin/sh' \
    "# $POLICY_MARK (scripts/setup.sh of rtlab): no service starts during its installs" \
    'while [ "${1#--}" != "$1" ]; do shift; done' \
    'echo "setup: service start refused: $1 $2" >&2' 'exit 101' >"$POLICY.rtlab-new"
  chmod 0755 "$POLICY.rtlab-new"
  mv -f "$POLICY.rtlab-new" "$POLICY"
}

# Everything the guarded install changed for its duration only, undone (idempotent:
# also the leftovers of a killed set-up).
undo_install_guard() {
  restore_starts
  rm -f "$POLICY.rtlab-new" "$PG_DROPIN"
  if [[ -n ${PG_DROPIN_DIR_MADE:-} ]]; then
    rmdir "$(dirname "$PG_DROPIN")" 2>/dev/null || true
    PG_DROPIN_DIR_MADE=""
  fi
  return 0
}

# Disable one enabled-service entry (a line of enabled_services).
disable_service() {
  local link=$1 base unit
  base=$(basename "$link")
  case $link in
    /etc/systemd/system/*)
      unit=$base
      if command -v deb-systemd-helper >/dev/null; then
        # also records the unit as disabled, so a package upgrade does not enable it again
        deb-systemd-helper disable "$unit" >/dev/null 2>&1 || true
      elif command -v systemctl >/dev/null; then
        systemctl disable "$unit" >/dev/null 2>&1 || true
      fi
      if [[ -L $link ]]; then rm -f "$link"; fi
      ;;
    /etc/rc*)
      # S01name -> name; update-rc.d turns its start links into stop links, which
      # later upgrades keep
      unit=${base:3}
      update-rc.d "$unit" disable >/dev/null 2>&1 || true
      if [[ -L $link ]]; then rm -f "$link"; fi
      ;;
  esac
  echo "setup: disabled $unit (enabled by its package's install; rtlab needs no service)"
}

# Run a command with its output in a log: on success only the set-up's own lines of it
# (the service starts its policy refused) are shown, on failure its end.
logged() {
  local log rc=0
  log=$(mktemp)
  "$@" >"$log" 2>&1 || rc=$?
  if ((rc)); then
    echo "setup: $* failed (exit $rc); the end of its output:" >&2
    tail -n 30 "$log" | sed 's/^/    /' >&2
  else
    grep '^setup: ' "$log" | sort -u || true
  fi
  rm -f "$log"
  return "$rc"
}

# apt-get install PKG..., leaving no service enabled or running that was not before:
# starts refused during the install, what the packages' scripts enabled disabled
# again, and PostgreSQL's main cluster not created. Root only.
guarded_apt_install() {
  local before after_units before_units new line lockfd
  exec {lockfd}>"$SETUP_LOCK"
  if ! flock -w 900 "$lockfd"; then
    echo "setup: another set-up has been installing packages for 15 min (it holds" \
      "$SETUP_LOCK); try again when it is done" >&2
    return 1
  fi
  before=$(enabled_services)
  before_units=$(running_units)
  trap 'undo_install_guard' EXIT
  trap 'undo_install_guard; exit 130' INT
  trap 'undo_install_guard; exit 143' TERM
  refuse_starts
  export DEBIAN_FRONTEND=noninteractive
  local apt=(apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends)
  if [[ " $* " == *" postgresql "* ]] && ! is_installed postgresql-common; then
    # Debian's postgresql creates a system cluster ("main", port 5432) when none exists;
    # postgresql-common reads createcluster.d/ (`pg_createcluster 15 main` makes it
    # later if wanted)
    logged "${apt[@]}" postgresql-common
    [[ -d $(dirname "$PG_DROPIN") ]] || PG_DROPIN_DIR_MADE=yes
    mkdir -p "$(dirname "$PG_DROPIN")"
    echo "create_main_cluster = false" >"$PG_DROPIN"
  fi
  logged "${apt[@]}" "$@"
  new=$(comm -13 <(sort <<<"$before") <(enabled_services | sort))
  while IFS= read -r line; do
    [[ -n $line ]] && disable_service "$line"
  done <<<"$new" | sort -u
  if [[ -d /run/systemd/system ]]; then
    after_units=$(comm -13 <(sort <<<"$before_units") <(running_units))
    while IFS= read -r line; do
      [[ -n $line ]] || continue
      systemctl stop "$line" >/dev/null 2>&1 || true
      echo "setup: stopped $line (started by its package's install)"
    done <<<"$after_units"
  fi
  undo_install_guard
  trap - EXIT INT TERM
  exec {lockfd}>&-
  new=$(comm -13 <(sort <<<"$before") <(enabled_services | sort))
  if [[ -n $new ]]; then
    echo "setup: these services are still enabled after the install; disable them by hand:" >&2
    echo "$new" | sed 's/^/    /' >&2
    return 1
  fi
}

# Unpack the Debian package PKG into $VENV/opt/PKG (no install: no package scripts, no
# user, no service) and link its programs into $VENV/bin. Needs the apt package lists;
# as root they are refreshed when the download fails.
private_unpack() {
  local pkg=$1 dest="$VENV/opt/$1" tmp deb prog
  [[ -f $dest/.rtlab-unpacked ]] && return 0
  echo "setup: unpacking Debian's $pkg into $dest (not installed: no service)"
  tmp=$(mktemp -d)
  # apt downloads as its sandbox user where it can write
  [[ $(id -u) -eq 0 ]] && id _apt >/dev/null 2>&1 && chown _apt "$tmp"
  if ! (cd "$tmp" && apt-get download -qq "$pkg" >/dev/null 2>&1); then
    if [[ $(id -u) -eq 0 ]]; then
      apt-get update -qq
      (cd "$tmp" && apt-get download -qq "$pkg" >/dev/null)
    else
      rm -rf "$tmp"
      echo "setup: cannot download the Debian package $pkg (apt-get download $pkg failed);" \
        "run as root (it refreshes the package lists) or: sudo apt-get update" >&2
      return 1
    fi
  fi
  deb=$(echo "$tmp/${pkg}_"*.deb)
  rm -rf "$dest.new"
  mkdir -p "$dest.new"
  dpkg-deb -x "$deb" "$dest.new"
  dpkg-deb -f "$deb" Package Version >"$dest.new/.rtlab-unpacked"
  rm -rf "$tmp" "$dest"
  mv "$dest.new" "$dest"
  for prog in "$dest"/usr/bin/*; do
    [[ -e $prog ]] || continue
    ln -sfn "../opt/$pkg/usr/bin/$(basename "$prog")" "$VENV/bin/$(basename "$prog")"
  done
}

# Debian packages a mode installs.
packages_of() {
  case $1 in
    run) printf '%s\n' "${RUN_PKGS[@]}" ;;
    test) printf '%s\n' "${RUN_PKGS[@]}" "${CROSS_PKGS[@]}" "${TEST_PKGS[@]}" ;;
  esac
}

# A note for a service that an earlier rtlab set-up (before they were refused) left
# enabled: not changed here (it may be wanted), only named with its remedy.
note_old_services() {
  local pkg=prometheus
  if is_installed "$pkg" && enabled_services | grep -q "/S[0-9]*$pkg\$\|/$pkg.service\$"; then
    echo "setup: note: Debian's $pkg package is installed and its service enabled (an earlier" \
      "set-up installed it; rtlab now uses a private copy): if nothing else needs it," \
      "run: apt-get purge $pkg" >&2
  fi
}

main() {
  local mode=${1:-test}
  case $mode in
    run | test) ;;
    -h | --help)
      sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'
      return 0 ;;
    *)
      echo "setup: unknown mode '$mode' (use: scripts/setup.sh run, or scripts/setup.sh test)" >&2
      return 2 ;;
  esac
  cd "$(dirname "$0")/.."
  if [[ $(id -u) -eq 0 ]]; then
    # leftovers of a killed set-up (unless another set-up is installing right now)
    (flock -n 9 && undo_install_guard) 9>"$SETUP_LOCK" || true
  fi

  local missing=() p
  while IFS= read -r p; do
    is_installed "$p" || missing+=("$p")
  done < <(packages_of "$mode")
  if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
      echo "setup: installing system packages: ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      guarded_apt_install "${missing[@]}"
    else
      echo "setup: missing system packages: ${missing[*]}" >&2
      echo "setup: install them with: sudo apt-get install --no-install-recommends" \
        "${missing[*]} (or run this set-up as root)" >&2
      return 1
    fi
  fi

  if [[ ! -x "$VENV/bin/python" ]]; then
    echo "setup: creating virtual environment $VENV"
    python3 -m venv "$VENV"
  fi
  local tools_stamp="$VENV/.rtlab-buildtools"
  if [[ ! -f $tools_stamp || "$(cat "$tools_stamp")" != "${BUILD_TOOLS[*]}" ]]; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${BUILD_TOOLS[@]}"
    echo "${BUILD_TOOLS[*]}" >"$tools_stamp"
  fi
  # The package's extras: the PostgreSQL driver for running, the test tools (and
  # labgrid, for tests/labgrid) on top for testing; a venv set up for tests keeps them
  # when set up for running.
  local stamp="$VENV/.rtlab-installed" extras=postgres had=""
  [[ -f $stamp ]] && had=$(cat "$stamp")
  if [[ $mode == test || $had == dev,postgres* ]]; then extras=dev,postgres,labgrid; fi
  # Reinstall when any source of the package or engine changed since the last install.
  if [[ ! -f $stamp || $had != "$extras" ]] || [[ -n "$(find rtlab engine scenarios \
      docs/schema meson.build meson_options.txt pyproject.toml -newer "$stamp" -type f \
      -print -quit 2>/dev/null)" ]]; then
    echo "setup: building and installing rtlab (engine + Python package) into $VENV"
    # (the board engines go to $VENV/share by cross-build.sh below, not into the package)
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
        --config-settings=setup-args=-Dboard_engines=disabled ".[$extras]"
    echo "$extras" >"$stamp"
  fi

  if [[ $mode == test ]]; then
    for p in "${PRIVATE_PKGS[@]}"; do
      private_unpack "$p"
    done
  fi
  note_old_services

  # The static engines for boards, one per architecture whose toolchain is installed
  # (rebuilt only when the engine's sources changed).
  VENV="$VENV" scripts/cross-build.sh
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  main "$@"
fi
