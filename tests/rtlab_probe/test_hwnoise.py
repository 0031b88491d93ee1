# SPDX-License-Identifier: MIT
"""The hwnoise probe on this machine: where the kernel has neither the osnoise nor the
hwlat tracer it is skipped (exit 4) with the reason and changes nothing; bad options are
one line and exit 2. The measurement itself runs on the emulated boards
(tests/lab/test_hwnoise_on_board.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_errors import one_error_line

REPO = Path(__file__).resolve().parents[2]
PROBE = os.environ.get("RTLAB_PROBE", str(REPO / ".venv" / "bin" / "rtlab-probe"))
TRACEFS = Path("/sys/kernel/tracing")


def _tracers() -> list[str]:
    try:
        return (TRACEFS / "available_tracers").read_text().split()
    except OSError:
        return []


def _tracefs_state() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in ("current_tracer", "tracing_thresh", "tracing_cpumask", "tracing_on"):
        try:
            out[name] = (TRACEFS / name).read_text()
        except OSError:
            out[name] = None
    return out


no_noise_tracer = pytest.mark.skipif(
    bool({"osnoise", "hwlat"} & set(_tracers())),
    reason="this kernel has the osnoise or hwlat tracer: the skip path cannot be shown here")


def _probe(*args: str, journal_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROBE, "hwnoise", *args, "--journal-dir", str(journal_dir)],
                          capture_output=True, text=True, timeout=60, check=False)


@no_noise_tracer
def test_engine_without_the_tracers_is_skipped_with_the_reason(tmp_path: Path) -> None:
    before = _tracefs_state()
    jdir = tmp_path / "journals"
    proc = _probe("--duration", "1s", journal_dir=jdir)
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines == ["rtlab-probe hwnoise: skipped: this kernel has neither the osnoise nor "
                     "the hwlat tracer (CONFIG_OSNOISE_TRACER / CONFIG_HWLAT_TRACER)"]
    assert not jdir.exists()  # nothing journaled: nothing changed
    assert _tracefs_state() == before


@no_noise_tracer
def test_rtlab_run_hwnoise_is_skipped_and_stores_nothing(tmp_path: Path) -> None:
    before = _tracefs_state()
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(tmp_path / "xdg"),
           "RTLAB_PROBE": PROBE}
    store = tmp_path / "store.db"
    proc = subprocess.run([sys.executable, "-m", "rtlab", "run", "--probe", "hwnoise",
                           "--duration", "1s", "--no-report", "--store", str(store)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 4, proc.stderr
    line = one_error_line(proc)
    assert "neither the osnoise nor the hwlat tracer" in line
    assert not store.exists()
    assert _tracefs_state() == before


@pytest.mark.parametrize(("args", "needle"), [
    (("--threshold", "1500ns"), "--threshold: the tracers take whole microseconds"),
    (("--width", "1s", "--hwlat-window", "1s"), "--width: must be shorter than --hwlat-window"),
    (("--runtime", "2s", "--period", "1s"), "--runtime: must not be longer than --period"),
    (("--tracer", "ftrace"), "--tracer"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...],
                                             needle: str) -> None:
    jdir = tmp_path / "journals"
    proc = _probe(*args, journal_dir=jdir)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert proc.stdout == ""
    assert not jdir.exists()
