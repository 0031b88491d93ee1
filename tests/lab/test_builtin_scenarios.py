# SPDX-License-Identifier: MIT
"""Every built-in scenario on every kind of target: this machine (cgroup v1 cpusets,
stress-ng installed), the emulated x86_64 PREEMPT_RT board and the aarch64 one (cgroup
v2, no stress-ng, no Python). A scenario joins the matrix by being shipped.

Each cell runs the scenario as a user would (`rtlab run NAME --target B`, no other
option but a short --duration), and checks what must hold on any target: the run
completes (exit 0), every variant is stored as a valid run with the target's provenance,
what the target lacked is named in one note instead of failing, and the target is left
as before: cgroups, task and IRQ affinities, sysctls, and no process of the run.
Latency values are never asserted (the boards are emulated).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rtlab.scenario.builtin import builtins
from tests.conftest import machine_lock
from tests.support.store_reading import stored_runs

from .boards import Board, board_facts
from .test_rtlab_on_boards import REPO, same_state

SCENARIOS = sorted(builtins())
TARGETS = ("local", "x86", "arm64")
CELL_DURATION = "3s"  # the whole run: every phase scaled down, keeping proportions


def _start(tmp: Path, args: list[str], cfg: Path | None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(tmp / "xdg"),
           "COLUMNS": "200", CELL_MARK: str(tmp)}
    if cfg is not None:
        env["RTLAB_SSH_CONFIG"] = str(cfg)
    tmp.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "rtlab", "run", *args, "--duration",
                             CELL_DURATION, "--no-report", "--no-progress", "--store",
                             str(tmp / "store.db")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _facts(board: Board | None) -> Any:
    from rtlab.engine.transport import LocalTransport
    from rtlab.system.facts import read_facts

    if board is None:
        return read_facts(LocalTransport())
    return board_facts(board)


CELL_MARK = "RTLAB_TEST_CELL"  # in the environment of a local cell's rtlab and children


def _rtlab_processes(board: Board | None, mark: str = "") -> set[str]:
    """Live processes of engines and loads on the target (pid and command line); on this
    machine those whose environment carries the cell's mark (other work may run here)."""
    if board is not None:
        out = board.ssh("ps", "-o", "pid,stat,args").stdout.splitlines()
        return {ln.strip() for ln in out if ("rtlab-probe" in ln or "stress-ng" in ln)
                and len(ln.split()) > 2 and not ln.split()[1].startswith("Z")}
    found = set()
    for d in Path("/proc").iterdir():
        try:
            if not d.name.isdigit() or f"{CELL_MARK}={mark}".encode() not in (
                    d / "environ").read_bytes().split(b"\0"):
                continue
            stat = (d / "stat").read_text()
            if stat.rpartition(")")[2].split()[0] != "Z":
                argv = (d / "cmdline").read_bytes().split(b"\0")
                found.add(f"{d.name} {b' '.join(argv).decode(errors='replace')}")
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def _variants(name: str) -> int:
    from rtlab.scenario.builtin import find
    from rtlab.scenario.loader import load_file

    return len(load_file(find(name), online=[0, 1]).variants)


def _check_cell(scenario: str, target: Board | None, tmp: Path,
                proc: subprocess.Popen[str], before: Any, running: set[str]) -> list[str]:
    """What is wrong with one cell (empty: nothing)."""
    from rtlab.results.validate import problems

    out, err = proc.communicate(timeout=900)
    where = "this machine" if target is None else target.alias
    if "Traceback" in err or proc.returncode != 0:
        return [f"{scenario} on {where}: exit {proc.returncode}\n{err[-3000:]}{out[-1500:]}"]
    wrong: list[str] = []
    runs = stored_runs(tmp / "store.db")
    if len(runs) != _variants(scenario):
        wrong.append(f"{len(runs)} runs stored, {_variants(scenario)} variants")
    for r in runs:
        if r.status != "completed":
            wrong.append(f"run {r.run_id} {r.status}: {r.notes}")
        wrong += [f"run {r.run_id}: {p}" for p in problems(r)]
        if r.scenario.get("name") != scenario:
            wrong.append(f"run {r.run_id} stored as scenario {r.scenario.get('name')}")
        empty = [f"{ph.name}/{ch.name}" for ph, ch in r.channels() if not ch.samples]
        if empty:
            wrong.append(f"run {r.run_id}: channels without samples: {empty}")
        host = r.provenance["host"]
        if target is not None:
            board = host["target"]
            machine = target.ssh("uname", "-m").stdout.strip()
            if board.get("target") != target.alias or board.get("machine") != machine:
                wrong.append(f"run {r.run_id}: provenance names {board}, not {target.alias}")
            if r.provenance["engine"]["system"].get("preempt") != "rt":
                wrong.append(f"run {r.run_id}: the board's PREEMPT_RT kernel is not recorded")
        shield = host.get("shield") or {}
        if shield.get("requested") is not None and shield.get("release_error"):
            wrong.append(f"run {r.run_id}: {shield['release_error']}")
        # what a target lacked is named in one note each, never replaced silently
        for ph in host["phases"]:
            for load in ph.get("loads") or []:
                if load.get("fallback") and not any(
                        n.startswith(f"load {load['name']}: ") and "built-in" in n
                        for n in r.notes):
                    wrong.append(f"run {r.run_id}: load {load['name']} fell back silently")
    leftover = _rtlab_processes(target, str(tmp)) - running
    if leftover:
        wrong.append(f"processes left: {sorted(leftover)}")
    diff = same_state(before, _facts(target))
    if diff:
        wrong.append(f"not restored: {diff}")
    return [f"{scenario} on {where}: {w}" for w in wrong]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_builtin_scenario_on_every_target(scenario: str, x86_board: Board,
                                          arm64_board: Board, tmp_path: Path,
                                          lab_note: Callable[[str], None]) -> None:
    """The scenario on this machine and both boards at once (they share nothing: each
    target has its own store; this machine's cell holds the machine lock)."""
    targets: list[Board | None] = [x86_board, arm64_board]
    if os.geteuid() == 0:
        targets.insert(0, None)
    else:
        lab_note("built-in scenarios on this machine: skipped (not root)")
    with machine_lock():
        cells = []
        for i, t in enumerate(targets):
            before, running = _facts(t), _rtlab_processes(t, str(tmp_path / str(i)))
            args = [scenario] + ([] if t is None else ["--target", t.alias])
            proc = _start(tmp_path / str(i), args, None if t is None else t.ssh_config)
            cells.append((t, proc, before, running))
        wrong = []
        for i, (t, proc, before, running) in enumerate(cells):
            try:
                wrong += _check_cell(scenario, t, tmp_path / str(i), proc, before, running)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    for i, (t, _, _, _) in enumerate(cells):
        if t is not None and any("built-in" in n and n.startswith("load ")
                                 for r in stored_runs(tmp_path / str(i) / "store.db")
                                 for n in r.notes):
            lab_note(f"{scenario} on {t.alias}: the engine's built-in load stood in for "
                     "stress-ng")
    assert not wrong, "\n".join(wrong)
