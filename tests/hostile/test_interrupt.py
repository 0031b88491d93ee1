# SPDX-License-Identifier: MIT
"""Ctrl-C is honoured everywhere: an import that reads a FIFO nobody writes or an endless
device, and a long measurement, all end with exit 130 within seconds, leaving no process,
no journal and (for the refused imports) no file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import machine_lock
from tests.hostile.conftest import DATA, cgroups, make_fixtures, snapshot
from tests.support.env import subprocess_env

STARTUP_S = 2.0  # the command has started reading or measuring by then (or finished)
EXIT_WITHIN_S = 10.0  # after Ctrl-C, on a loaded machine


def _env(tmp: Path) -> dict[str, str]:
    return subprocess_env({"HOME": str(tmp / "home"), "XDG_DATA_HOME": str(tmp / "xdg"),
                           "RTLAB_STORE": str(tmp / "store.db"),
                           "RTLAB_JOURNAL_DIR": str(tmp / "journal")})


def _ctrl_c(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, bool]:
    """Start `rtlab ARGV` in its own process group (bounded to 1 GB), send the group
    SIGINT as a terminal's Ctrl-C does; (exit code, stderr, whether it was still running
    when Ctrl-C came). Every process of the group (the engine a run started) must be gone
    soon after."""
    import resource

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    p = subprocess.Popen([sys.executable, "-m", "rtlab", *argv], env=env, cwd=cwd,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=limits)
    try:
        try:
            _, err = p.communicate(timeout=STARTUP_S)
            return p.returncode, err, False
        except subprocess.TimeoutExpired:
            pass
        os.killpg(p.pid, signal.SIGINT)
        try:
            _, err = p.communicate(timeout=EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {EXIT_WITHIN_S} s after Ctrl-C: {argv}")
        deadline = time.monotonic() + EXIT_WITHIN_S
        while not _group_gone(p.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _group_gone(p.pid), f"processes of {argv} outlived it"
        return p.returncode, err, True
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("source", ["FIFO", "DEVZERO"])
def test_ctrl_c_ends_an_import_of_an_endless_input(tmp_path: Path, source: str) -> None:
    paths = make_fixtures(tmp_path / "paths")
    (tmp_path / "home").mkdir()
    before = snapshot([tmp_path], [])
    code, err, running = _ctrl_c(["results", "import", "--format", "cyclictest-hist",
                                  paths[source]], _env(tmp_path), tmp_path / "home")
    # refused before reading (exit 2), or reading and then interrupted (130): never
    # blocked, never grown without bound
    assert code == (130 if running else 2), err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert snapshot([tmp_path], []) == before, "the interrupted import left files"


def test_ctrl_c_ends_a_long_measurement(tmp_path: Path, probe_bin: str) -> None:
    """`rtlab run --duration 1h` (no shield, one CPU, a slow rate): 130 within seconds;
    its engine is gone with it and nothing stays journaled or in a cgroup."""
    if os.geteuid() != 0:
        pytest.skip("needs root (real SCHED_FIFO)")
    (tmp_path / "home").mkdir()
    env = _env(tmp_path) | {"RTLAB_PROBE": probe_bin}
    with machine_lock():
        groups = cgroups()
        code, err, running = _ctrl_c(["run", "--duration", "1h", "--no-shield", "--no-progress",
                                "--cpus", str(max(os.sched_getaffinity(0))),
                                "--interval", "10ms", "--no-report"],
                               env, tmp_path / "home")
        assert running and code == 130, err
        assert "Traceback" not in err
        journal = tmp_path / "journal"
        assert not list(journal.glob("*.journal")) if journal.is_dir() else True
        assert cgroups() - groups == set()


def test_an_import_from_data_still_works(tmp_path: Path) -> None:
    """The control: the same import of a real file is not refused (exit 0, stored)."""
    env = _env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "rtlab", "results", "import", "--format",
                        "cyclictest-hist", str(DATA / "cyclictest_hist.txt")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "store.db").stat().st_size > 0
