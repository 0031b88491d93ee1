#!/bin/bash
# SPDX-License-Identifier: MIT
#
# dispatcher.sh: run LAVA jobs with LAVA's own dispatcher (`lava-run`) from a private
# directory, without installing LAVA on this machine (docs/lava.md, docs/lab.md "LAVA").
#
# Debian's lava-dispatcher package depends on systemd-sysv and ~145 other packages.
# Instead, `prepare` fetches the .deb files of lava-dispatcher, lava-dispatcher-host
# and lava-common with `apt-get download` (nothing is installed), unpacks them with
# `dpkg -x` into the cache, and makes a Python virtual environment there that holds the
# dispatcher's Python dependencies from PyPI. `run` starts lava-run from that cache:
# its job directories go to the cache too (LAVA's default is /var/lib/lava/dispatcher),
# so nothing outside the cache and the job's output directory is written.
#
#   scripts/lava/dispatcher.sh prepare
#   scripts/lava/dispatcher.sh ssh-device --host 127.0.0.1 --port 2222 \
#       --identity ~/.ssh/board_key [--user root] [--ssh-option -oX=Y ...] >device.yaml
#   scripts/lava/dispatcher.sh run --device device.yaml --output-dir out job.yaml
#
# `run` writes out/output.yaml (the job log as a LAVA server keeps it: a YAML list of
# the dispatcher's records; lvl "results" records are LAVA's test results) and
# out/lava-run.stderr (all lava-run printed), prints one line per result
# ("RESULT DEFINITION/CASE [MEASUREMENT UNITS] [(ERROR_TYPE: ERROR)]"; the last is
# "RESULT lava/job") and exits with lava-run's code: 0 the job completed, 1 it did not
# (a job, configuration or infrastructure error, a timeout), 2 usage.
#
# Cache: $RTLAB_LAVA_HOME, else $XDG_CACHE_HOME/rtlab/lava, else ~/.cache/rtlab/lava.
# `prepare` is idempotent: it does nothing when the cache matches this script's pins.
# Needs: apt-get and dpkg-deb (Debian 12's package lists: as root `prepare` refreshes
# them when they lack LAVA; as another user run `apt-get update` first), python3
# (3.9 or later) with venv, a C compiler for netifaces when pip finds no wheel, and
# ssh, scp and git for SSH devices.

set -euo pipefail

PROG=dispatcher.sh
LAVA_VERSION=2023.01-2
LAVA_DEBS=(lava-common lava-dispatcher lava-dispatcher-host)
# the versions of Debian 12's python3-* packages, which lava-dispatcher 2023.01-2 is
# packaged with
PY_DEPS=(
    "aiohttp==3.8.4" "configobj==5.0.8" "jinja2==3.1.2" "python-magic==0.4.26"
    "netifaces==0.11.0" "pexpect==4.8.0" "pyudev==0.24.0" "requests==2.28.1"
    "setproctitle==1.3.1" "pytz==2022.7.1" "PyYAML==6.0" "voluptuous==0.12.2"
)
STAMP_TEXT="lava $LAVA_VERSION; ${PY_DEPS[*]}; launcher 1"

die() { # code message
    printf '%s\n' "$PROG: error: $2" >&2
    exit "$1"
}

usage() {
    cat <<'EOF'
usage: scripts/lava/dispatcher.sh COMMAND [OPTIONS]

  prepare              fetch and unpack LAVA's dispatcher into the cache (idempotent)
  path                 print the cache directory
  ssh-device OPTIONS   print a LAVA device dictionary for an SSH device (deploy to ssh,
                       boot method ssh) on stdout:
      --host HOST          the board's address (required)
      --port N             its SSH port (default 22)
      --user USER          login user (default root)
      --identity FILE      private key (absolute path; FILE.pub must exist too)
      --ssh-option OPT     an ssh/scp option, e.g. -oIdentitiesOnly=yes (repeatable)
      --results-dir DIR    where LAVA unpacks its test overlay on the board
                           (default /lava-%s, %s: the job id)
  run OPTIONS JOB      run JOB (a LAVA job definition, YAML) with lava-run:
      --device FILE        the device dictionary (required)
      --output-dir DIR     where output.yaml and lava-run.stderr go (required; new or empty)
      --job-id N           the job's id (default 1)
  -h, --help           this help

Cache: $RTLAB_LAVA_HOME, else $XDG_CACHE_HOME/rtlab/lava, else ~/.cache/rtlab/lava.
Exit codes: 0 ok (run: the job completed), 1 error (run: the job did not complete),
2 usage.
EOF
}

