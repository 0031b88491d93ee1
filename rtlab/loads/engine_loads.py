# SPDX-License-Identifier: MIT
"""The kinds the engine itself runs here: `builtin` (`rtlab-probe load`, its own CPU +
memory load, for targets without stress-ng: labelled as such, never substituted for
`stress` silently) and `rt-competitor` (`rtlab-probe timer` threads at a lower RT
priority)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rtlab.cpulist import format_cpulist
from rtlab.engine.locate import find_probe
from rtlab.errors import SkippedError
from rtlab.loads.lifecycle import RT_POLICIES, Command, Load, Placement, Proc, SpawnRecorder
from rtlab.loads.params import Param, format_size, parse_duration, preset_values
from rtlab.probes.registry import DEFAULT_PROBE

# --------------------------------------------------------------------------------------------
# builtin (rtlab-probe load: the engine's own CPU + memory load)

BUILTIN_MAX_WORKERS = 1024  # of each kind (the engine's LOAD_MAX_WORKERS)
BUILTIN_LABEL = ("the engine's built-in CPU+memory load (rtlab-probe load), not stress-ng: "
                 "cpu workers spin on square roots, vm workers map, dirty and unmap vm_bytes")

BUILTIN_PRESETS: dict[str, dict[str, Any]] = {
    # the seed talk's `stress --cpu 8 --vm 8 --vm-bytes 20M`, with the engine's load
    "seed": {"cpu": 8, "vm": 8, "vm_bytes": 20 << 20},
}

BUILTIN_PARAMS: tuple[Param, ...] = (
    Param("preset", "choice", "none",
          "start from a preset (its values are used for keys not given); "
          "seed = --cpu 8 --vm 8 --vm-bytes 20M", choices=("none", *BUILTIN_PRESETS)),
    Param("cpu", "int", 0, "workers spinning on square roots (like stress --cpu)",
          min=0, max=BUILTIN_MAX_WORKERS),
    Param("duty", "str", "", "ON/PERIOD, e.g. \"2ms/20ms\": each cpu worker spins ON every "
          "PERIOD instead of all the time (--cpu-duty; comm rtlab-spin); with policy fifo, "
          "priority 97 and one CPU it is the seed's RT task spinning D ms every P ms"),
    Param("vm", "int", 0, "workers that map vm_bytes, write every page, unmap, repeat "
          "(like stress --vm)", min=0, max=BUILTIN_MAX_WORKERS),
    Param("vm_bytes", "size", 64 << 20, "memory a vm worker maps per loop (--vm-bytes)",
          min=4 << 10, max=64 << 30),
)


def check_builtin(v: Mapping[str, Any]) -> list[str]:
    if not v["cpu"] and not v["vm"]:
        return ["builtin: no worker selected; set cpu and/or vm to a positive number, "
                "or preset = \"seed\""]
    if v.get("duty"):
        if not v["cpu"]:
            return ["builtin: duty needs cpu workers; set cpu to a positive number"]
        err = duty_error(v["duty"])
        if err:
            return [f"builtin: duty = {v['duty']!r}: {err}"]
    return []


DUTY_MIN_ON_NS = 1_000  # the engine's LOAD_DUTY_MIN_ON
DUTY_PERIOD_NS = (100_000, 10_000_000_000)  # LOAD_DUTY_MIN_PERIOD, LOAD_DUTY_MAX_PERIOD


def duty_error(text: str) -> str | None:
    """What is wrong with a duty value "ON/PERIOD" (the engine's --cpu-duty checks,
    so a scenario is refused before anything starts), or None."""
    parts = text.split("/")
    if len(parts) != 2:
        return "not ON/PERIOD (two durations, e.g. \"2ms/20ms\": spin 2ms every 20ms)"
    try:
        on, period = (parse_duration(x) for x in parts)
    except ValueError:
        return "not ON/PERIOD (two durations with a unit ns|us|ms|s, e.g. \"2ms/20ms\")"
    if not DUTY_PERIOD_NS[0] <= period <= DUTY_PERIOD_NS[1]:
        return "the period is out of range; allowed 100us..10s"
    if not DUTY_MIN_ON_NS <= on < period:
        return "ON must be at least 1us and shorter than the period"
    return None



def builtin_values(params: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults, then the preset's values, then the given keys."""
    return preset_values(BUILTIN_PARAMS, BUILTIN_PRESETS, params)


