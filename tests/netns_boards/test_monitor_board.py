# SPDX-License-Identifier: MIT
"""`rtlab monitor --target BOARD` over real SSH to a namespace board: the board's link goes
down and comes back; the monitor notices (watchdog), retries, records the gap in the
next segment and in its counts, and what it stored adds up to its totals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rtlab.results.store import Store
from tests.support.paths import REPO
from tests.support.waiting import stop, wait_for

from .nsboard import NsBoard


def cp(state: Path) -> dict:
    try:
        return json.loads((state / "checkpoint.json").read_text())
    except (OSError, ValueError):
        return {}


def board_state(state: Path, name: str) -> dict:
    return next((b for b in cp(state).get("boards", []) if b["name"] == name), {})


def test_board_gone_and_back(require_root: None, board: NsBoard, probe_bin: str,
                             tmp_path: Path) -> None:
    state, store = tmp_path / "state", tmp_path / "store.db"
    env = {**os.environ, "RTLAB_PROBE": probe_bin, "RTLAB_SSH_CONFIG": str(board.ssh_config),
           "RTLAB_ENGINE_DIR": str(tmp_path / "engine"), "PYTHONPATH": str(REPO),
           "XDG_DATA_HOME": str(tmp_path / "xdg")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtlab", "monitor", "--target", board.name, "--cpus", "1",
         "--segment", "2s", "--watchdog", "3s", "--state-dir", str(state), "--store",
         str(store)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        wait_for(lambda: board_state(state, board.name).get("segments", 0) >= 1, 90,
                 "a first stored segment")
        assert board_state(state, board.name)["up"]
        board.cut_link()
        try:
            wait_for(lambda: not board_state(state, board.name).get("up", True), 30,
                     "the monitor to see the board gone")
            assert board_state(state, board.name)["reason"]
            time.sleep(2)
        finally:
            board.restore_link()
        wait_for(lambda: board_state(state, board.name).get("gaps", 0) >= 1
                 and board_state(state, board.name).get("up"), 90, "the board back")
    finally:
        code = stop(proc, signal.SIGTERM, 60)
    err = proc.stderr.read() if proc.stderr else ""
    assert code == 130, err
    assert f"{board.name}: down:" in err
    b = board_state(state, board.name)
    assert b["gaps"] >= 1 and b["gap_seconds"] >= 2
    s = Store.open(str(store), create=False)
    try:
        runs = [s.get(r.id) for r in s.list(None)]
    finally:
        s.close()
    after_gap = [r for r in runs if (r.provenance["monitor"]["gap_before_s"] or 0) >= 2]
    assert after_gap, [r.provenance["monitor"] for r in runs]
    assert any("not measured for" in n for n in after_gap[0].notes)
    assert all(r.provenance["monitor"]["board"] == board.name for r in runs)
    chans = cp(state)["channels"]
    assert sum(c["samples"] for c in chans) == sum(
        ch.samples for r in runs for ch in r.phases[0].channels)
