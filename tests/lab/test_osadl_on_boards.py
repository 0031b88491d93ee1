# SPDX-License-Identifier: MIT
"""The built-in `osadl-style` scenario on the emulated boards, which have no stress-ng,
no sockperf and no Python: the OSADL mid load runs there as the engine's own load
(memory, synced file I/O), and its network part goes to a peer.

- Alone, the x86_64 board cannot reach this machine (its user network is
  `restrict=on`): what it sends to this machine's address never arrives, so the network
  part is left out and the run says so in one note; memory and file I/O still ran.
- With the aarch64 board named as the peer (`peer = "lab-arm64=10.77.0.2:PORT"`), the
  sink runs there and the messages cross the link between the boards; both ends count.

Both boards are left as before: cgroups, affinities, sysctls, no process of the load,
nothing new in /tmp (the engine's own directory /tmp/rtlab.0 was there already).
Latency values are never asserted (the boards are emulated).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .boards import Board
from .test_rtlab_on_boards import REPO, board_facts, rtlab, same_state, stored

__all__ = ["board_facts"]  # the fixture, shared with test_rtlab_on_boards

OSADL = (REPO / "scenarios" / "osadl-style.toml").read_text()
DURATION = "6s"  # the whole run: ~2 s idle, ~4 s under the mid load


def _left_over(board: Board) -> tuple[set[str], set[str]]:
    """What of rtlab runs on the board (pid and command line), and what is in /tmp."""
    ps = board.ssh("ps", "-o", "pid,stat,args").stdout.splitlines()
    procs = {ln.strip() for ln in ps if "rtlab-probe" in ln and len(ln.split()) > 2
             and not ln.split()[1].startswith("Z")}
    tmp = set(board.sh("ls -A /tmp").stdout.split())
    return procs, tmp


def _osadl_load(run: dict[str, Any]) -> dict[str, Any]:
    (ld,) = [ld for ph in run["provenance"]["host"]["phases"] for ld in ph["loads"]
             if ld["kind"] == "osadl-mid"]
    return ld


def _engine_parts_ran(ld: dict[str, Any], board: Board) -> None:
    assert ld["status"] == "stopped" and not ld["died_early"], ld["stderr_tail"]
    assert "the engine's own load" in ld["label"]
    el = ld["engine_load"]
    assert el["alloc"]["rounds"] > 0 and el["io"]["files"] > 0 and el["io"]["bytes"] > 0
    assert el["io_dir"].startswith("/tmp/rtlab-load-")
    assert el["io_priority"]["class"] == "idle"
    assert ld["target"] == board.alias


def test_osadl_style_on_the_x86_board(x86_board: Board, tmp_path: Path,
                                      board_facts: Callable[[Board], Any]) -> None:
    before = board_facts(x86_board)
    procs, tmp = _left_over(x86_board)
    assert "rtlab.0" in tmp or not tmp
    proc = rtlab(x86_board.ssh_config, tmp_path, "run", "osadl-style", "--duration", DURATION,
                 "--no-report", "--no-progress", "--target", x86_board.alias)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = stored(tmp_path)
    assert run["status"] == "completed", run["notes"]
    assert run["provenance"]["host"]["target"]["machine"] == "x86_64"
    ld = _osadl_load(run)
    _engine_parts_ran(ld, x86_board)
    net = ld["network"]
    # restrict=on: nothing the board sends to this machine arrives
    assert net["peer"] == "this machine" and net["received"] == 0
    assert f"nothing that {x86_board.alias} sent to {net['to']}" in net["left_out"]
    (note,) = [n for n in run["notes"] if "osadl-mid" in n]
    assert "network part left out: nothing that" in note and "\n" not in note
    assert "osadl-mid as the engine's own load" in proc.stdout
    assert _left_over(x86_board) == (procs, tmp | {"rtlab.0"})
    assert same_state(before, board_facts(x86_board)) == []


def test_osadl_between_the_linked_boards(x86_board: Board, arm64_board: Board,
                                         tmp_path: Path,
                                         board_facts: Callable[[Board], Any]) -> None:
    """The sender on the x86_64 board, the sink on the aarch64 board (10.77.0.2 on the
    link): the messages cross the link and both ends count them."""
    before = {b.alias: (board_facts(b), _left_over(b)) for b in (x86_board, arm64_board)}
    cfg = tmp_path / "both"
    cfg.write_text(x86_board.ssh_config.read_text() + arm64_board.ssh_config.read_text())
    peer = f"{arm64_board.alias}=10.77.0.2:7511"
    scen = tmp_path / "osadl-link.toml"
    scen.write_text(OSADL.replace("alloc_period = 1\n", f'alloc_period = 1\npeer = "{peer}"\n'))
    proc = rtlab(cfg, tmp_path, "run", str(scen), "--duration", DURATION, "--no-report",
                 "--no-progress", "--target", x86_board.alias)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = stored(tmp_path)
    assert run["status"] == "completed", run["notes"]
    ld = _osadl_load(run)
    _engine_parts_ran(ld, x86_board)
    net = ld["network"]
    assert net["left_out"] is None and net["to"] == "10.77.0.2:7511"
    assert net["peer"] == f"board {arm64_board.alias}"
    assert net["sent"] > 0 and 0 < net["received"] <= net["sent"]
    sink = next(p for p in ld["processes"] if p["name"] == "rtlab-probe-load-sink")
    assert sink["target"] == arm64_board.alias
    (note,) = [n for n in run["notes"] if "osadl-mid" in n]
    assert f"to 10.77.0.2:7511 (board {arm64_board.alias})" in note
    for b in (x86_board, arm64_board):
        facts, (procs, tmp) = before[b.alias]
        assert _left_over(b) == (procs, tmp | {"rtlab.0"}), b.alias
        assert same_state(facts, board_facts(b)) == [], b.alias
