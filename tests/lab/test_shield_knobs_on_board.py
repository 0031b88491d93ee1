# SPDX-License-Identifier: MIT
"""Runtime knobs on the emulated x86_64 board (cgroup v2, PREEMPT_RT): a run whose
[shield] has a cpuset partition and every runtime knob applies them there through the
board's engine (requested vs in effect in the stored result, the knobs the board lacks
named as skipped, derived from its files), and restores them: the knob files and the
board's facts read the same before and after."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .boards import Board
from .test_rtlab_on_boards import board_facts, rtlab, same_state, stored

__all__ = ["board_facts"]

FILES = ("/proc/sys/kernel/timer_migration", "/proc/sys/kernel/watchdog",
         "/proc/sys/vm/stat_interval", "/proc/sys/kernel/numa_balancing",
         "/sys/kernel/mm/transparent_hugepage/enabled")
IDLE = "/sys/devices/system/cpu/cpu1/cpuidle"
FREQ = "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"
SIBLINGS = "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list"


def _read(board: Board) -> dict[str, str]:
    """Every knob file of the board that exists (cpuidle's of CPU 1 too), path -> text."""
    script = ("for f in " + " ".join(FILES) + f" {FREQ} {SIBLINGS} {IDLE}/state*/latency "
              f"{IDLE}/state*/disable; do [ -r \"$f\" ] && printf '%s=%s\\n' \"$f\" "
              "\"$(cat \"$f\")\"; done; true")
    out = board.sh(script).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_run_with_knobs_on_the_board_applies_and_restores(
        x86_board: Board, tmp_path: Path, board_facts: Callable[[Board], Any]) -> None:
    files = _read(x86_board)
    facts_before = board_facts(x86_board)
    thp = files.get(FILES[4], "")
    knobs: dict[str, object] = {
        "timer_migration": files.get(FILES[0]) == "0", "watchdogs": files.get(FILES[1]) == "0",
        "vm_stat_interval": 9, "idle_max_latency_us": 0, "governor": "performance",
        "min_freq": "max", "smt": False,
        "thp": "never" if "[never]" not in thp else "madvise",
        "numa_balancing": files.get(FILES[3]) == "0"}
    lacks = {name for name, path in zip(("timer_migration", "watchdogs", "vm_stat_interval",
                                         "numa_balancing", "thp"), FILES, strict=True)
             if path not in files}
    if not any(k.startswith(IDLE) for k in files):
        lacks.add("idle_max_latency_us")
    if FREQ not in files:
        lacks |= {"governor", "min_freq"}
    if files.get(SIBLINGS, "1") == "1":
        lacks.add("smt")
    else:
        knobs.pop("smt")  # the sibling would be the board's system CPU
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in knobs.items())
    scen = tmp_path / "k.toml"
    scen.write_text(f'[scenario]\nname = "knobs"\n[shield]\nuser = "1"\ncpuset = true\n'
                    f'{lines}\n[[probe]]\nprobe = "timer"\ncpus = "1"\n'
                    '[[phase]]\nname = "p"\nduration = "3s"\n')
    proc = rtlab(x86_board.ssh_config, tmp_path, "run", str(scen), "--no-report",
                 "--no-progress", "--target", x86_board.alias)
    assert proc.returncode in (0, 3), proc.stderr
    (run,) = stored(tmp_path)
    shield = run["provenance"]["host"]["shield"]
    effect = shield["in_effect"]["in_effect"]["knobs"]
    assert set(effect) == set(knobs)
    assert {k for k, e in effect.items() if e["skipped"]} == lacks & set(knobs)
    for name, e in effect.items():
        if name not in lacks:
            assert e["ok"] is True, (name, e)
    assert effect["vm_stat_interval"]["in_effect"] == 9 or "vm_stat_interval" in lacks
    assert shield["in_effect"]["in_effect"]["cgroup"]["partition"] == "isolated"
    assert "released" in shield and "release_error" not in shield
    assert _read(x86_board) == files
    assert same_state(facts_before, board_facts(x86_board)) == []
