# SPDX-License-Identifier: MIT
"""The shield check of a real run: rtlab's own processes (the runner, every thread of
it, and the journal's applier) are listed as its own, never as tasks that leak onto
the shielded CPU, while a foreign task pinned there still is one.

The shield here moves nothing (cpuset = false, tasks = false): the check reads the
same facts and runs the same code as with seed-shielded-cyclic, without taking the
other users' processes of this shared machine off their CPUs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rtlab.results.store import Store

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = """\
[scenario]
name = "shield-check-own"

[shield]
user = "last"
system = "others"
cpuset = false
tasks = false

[[probe]]
name = "measured"
probe = "timer"
cpus = "user"
policy = "fifo"
priority = 99
interval = "1ms"

[[phase]]
name = "only"
duration = "1s"
"""


def _family(pid: int) -> set[int]:
    """Every thread of pid and of its descendants that exist right now."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except OSError:
            continue
        out.update(tids)
        for t in tids:
            with contextlib.suppress(OSError):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{t}/children").read_text().split()]
    return out


def test_run_lists_its_own_processes_apart_from_a_foreign_task(
        require_root: None, probe_bin: str, store_path: Path, tmp_path: Path) -> None:
    last = max(os.sched_getaffinity(0))
    if last == 0:
        pytest.skip("needs two CPUs")
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO)
    foreign = subprocess.Popen(["taskset", "-c", str(last), "sleep", "60"])
    seen: set[int] = set()
    stop = threading.Event()
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "rtlab", "run", str(scenario), "--no-progress", "--no-report"],
            env=dict(os.environ, RTLAB_PROBE=probe_bin, PYTHONPATH=str(ROOT)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def watch() -> None:  # the runner's threads and children as they come and go
            while not stop.is_set():
                seen.update(_family(run.pid))
                time.sleep(0.005)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        _out, err = run.communicate(timeout=120)
        stop.set()
        watcher.join()
        assert run.returncode == 0, err
    finally:
        foreign.kill()
        foreign.wait()
    (row,) = Store.open(str(store_path)).list()
    result = Store.open(str(store_path)).get(row.id)
    check = result.provenance["host"]["shield"]["in_effect"]
    cpu = check["in_effect"]["cpus"][str(last)]
    leaked = {e["tid"]: e for e in cpu["user_tasks"]}
    assert not set(leaked) & seen, [leaked[t] for t in set(leaked) & seen]
    assert foreign.pid in leaked and leaked[foreign.pid]["comm"] == "sleep"
    own = {e["pid"]: e["what"] for e in cpu["own_tasks"]}
    assert own.get(run.pid, "").startswith("rtlab runner")
    appliers = [p for p, what in own.items() if what.startswith("rtlab-probe sys apply")]
    assert len(appliers) == 1 and appliers[0] in seen
    assert any(p.startswith(f"CPU {last}: ") and "user task(s)" in p for p in check["problems"])


# The same scenario with two loads in its phase: one placed on every CPU, one not.
RECHECK = SCENARIO.replace('name = "shield-check-own"', 'name = "shield-recheck"').replace(
    "[[probe]]", """[[load]]
name = "placed"
kind = "stress"
cpu = 1
cpus = "all"

[[load]]
name = "escapee"
kind = "stress"
cpu = 1
cpus = "system"

[[probe]]""") + 'loads = ["placed", "escapee"]\n'


def test_shield_checked_again_after_the_phase_names_a_task_that_arrived(
        require_root: None, probe_bin: str, store_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A load process that escapes its placement onto the shielded CPU during the phase
    (it did not exist when the shield was applied) is named by the check made at the
    end of the phase; a load placed there on purpose (stress-ng on every CPU, every
    worker of it) is the run's own."""
    from rtlab.loads import CommandLoad, from_spec
    from rtlab.runner import RunOptions, run_scenario
    from rtlab.scenario.loader import parse_text

    last = max(os.sched_getaffinity(0))
    if last == 0:
        pytest.skip("needs two CPUs")
    monkeypatch.setenv("RTLAB_PROBE", probe_bin)
    (sc,) = parse_text(RECHECK, "s.toml").variants

    def factory(spec: Any) -> Any:
        if spec.name == "escapee":  # placed on the system CPUs, but pins itself to `last`
            return CommandLoad(["taskset", "-c", str(last), "sleep", "30"], name="escapee")
        return from_spec(spec.to_spec())

    store = Store.open(str(store_path))
    out = run_scenario(sc, RunOptions(store=store, handle_signals=False, doctor=False,
                                      load_factory=factory))
    shield = out.result.provenance["host"]["shield"]
    (check,) = shield["phase_checks"]
    assert check["phase"] == "only" and "error" not in check, check
    new = {t["comm"]: t for t in check["new_tasks"]}
    assert new.get("sleep", {}).get("cpu") == last, check["new_tasks"]
    assert not any(c.startswith("stress-ng") for c in new), check["new_tasks"]
    placed = [o for o in check["own"] if o["what"].startswith("load placed")]
    assert len(placed) >= 2, check["own"]  # the stress-ng leader and its worker
    at_apply = shield["in_effect"]["in_effect"]["cpus"][str(last)]["user_tasks"]
    assert new["sleep"]["tid"] not in {t["tid"] for t in at_apply}
    # the note names the first three new tasks and counts the others: the escapee, or,
    # when other work on this machine started tasks there meanwhile, with them
    (note,) = [n for n in out.result.notes if "appeared during the phase" in n]
    first = [f"{t['comm']}[{t['tid']}] (CPU {t['cpu']})" for t in check["new_tasks"][:3]]
    total = check.get("new_tasks_total", len(check["new_tasks"]))
    assert note.endswith(", ".join(first) + (f" and {total - 3} more" if total > 3 else "")), \
        (note, check["new_tasks"])
    if total == 1:  # nothing else appeared: the note names the escapee
        assert f"sleep[{new['sleep']['tid']}]" in note
