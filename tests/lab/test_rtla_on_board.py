# SPDX-License-Identifier: MIT
"""rtla's `timerlat hist` on the emulated PREEMPT_RT board, imported into rtlab.

This machine's kernel has no timerlat tracer; the x86_64-rt board has it and carries
Debian's rtla. rtla's real output (not a hand-written file) must import with
`rtlab results import --format rtla-timerlat-hist` and compare with an rtlab timer
run of the same board and CPU. Behaviour only: latencies under emulation mean
nothing and are never asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.store_reading import stored_runs

from .boards import Board

REPO = Path(__file__).resolve().parent.parent.parent
CPU = 1
TRACING = "/sys/kernel/tracing"
# what rtla changes while it runs (it puts them back itself; the test makes sure)
RTLA_STATE = ("osnoise/cpus", "osnoise/timerlat_period_us", "current_tracer")


def rtlab(board: Board, tmp: Path, *args: str, timeout: float = 600
          ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RTLAB_SSH_CONFIG": str(board.ssh_config), "PYTHONPATH": str(REPO),
           "XDG_DATA_HOME": str(tmp / "xdg"), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "rtlab", *args, "--store",
                           str(tmp / "store.db")], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def stored_by_id(tmp: Path) -> dict[str, Any]:
    return {r.run_id: r for r in stored_runs(tmp / "store.db")}


def read_state(board: Board) -> dict[str, str]:
    return {f: board.sh(f"cat {TRACING}/{f}").stdout.strip() for f in RTLA_STATE}


def restore_state(board: Board, before: dict[str, str]) -> None:
    now = read_state(board)
    for f, value in before.items():
        if now.get(f) != value and value:
            board.sh(f"echo {value} > {TRACING}/{f}")


def test_rtla_timerlat_hist_imports_and_compares_with_rtlab(x86_board: Board,
                                                            tmp_path: Path) -> None:
    board = x86_board
    assert board.cpus > CPU
    release = board.ssh("uname", "-r", check=True).stdout.strip()
    hostname = board.ssh("hostname", check=True).stdout.strip()
    before = read_state(board)
    try:
        # the bench's command (bench/timer_vs_rtla_board.py): ns, 100-ns buckets, 100 ms
        # of range, IRQ and thread columns; rtla itself on the other CPU
        rtla = board.ssh("taskset", "-c", "0", "rtla", "timerlat", "hist", "-c", str(CPU),
                         "-d", "3", "-p", "1000", "-P", "f:95", "-n", "-b", "100",
                         "-E", "1000000", timeout=600)
    finally:
        restore_state(board, before)
    assert rtla.returncode == 0, rtla.stderr
    out = tmp_path / "rtla-timerlat-hist.txt"
    out.write_text(rtla.stdout)
    assert "Thr-001" in rtla.stdout and "count:" in rtla.stdout, rtla.stdout[-2000:]

    imp = rtlab(board, tmp_path, "results", "import", "--format", "rtla-timerlat-hist",
                "--host", hostname, "--kernel", release, "--preempt", "PREEMPT_RT", str(out))
    assert imp.returncode == 0, imp.stderr
    ((rtla_id, imported),) = stored_by_id(tmp_path).items()
    assert imported.provenance["imported"]["format"] == "rtla-timerlat-hist"
    assert imported.provenance["imported"]["resolution_ns"] == 100
    system = imported.system
    assert (system["hostname"], system["release"], system["preempt"]) == (
        hostname, release, "PREEMPT_RT")
    channels = {ch.name: ch for _, ch in imported.channels()}
    assert set(channels) == {f"irq@cpu{CPU}", f"thread@cpu{CPU}"}
    for ch in channels.values():
        assert ch.cpu == CPU
        assert ch.samples > 0 and ch.hist.total == ch.samples
        assert ch.min_ns is not None and ch.max_ns is not None and ch.min_ns <= ch.max_ns

    run = rtlab(board, tmp_path, "run", "--probe", "timer", "--cpus", str(CPU), "--interval",
                "1ms", "--priority", "95", "--duration", "3s", "--target", board.alias,
                "--no-report", "--no-progress")
    assert run.returncode == 0, run.stderr
    (rtlab_id,) = set(stored_by_id(tmp_path)) - {rtla_id}
    measured = stored_by_id(tmp_path)[rtlab_id]
    (ch,) = [c for _, c in measured.channels()]
    assert ch.cpu == CPU and ch.samples > 0
    assert measured.system["hostname"] == hostname

    cmp = rtlab(board, tmp_path, "compare", rtla_id, rtlab_id, timeout=300)
    assert cmp.returncode == 0, cmp.stderr
    assert "Traceback" not in cmp.stderr
    assert rtla_id in cmp.stdout and rtlab_id in cmp.stdout
    assert f"{rtlab_id} vs {rtla_id} (baseline)" in cmp.stdout
    assert read_state(board) == before