BUILTIN_POLICIES = ("other", "fifo", "rr")  # the engine's load --policy


class BuiltinLoad(Load):
    """`rtlab-probe load --cpu N --vm M --vm-bytes SIZE [--cpus LIST] [--policy P
    --priority N]`: the engine's own CPU + memory load (docs/engine.md). It leads its own
    process group, forks its workers into it (each set to the placement's policy before
    it works) and prints a `load` record, then a `load_result` with loop counts."""

    kind = "builtin"
    default_placement = Placement(None, "other", 0)

    def __init__(self, params: Mapping[str, Any] | None = None,
                 placement: Placement | None = None, *, name: str | None = None):
        super().__init__(params, placement, name=name)
        self.extra["label"] = BUILTIN_LABEL

    def check_tools(self) -> None:
        self.probe = _executable_probe("")

    def load_args(self) -> list[str]:
        """The engine's arguments: `load --cpu N ...` (the same here and on a board)."""
        v, pl = self.params, self.placement
        a = ["load"]
        if v["cpu"]:
            a += ["--cpu", str(v["cpu"])]
            if v.get("duty"):
                a += ["--cpu-duty", v["duty"]]
        if v["vm"]:
            a += ["--vm", str(v["vm"]), "--vm-bytes", format_size(v["vm_bytes"])]
        if pl.cpus is not None:
            a += ["--cpus", format_cpulist(pl.cpus)]
        if pl.policy in RT_POLICIES:
            a += ["--policy", pl.policy, "--priority", str(pl.priority)]
        return a

    def commands(self) -> list[Command]:
        def ready(p: Proc) -> bool:  # the `load` record: every worker has been forked
            return p.stdout_path.is_file() and p.stdout_path.stat().st_size > 0

        return [Command("rtlab-probe-load",
                        [getattr(self, "probe", "rtlab-probe"), *self.load_args()],
                        workers=True, ready=ready)]

    def collect(self) -> None:
        for p in self.procs:
            try:
                lines = p.stdout_path.read_text().splitlines()
            except OSError:
                continue
            self.take_records(_json_records(lines))

    def take_records(self, records: Sequence[Mapping[str, Any]]) -> None:
        """The engine's `load_result` (loop counts, how it ended) and the scheduling in
        effect on its workers (its `load` record, read back there) into the description."""
        sched = None
        for rec in records:
            if rec.get("type") == "load":
                sched = sorted({(w.get("policy"), w.get("priority"))
                                for w in rec.get("workers") or [] if isinstance(w, dict)},
                               key=str)
            if rec.get("type") == "load_result":
                self.extra["builtin"] = {k: rec.get(k) for k in (
                    "status", "exit_code", "elapsed_ns", "loops", "error")}
        if sched is not None:
            # each distinct (policy, priority) of the workers: one, unless the engine
            # changed (it stops when a worker's differs from the asked one)
            self.extra.setdefault("builtin", {})["workers_sched"] = [
                {"policy": p, "priority": n} for p, n in sched]


