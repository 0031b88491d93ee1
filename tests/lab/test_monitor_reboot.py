# SPDX-License-Identifier: MIT
"""`rtlab monitor --target` on an emulated aarch64 board that reboots for real (qemu
killed, booted again on the same SSH port, another boot id): the gap is in the
checkpoint, in the Prometheus metrics and in one log line while the monitor still runs,
and is not counted again when it is stopped (issue 23, part 7).

The same behaviour with the fake engine, in detail: tests/monitor/test_monitor_gaps.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.support.waiting import stop, wait_for

from .boards import Board

REPO = Path(__file__).resolve().parent.parent.parent
OFF_S = 3.0  # how long the board stays powered off


def metrics(port: int, board: str) -> dict[str, float]:
    """The board's samples of the monitor's /metrics (empty while it does not answer)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.labels.get("board") == board and not s.name.startswith("rtlab_latency"):
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def test_a_board_that_reboots_is_back_with_its_gap_at_once(
        fresh_board: Callable[..., Board], tmp_path: Path) -> None:
    board = fresh_board("aarch64-rt")
    state, log = tmp_path / "state", tmp_path / "monitor.log"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RTLAB_SSH_CONFIG": str(board.ssh_config), "PYTHONPATH": str(REPO),
           "XDG_DATA_HOME": str(tmp_path / "xdg")}
    cmd = [sys.executable, "-m", "rtlab", "monitor", "--target", board.alias, "--cpus", "1",
           "--interval", "10ms", "--segment", "4s", "--state-dir", str(state),
           "--store", str(tmp_path / "store.db"), "--listen", f"127.0.0.1:{port}"]
    with open(log, "w") as err:
        mon = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=err)

    def text() -> str:
        return log.read_text()

    def diag() -> str:
        return f"monitor log:\n{text()}\nboard console tail:\n{board.console_log()[-2000:]}"

    try:
        wait_for(lambda: metrics(port, board.alias).get("rtlab_samples_total", 0) > 0,
                 180, "the monitor measuring the board", diag=diag, poll=0.2)
        before = metrics(port, board.alias)
        assert before["rtlab_board_gaps_total"] == 0 and before["rtlab_board_up"] == 1

        t_off = time.time()
        board.restart(off_s=OFF_S)  # a new kernel boot on the same port and host key
        t_up = time.time()
        line = wait_for(lambda: re.search(rf"^rtlab monitor: {board.alias}: back after .*$",
                                          text(), re.M), 240, "the board back", diag=diag,
                        poll=0.2)[0]
        # while the monitor still runs: the checkpoint on disk ...
        assert mon.poll() is None, diag()
        cp = json.loads((state / "checkpoint.json").read_text())
        (gap,) = cp["gaps"]
        length = gap["end"] - gap["start"]
        assert gap["board"] == board.alias and gap["rebooted"] is True, gap
        assert gap["start"] <= t_off and gap["end"] >= t_off + OFF_S, (gap, t_off)
        assert length > (t_up - t_off) - 5, (gap, t_off, t_up)
        (b,) = cp["boards"]
        assert b["gaps"] == 1 and b["reboots"] == 1 and b["gap_seconds"] == length
        # ... the metrics ...
        now = metrics(port, board.alias)
        assert now["rtlab_board_gaps_total"] == 1 and now["rtlab_board_reboots_total"] == 1
        assert abs(now["rtlab_board_gap_seconds_total"] - length) < 1e-6
        assert now["rtlab_board_up"] == 1
        # ... and the line, which names the outage the board came back from
        m = re.fullmatch(rf"rtlab monitor: {board.alias}: back after (\d+\.\d) s, rebooted "
                         r"\(down since (\d\d:\d\d:\d\d): (.+)\)", line)
        assert m, line
        assert abs(float(m[1]) - length) <= 0.051
        assert m[2] == time.strftime("%H:%M:%S", time.localtime(gap["start"]))
        assert m[3] == gap["reason"]
        assert f"{board.alias}: down: " in text()

        # measured again after the reboot, then stopped
        wait_for(lambda: metrics(port, board.alias).get("rtlab_samples_total", 0)
                 > now["rtlab_samples_total"], 120, "samples after the reboot", diag=diag, poll=0.2)
    finally:
        code = stop(mon, signal.SIGINT, 120)
    assert code == 130, diag()
    assert "Traceback" not in text()
    cp = json.loads((state / "checkpoint.json").read_text())
    assert cp["gaps"] == [gap]  # the stop counts it no second time
    assert cp["boards"][0]["gaps"] == 1 and cp["boards"][0]["gap_seconds"] == length
    assert len(re.findall(r": back after ", text())) == 1
    # the segment measuring after the reboot names the gap in its stored provenance
    from rtlab.results.store import Store

    store = Store.open(str(tmp_path / "store.db"), create=False)
    try:
        runs = [store.get(r.id) for r in store.list(None)]
    finally:
        store.close()
    after = [r.provenance["monitor"] for r in runs
             if r.provenance["monitor"]["started"] > gap["start"]
             and r.provenance["monitor"]["gap_before_s"] > 1]
    assert len(after) == 1 and abs(after[0]["gap_before_s"] - length) < 0.001, after
    assert "rebooted" in after[0]["gap_reason"]