cache_dir() {
    if [ -n "${RTLAB_LAVA_HOME:-}" ]; then
        printf '%s\n' "$RTLAB_LAVA_HOME"
    else
        printf '%s\n' "${XDG_CACHE_HOME:-$HOME/.cache}/rtlab/lava"
    fi
}

CACHE=$(cache_dir)
ROOT=$CACHE/root           # the unpacked packages
VENV=$CACHE/venv           # their Python dependencies
LAUNCHER=$CACHE/lava-run-private.py
STAMP=$CACHE/prepared

prepared() {
    [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_TEXT" ] \
        && [ -x "$VENV/bin/python" ] && [ -f "$LAUNCHER" ] \
        && [ -f "$ROOT/usr/bin/lava-run" ]
}

write_launcher() {
    # lava-run, started with two changes made from outside, none to LAVA's files:
    # its job directories (lava_common.constants.DISPATCHER_DOWNLOAD_DIR, a constant the
    # modules copy when they are imported) move into the cache, and the libguestfs
    # bindings, which are not on PyPI and which only image-building deploy actions use,
    # are a module that says so when such an action touches it.
    cat >"$1" <<'EOF'
# SPDX-License-Identifier: MIT
# Written by rtlab's scripts/lava/dispatcher.sh: starts LAVA's lava-run from a private
# directory. Its job directories go to $RTLAB_LAVA_JOBS instead of /var/lib/lava.
import os
import runpy
import sys
import types

guestfs = types.ModuleType("guestfs")


def _no_guestfs(name):
    raise ImportError("guestfs." + name + ": libguestfs is not available to this private "
                      "dispatcher (rtlab's scripts/lava/dispatcher.sh): use deploy "
                      "actions that need no image building, e.g. to: ssh")


guestfs.__getattr__ = _no_guestfs
sys.modules.setdefault("guestfs", guestfs)

import lava_common.constants as constants  # noqa: E402

constants.DISPATCHER_DOWNLOAD_DIR = os.environ["RTLAB_LAVA_JOBS"]
lava_run = sys.argv[1]
sys.argv = [lava_run] + sys.argv[2:]
runpy.run_path(lava_run, run_name="__main__")
EOF
}

prepare() {
    if prepared; then
        return 0
    fi
    mkdir -p "$CACHE" || die 1 "cannot create $CACHE"
    # one preparer at a time (test runs of several checkouts share the cache)
    exec 9>>"$CACHE/prepare.lock"
    flock 9 || die 1 "cannot lock $CACHE/prepare.lock"
    if prepared; then
        exec 9>&-
        return 0
    fi
    command -v apt-get >/dev/null || die 1 "apt-get not found: LAVA's dispatcher is taken from Debian's packages (a Debian or Ubuntu machine is needed)"
    command -v dpkg-deb >/dev/null || die 1 "dpkg-deb not found (Debian's dpkg)"
    local py=${PYTHON:-python3}
    command -v "$py" >/dev/null || die 1 "$py not found (set PYTHON to a Python 3.9 or later)"
    # built in place; the stamp, written last, says it is complete
    rm -rf "$STAMP" "$ROOT" "$VENV" "$LAUNCHER" "$CACHE/debs"
    mkdir -p "$CACHE/debs" "$ROOT"
    local debs=()
    local p
    for p in "${LAVA_DEBS[@]}"; do debs+=("$p=$LAVA_VERSION"); done
    # the tested version (as root, the package lists are refreshed when they lack it);
    # else the one Debian's lists have now (a point release)
    if ! (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "${debs[@]}" \
              >/dev/null 2>&1) \
        && ! { [ "$(id -u)" -eq 0 ] && apt-get update -qq \
               && (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root \
                       "${debs[@]}" >/dev/null 2>&1); }; then
        printf '%s\n' "$PROG: LAVA $LAVA_VERSION is not in the package lists; taking their version" >&2
        (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "${LAVA_DEBS[@]}" \
             >/dev/null) \
            || die 1 "apt-get download ${LAVA_DEBS[*]} failed (run 'apt-get update' first; Debian 12's lists have them)"
    fi
    local deb
    for deb in "$CACHE/debs"/*.deb; do
        dpkg-deb -x "$deb" "$ROOT" || die 1 "cannot unpack $deb"
    done
    [ -f "$ROOT/usr/bin/lava-run" ] || die 1 "the packages hold no usr/bin/lava-run"
    "$py" -m venv "$VENV" || die 1 "$py -m venv failed"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PY_DEPS[@]}" \
        || die 1 "pip install of the dispatcher's Python dependencies failed"
    # the unpacked modules on the venv's path
    local site
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    printf '%s\n' "$ROOT/usr/lib/python3/dist-packages" >"$site/rtlab-lava.pth"
    write_launcher "$LAUNCHER"
    RTLAB_LAVA_JOBS=$CACHE/jobs "$VENV/bin/python" "$LAUNCHER" "$ROOT/usr/bin/lava-run" \
        --help >/dev/null || die 1 "the unpacked lava-run does not start (see above)"
    printf '%s\n' "$STAMP_TEXT" >"$STAMP"
    exec 9>&-
}

yaml_str() { # a YAML double-quoted string
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "$s"
}

ssh_device() {
    local host="" port=22 user=root identity="" results="/lava-%s"
    local opts=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --host|--port|--user|--identity|--ssh-option|--results-dir)
                [ $# -ge 2 ] || die 2 "$1 needs a value (see --help)" ;;
        esac
        case "$1" in
            --host) host=$2; shift 2 ;;
            --port) port=$2; shift 2 ;;
            --user) user=$2; shift 2 ;;
            --identity) identity=$2; shift 2 ;;
            --ssh-option) opts+=("$2"); shift 2 ;;
            --results-dir) results=$2; shift 2 ;;
            *) die 2 "ssh-device: unknown option $1 (see --help)" ;;
        esac
    done
    [ -n "$host" ] || die 2 "ssh-device: --host is required (the board's address)"
    [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] \
        || die 2 "ssh-device: --port $port: give a port number 1..65535"
    if [ -n "$identity" ]; then
        case "$identity" in /*) ;; *) die 2 "ssh-device: --identity $identity: give an absolute path (LAVA reads relative ones below its own files)" ;; esac
        [ -r "$identity" ] || die 2 "ssh-device: --identity $identity: no such readable file"
        [ -r "$identity.pub" ] || die 2 "ssh-device: --identity $identity: LAVA also needs $identity.pub"
    fi
    case "$results" in *%s*) ;; *) die 2 "ssh-device: --results-dir $results: must hold %s (the job id)" ;; esac
    # The device dictionary a LAVA server renders from its ssh device type, reduced to
    # what the dispatcher reads for deploy to ssh / boot method ssh.
    cat <<EOF
# LAVA device dictionary: an SSH device (deploy to: ssh, boot method: ssh), written by
# rtlab's scripts/lava/dispatcher.sh ssh-device
constants:
  default-shell-prompt: "rtlab-lava-test: # "
  failure_retry: 1
  boot_retry: 1
  posix:
    lava_test_sh_cmd: /bin/sh
    lava_test_results_dir: $(yaml_str "$results")
    lava_test_shell_file: "~/.profile"
parameters: {}
actions:
  deploy:
    connections:
      serial: {}
      ssh: {}
    methods:
      ssh:
        host: $(yaml_str "$host")
        port: $port
        user: $(yaml_str "$user")
EOF
    if [ -n "$identity" ]; then
        printf '        identity_file: %s\n' "$(yaml_str "$identity")"
    fi
    if [ ${#opts[@]} -gt 0 ]; then
        printf '        options:\n'
        local o
        for o in "${opts[@]}"; do printf '        - %s\n' "$(yaml_str "$o")"; done
    fi
    cat <<'EOF'
  boot:
    connections:
      serial: {}
      ssh: {}
    methods:
      ssh: {}
timeouts:
  actions:
    apply-overlay-image: {minutes: 2}
  connections:
    ssh-connection: {minutes: 2}
EOF
}

run_job() {
    local device="" outdir="" job_id=1 job=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --device|--output-dir|--job-id)
                [ $# -ge 2 ] || die 2 "$1 needs a value (see --help)" ;;
        esac
        case "$1" in
            --device) device=$2; shift 2 ;;
            --output-dir) outdir=$2; shift 2 ;;
            --job-id) job_id=$2; shift 2 ;;
            -*) die 2 "run: unknown option $1 (see --help)" ;;
            *) [ -z "$job" ] || die 2 "run: one job file only ($job, then $1)"; job=$1; shift ;;
        esac
    done
    [ -n "$job" ] || die 2 "run: give the job definition (a YAML file)"
    [ -n "$device" ] || die 2 "run: --device FILE is required (e.g. from 'ssh-device')"
    [ -n "$outdir" ] || die 2 "run: --output-dir DIR is required"
    [ -r "$job" ] || die 2 "run: cannot read the job $job"
    [ -r "$device" ] || die 2 "run: cannot read the device dictionary $device"
    [[ "$job_id" =~ ^[0-9]+$ ]] || die 2 "run: --job-id $job_id: give a number"
    if [ -e "$outdir" ] && [ -n "$(ls -A "$outdir" 2>/dev/null)" ]; then
        die 2 "run: --output-dir $outdir is not empty: give a new directory"
    fi
    prepare
    mkdir -p "$outdir" || die 1 "cannot create $outdir"
    # a directory of this run's own: runs at once (other checkouts, other users of the
    # cache) never share LAVA's job directory, whatever their job ids
    mkdir -p "$CACHE/jobs" || die 1 "cannot create $CACHE/jobs"
    local jobs
    jobs=$(mktemp -d "$CACHE/jobs/run.XXXXXX") || die 1 "cannot create a job directory in $CACHE/jobs"
    local rc=0
    # lava-run logs its records (one YAML flow mapping a line) on stderr
    RTLAB_LAVA_JOBS=$jobs "$VENV/bin/python" "$LAUNCHER" "$ROOT/usr/bin/lava-run" \
        --job-id "$job_id" --output-dir "$outdir/lava" --device "$device" "$job" \
        >"$outdir/lava-run.stdout" 2>"$outdir/lava-run.stderr" || rc=$?
    rm -rf "${jobs:?}"
    # the job log as a LAVA server stores it: a YAML list of the records
    grep '^{"dt": ' "$outdir/lava-run.stderr" | sed 's/^/- /' >"$outdir/output.yaml" || true
    "$VENV/bin/python" - "$outdir" "$rc" <<'EOF'
import sys
from pathlib import Path

import yaml

out, rc = Path(sys.argv[1]), int(sys.argv[2])
records = yaml.safe_load((out / "output.yaml").read_text()) or []
job = None
for r in records:
    if r.get("lvl") != "results":
        continue
    m = r["msg"]
    line = f"{m.get('result')} {m.get('definition')}/{m.get('case')}"
    if "measurement" in m:
        line += f" {m['measurement']} {m.get('units', '')}".rstrip()
    if "error_msg" in m:
        line += f" ({m.get('error_type', 'error')}: {m['error_msg']})"
    if m.get("definition") == "lava" and m.get("case") == "job":
        job = m
    print(line)
if job is None and rc != 0:
    lines = (out / "lava-run.stderr").read_text(errors="replace").strip().splitlines()
    last = lines[-1] if lines else "no output"
    print(f"dispatcher.sh: lava-run ended with exit code {rc} before the job had a result: "
          f"{last} (all of it: {out / 'lava-run.stderr'})", file=sys.stderr)
EOF
    return "$rc"
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1
shift
case "$cmd" in
    prepare) [ $# -eq 0 ] || die 2 "prepare takes no arguments"; prepare; printf '%s\n' "$CACHE" ;;
    path) printf '%s\n' "$CACHE" ;;
    ssh-device) ssh_device "$@" ;;
    run) run_job "$@" ;;
    -h|--help) usage ;;
    *) die 2 "unknown command $cmd (see --help)" ;;
esac