def _json_records(lines: Sequence[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # not a JSON line (a tool's message), or a torn last line
        if isinstance(rec, dict):
            out.append(rec)
    return out


# --------------------------------------------------------------------------------------------
# rt-competitor (rtlab-probe timer at a lower RT priority)

COMPETITOR_PARAMS: tuple[Param, ...] = (
    Param("interval", "duration", 1_000_000, "wake-up period of the competing threads",
          min=1_000, max=10_000_000_000),
    Param("probe", "str", "", "path of rtlab-probe (default: $RTLAB_PROBE, beside the "
          "running Python, or PATH)"),
    Param("capture", "bool", True, "keep the competitor's JSON Lines in the work directory "
          "and its last record in the load's description (false: --output /dev/null)"),
)


def _executable_probe(explicit: str) -> str:
    """The rtlab-probe a load runs: `explicit`, or the one found; SkippedError when it is
    not there or not an executable file."""
    probe = explicit
    if not probe:
        try:
            probe = str(find_probe())
        except Exception as e:  # RtlabError: not found
            raise SkippedError("rtlab-probe not found for the rt-competitor load",
                               hint="build it (make setup) or set RTLAB_PROBE") from e
    if not (os.path.isfile(probe) and os.access(probe, os.X_OK)):
        raise SkippedError(f"rtlab-probe {probe} is not an executable file",
                           hint="build it (make setup) or set RTLAB_PROBE")
    return probe


class RtCompetitorLoad(Load):
    """Competing timer threads: `rtlab-probe timer --cpus X --priority 98 ...`. Under a
    cgroup v2 partition the threads of the partition's CPUs run as a second process that
    joins it (`rtlab-probe --cgroup DIR timer ...`): the seed's competitors in both sets."""

    kind = "rt-competitor"
    default_placement = Placement(None, "fifo", 98)
    splits = True

    def check_tools(self) -> None:
        self.probe = _executable_probe(self.params["probe"])

    def argv(self, output: str, cpus: tuple[int, ...] | None = None,
             cgroup: str | None = None) -> list[str]:
        """The engine's command line: the placement's CPUs, or `cpus` (one part)."""
        pl = self.placement
        cpus = pl.cpus if cpus is None else cpus
        a = [getattr(self, "probe", "rtlab-probe"),
             *(["--cgroup", cgroup] if cgroup else []), DEFAULT_PROBE,
             "--policy", pl.policy if pl.policy in ("fifo", "rr") else "other",
             "--priority", str(pl.priority),
             "--interval", f"{self.params['interval']}ns", "--output", output]
        if cpus is not None:
            a += ["--cpus", format_cpulist(cpus)]
        return a

    def setup(self, recorder: SpawnRecorder, workdir: Path) -> None:
        n = len(self.placement_parts())
        self.outputs: list[Path] = (
            [workdir / ("competitor.jsonl" if i == 0 else f"competitor-{i}.jsonl")
             for i in range(n)] if self.params["capture"] else [])

    def commands(self) -> list[Command]:
        out: list[Command] = []
        for i, (cpus, cgroup) in enumerate(self.placement_parts()):
            path = self.outputs[i] if self.outputs else None
            ready: Callable[[Proc], bool] | None = None
            if path is not None:
                def ready(p: Proc, path: Path = path) -> bool:
                    return path.exists() and path.stat().st_size > 0
            out.append(Command("rtlab-probe", self.argv(str(path) if path else os.devnull,
                                                        cpus, cgroup), ready=ready))
        return out

    def collect(self) -> None:
        """The last record of each process: its channels into the description."""
        outputs = getattr(self, "outputs", [])
        if not outputs:
            return
        self.extra["output"] = str(outputs[0]) if len(outputs) == 1 else [str(o) for o in outputs]
        records = [r for r in (_last_record(o) for o in outputs) if r is not None]
        self.last_record = records[0] if records else None
        if records:
            self.extra["competitor"] = {
                "record": "result" if all(r["type"] == "result" for r in records)
                else "snapshot",
                "channels": [{k: c.get(k) for k in ("name", "cpu", "samples", "missed",
                                                     "min_ns", "max_ns", "sum_ns")}
                             for r in records for c in (r.get("channels") or [])
                             if isinstance(c, dict)],
            }


def _last_record(path: Path) -> dict[str, Any] | None:
    """The last result or snapshot record of an engine's JSON Lines file (None: none)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed probe
        if isinstance(rec, dict) and rec.get("type") in ("result", "snapshot"):
            return rec
    return None

