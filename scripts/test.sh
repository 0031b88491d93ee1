#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run every test: ruff, the engine's C unit tests in a sanitizer build, then pytest
# (each layer's tests, the engine end to end, the board suites and real-system tests;
# root-only tests skip with a reason when not root; tests/README.md has the layout).
# Arguments go to pytest: scripts/test.sh tests/results runs one layer.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
[[ $VENV == /* ]] || VENV=$PWD/$VENV  # an absolute VENV works too
export PATH="$VENV/bin:$PATH"
# the test set-up (make test, or scripts/setup.sh test) installs the test tools
if [[ ! -x $VENV/bin/pytest || ! -x $VENV/bin/ruff ]]; then
  echo "test: the test tools are not in $VENV (a set-up for running only?): run" \
    "scripts/setup.sh test (make test does it)" >&2
  exit 1
fi

echo "== ruff"
ruff check rtlab tests bench

echo "== engine C unit tests (ASan + UBSan build)"
builddir=build/test-sanitize
# a build directory made by another meson (e.g. the system's) cannot be reused: redo it
stamp="$builddir/.rtlab-meson-version"
if [[ ! -f "$builddir/build.ninja" || "$(cat "$stamp" 2>/dev/null)" != "$(meson --version)" ]]; then
  rm -rf "$builddir"
  meson setup "$builddir" -Dpython=false -Db_sanitize=address,undefined \
      -Dstatic=disabled -Dbuildtype=debug >/dev/null
  meson --version >"$stamp"
fi
meson test -C "$builddir" --print-errorlogs

echo "== pytest"
export RTLAB_PROBE="$VENV/bin/rtlab-probe"
# the 30 slowest tests are listed at the end: the whole command should stay under ~20 min
exec "$VENV/bin/python" -m pytest -q --durations=30 "$@"
