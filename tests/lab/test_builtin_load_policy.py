# SPDX-License-Identifier: MIT
"""The seed's UDP ping-pong on a board without stress-ng (the emulated x86_64 RT board):
its background load, a stress-ng CPU hog at SCHED_FIFO 97, runs as the engine's own load
and keeps FIFO 97 (`rtlab-probe load --policy fifo --priority 97`), as stored (the
load's placement, the policy the engine read back from its workers, the fallback's kept
list and note) and, when a look at the board's /proc falls within the load phase, as
the board's kernel shows the workers while they run (the load process itself stays
SCHED_OTHER). Behaviour only: latency under emulation means nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .boards import Board
from .test_rtlab_on_boards import REPO

# Every process of the engine's load at FIFO on the board (argv[0] the engine, not this
# script's shell, whose command line holds the same words): "PID STATE PPID PGRP ..."
# (/proc/PID/stat from the state on; the comm, which may hold spaces, cut off).
LOOK = r"""for d in /proc/[0-9]*; do
  c=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
  case "${c%% *}" in */rtlab-probe*) ;; *) continue;; esac
  case "$c" in
    *" load "*"--policy fifo"*) s=$(cat "$d/stat" 2>/dev/null) && echo "${d#/proc/} ${s##*) }";;
  esac
done"""
RT_PRIORITY, POLICY = 37, 38  # /proc/PID/stat fields 40 and 41, counted from the state


def _look(board: Board) -> dict[int, tuple[int, int, int]]:
    """pid -> (pgrp, policy, rt_priority) of the engine load's processes on the board."""
    try:
        out = board.sh(LOOK, timeout=30).stdout
    except subprocess.TimeoutExpired:
        return {}
    seen = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) > POLICY + 1:
            seen[int(f[0])] = (int(f[3]), int(f[1 + POLICY]), int(f[1 + RT_PRIORITY]))
    return seen


def test_udp_pingpong_background_load_keeps_fifo_97_on_a_board(
        x86_board: Board, tmp_path: Path, lab_note: Callable[[str], None]) -> None:
    env = {**os.environ, "RTLAB_SSH_CONFIG": str(x86_board.ssh_config),
           "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(tmp_path / "xdg"), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtlab", "run", "udp-pingpong", "--target", x86_board.alias,
         "--duration", "4s", "--no-report", "--no-progress", "--store",
         str(tmp_path / "store.db")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env)
    seen: dict[int, tuple[int, int, int]] = {}
    try:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            seen.update(_look(x86_board))
            time.sleep(0.1)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err + out[-2000:]
    assert "Traceback" not in err

    from rtlab.results.store import Store

    s = Store.open(str(tmp_path / "store.db"))
    try:
        (summary,) = s.list(None)
        run: Any = s.get(summary.id)
    finally:
        s.close()
    (phase,) = [p for p in run.provenance["host"]["phases"] if p.get("loads")]
    (load,) = phase["loads"]
    assert load["name"] == "background" and load["kind"] == "builtin"
    assert (load["policy"], load["priority"]) == ("fifo", 97)
    assert load["argv"][-4:] == ["--policy", "fifo", "--priority", "97"]
    # what the board's kernel reported for every worker, read back by the engine there
    assert load["builtin"]["workers_sched"] == [{"policy": "fifo", "priority": 97}]
    assert load["builtin"]["loops"]["cpu"] > 0
    assert "policy fifo 97" in load["fallback"]["kept"]
    notes = [n for n in run.notes if n.startswith("load background: ")]
    assert len(notes) == 1 and "SCHED_OTHER" not in notes[0], run.notes
    assert any("over loopback" in n for n in run.notes), run.notes

    if not seen:
        lab_note("udp-pingpong's FIFO 97 load: no look at the board's /proc fell within "
                 "its load phase (only the engine's read-back was checked)")
        return
    # while it ran: the load process (its group's leader) at SCHED_OTHER, each worker at
    # SCHED_FIFO (1) priority 97
    leaders = {pid for pid, (pgrp, _, _) in seen.items() if pid == pgrp}
    workers = {pid: v for pid, v in seen.items() if pid not in leaders}
    assert workers, seen
    assert all((pol, prio) == (1, 97) for _, pol, prio in workers.values()), seen
    assert all(seen[p][1:] == (0, 0) for p in leaders), seen
