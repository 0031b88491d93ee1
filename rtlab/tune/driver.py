# SPDX-License-Identifier: MIT
"""A whole tune: checked and planned before anything changes (`plan_tune`), then
measured while holding the target (`run_tune`), and left exactly as before.

Before anything changes: the scenario resolves on the target (one configuration, its
measured CPUs and the others), the statistics and the budget parse, each candidate
knob is checked against the target's own files (a knob it lacks is skipped and named;
one in effect already too), the doctor's findings rank the candidates (proposed knobs
first), and the budget must reach at least one verdict (else a usage error up front);
candidates beyond it are named "not tested". Then the tune takes the target's owner
lock (a target another rtlab holds is refused), measures, and at the end (also after
an error or Ctrl-C) boots the original kernel command line when it booted another.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.analysis.compare import MIN_WINDOWS
from rtlab.engine.board import open_target
from rtlab.engine.transport import Transport
from rtlab.errors import RtlabError, UsageError
from rtlab.runner.board_checks import target_online_cpus
from rtlab.runner.prepare import RunRequest, prepare
from rtlab.scenario.units import parse_duration
from rtlab.system.sysroot import SysRoot
from rtlab.tune import knobs as catalogue
from rtlab.tune import state as tstate
from rtlab.tune.design import DEFAULT_STATS, MAX_LOOKS, parse_stats
from rtlab.tune.search import Progress, Tuner

DEFAULT_BLOCK_S = 10.0
DEFAULT_BUDGET_S = 3600.0
DEFAULT_PAIRS = 3
OVERHEAD_S = {"local": 4.0, "board": 8.0}  # a run's start and stop, until measured
# what the tune reads of a target besides the doctor's files
EXTRA_PATTERNS = ("/sys/fs/cgroup/cgroup.controllers", "/sys/fs/cgroup/cpuset/cpuset.cpus",
                  "/proc/sys/vm/stat_interval", "/proc/sys/kernel/numa_balancing",
                  "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")


@dataclass(frozen=True)
class TuneRequest:
    target: str | None = None
    scenario: str | None = None  # None: the built-in "tune"
    slo: str | None = None
    budget: str | None = None
    knobs: str | None = None
    stats: str | None = None
    block: str | None = None
    pairs: int = DEFAULT_PAIRS
    confirm_pairs: int | None = None  # None: 2 x pairs
    reboot_cmd: str | None = None
    reboot_timeout: str | None = None
    store: str | None = None
    engine_dir: str | None = None
    directory: str | None = None  # where tunes keep their state (default tstate.tunes_dir)
    command_line: tuple[str, ...] = ()


def _seconds(text: str | None, option: str, default: float) -> float:
    if text is None:
        return default
    return parse_duration(text, option) / 1e9


def stats_of(req: TuneRequest) -> tuple[str, ...]:
    """The statistics the tune decides on: --stats, else the SLO's, else the default."""
    if req.stats is not None:
        return parse_stats(req.stats)
    if req.slo is not None:
        from rtlab.analysis.slo import parse_slo

        slo = parse_slo(req.slo, "--slo")
        names = []
        for clause in getattr(slo, "clauses", ()):
            metric = str(getattr(clause, "metric", "")).lower()
            metric = {"p50": "median", "avg": "mean"}.get(metric, metric)
            if metric in ("median", "mean", "p99", "p99.9", "p99.99", "max") and \
                    metric not in names:
                names.append(metric)
        if names:
            return tuple(names)
    return DEFAULT_STATS


@contextlib.contextmanager
def target_tree(transport: Transport) -> Iterator[SysRoot]:
    """The target's files the catalogue reads (this machine: its own root)."""
    if transport.is_local:
        yield SysRoot("/")
        return
    from rtlab.engine.snapshot import snapshot
    from rtlab.system.target_snapshot import DOCTOR_PATTERNS, materialize

    with tempfile.TemporaryDirectory(prefix="rtlab-tune-") as tmp:
        materialize(snapshot(transport, (*DOCTOR_PATTERNS, *EXTRA_PATTERNS)), Path(tmp))
        yield SysRoot(tmp)


def _doctor(transport: Transport, cpus: list[int]) -> list[dict[str, Any]]:
    """The doctor's findings on the target (for the proposals); [] when it cannot run."""
    try:
        from rtlab.system.doctor import run_checks

        if transport.is_local:
            return [f.to_dict() for f in run_checks("/", cpus=cpus)]
        from rtlab.system.target_snapshot import doctor_tree

        with tempfile.TemporaryDirectory(prefix="rtlab-tune-doctor-") as tree:
            return [f.to_dict() for f in run_checks(str(doctor_tree(transport, Path(tree))),
                                                      cpus=cpus, engine=transport)]
    except (RtlabError, OSError, ValueError):
        return []


def plan_tune(req: TuneRequest, transport: Transport) -> dict[str, Any]:
    """Everything checked and decided before anything changes: the tune's first state."""
    stats = stats_of(req)
    reboot_timeout = _seconds(req.reboot_timeout, "--reboot-timeout", 600.0)
    if req.reboot_cmd is not None and (not req.reboot_cmd.strip() or len(req.reboot_cmd) > 4096
                                       or any(ord(c) < 32 and c != "\t"
                                              for c in req.reboot_cmd)):
        raise UsageError("--reboot-cmd: not a command (empty, control characters, or over "
                         "4096 characters)", hint="docs/tune.md, 'Boot knobs'")
    budget = _seconds(req.budget, "--budget", DEFAULT_BUDGET_S)
    block = _seconds(req.block, "--block", DEFAULT_BLOCK_S)
    if block < 2:
        raise UsageError(f"--block {req.block} is too short", hint="give 2s or more (10s is "
                         "the default; longer blocks decide the tails in fewer blocks)")
    if not 1 <= req.pairs <= 50:
        raise UsageError(f"--pairs {req.pairs} out of range (1-50)")
    wanted = catalogue.select(req.knobs, boot=req.reboot_cmd is not None)
    online = None if transport.is_local else target_online_cpus(transport)
    _, variants = prepare(RunRequest(scenario=req.scenario or "tune"), online)
    if len(variants) != 1:
        raise UsageError(f"scenario {req.scenario} has {len(variants)} variants: a tune "
                         "measures one workload", hint="give a scenario without [matrix]")
    sc = variants[0]
    online_now = online if online is not None else sorted(SysRoot("/").online_cpus() or [])
    if sc.shield is not None:
        user, system = list(sc.shield.user), list(sc.shield.system)
    else:
        user = sorted(sc.measured_cpus)
        system = [c for c in online_now if c not in user]
    skipped: dict[str, str] = {}
    candidates: list[str] = []
    with target_tree(transport) as root:
        for k in wanted:
            why = catalogue.missing(k, root, user, system) or catalogue.already(
                k, root, sc.shield, user, system)
            if why:
                skipped[k.name] = why
            else:
                candidates.append(k.name)
    findings = _doctor(transport, user)
    proposed = catalogue.proposals(findings)
    rank = {n: i for i, n in enumerate(candidates)}
    candidates.sort(key=lambda n: (n not in proposed, rank[n]))
    cost = block + OVERHEAD_S["local" if transport.is_local else "board"]
    one = 2 * req.pairs * cost
    if not candidates:
        raise UsageError("no knob left to tune: " + "; ".join(
            f"{n}: {why}" for n, why in skipped.items()) if skipped else
            "no knob left to tune", hint="see `rtlab tune --list-knobs`")
    confirm_pairs = 2 * req.pairs if req.confirm_pairs is None else req.confirm_pairs
    if not 1 <= confirm_pairs <= 100:
        raise UsageError(f"--confirm-pairs {confirm_pairs} out of range (1-100)")
    if budget < one:
        raise UsageError(
            f"--budget {req.budget or f'{budget:g}s'} is too short for any verdict: one knob "
            f"needs {2 * req.pairs} blocks of {block:g} s (about {math.ceil(one)} s with "
            f"start-up)", hint=f"give --budget {math.ceil(one / 60) + 1}m or more, a shorter "
            "--block, or fewer --pairs")
    fits = max(1, int((budget - 2 * confirm_pairs * cost) // one)) if budget > one else 1
    not_tested = candidates[fits:]
    candidates = candidates[:fits]
    return tstate.new(
        tune_id=tstate.new_id(), target=req.target, scenario=sc.name, stats=stats,
        budget_s=budget, block_s=block, block_cost_s=cost, pairs=req.pairs,
        confirm_pairs=confirm_pairs, candidates=candidates, skipped=skipped,
        proposed=proposed, not_tested=not_tested, user=user, system=system, slo=req.slo,
        store=req.store,
        reboot=({"command": req.reboot_cmd, "timeout_s": reboot_timeout}
                if req.reboot_cmd else None),
        command_line=list(req.command_line)) | {"scenario_ref": req.scenario or "tune",
                                                "scenario_text": sc.text,
                                                "online_cpus": list(online_now),
                                                "engine_dir": req.engine_dir}


def plan_lines(state: dict[str, Any]) -> list[str]:
    """The plan in words, with its estimated time."""
    p = state["plan"]
    k = len(state["candidates"])
    blocks = 2 * p["pairs"] * k + 2 * p["confirm_pairs"]
    first = blocks * p["block_cost_s"]
    most = (2 * p["pairs"] * k * (2 ** MAX_LOOKS - 1) + 2 * p["confirm_pairs"]) * \
        p["block_cost_s"]
    out = [f"tune {state['id']}: {state['scenario']} on {state['target'] or 'this machine'}, "
           f"measured CPUs {','.join(map(str, state['user_cpus']))}; deciding on "
           f"{', '.join(state['stats'])} (lower is better)",
           f"plan: {k} knob(s) screened against the baseline in interleaved blocks of "
           f"{p['block_s']:g} s ({2 * p['pairs']} blocks each, more while inconclusive), "
           f"the winners combined, the result confirmed in {2 * p['confirm_pairs']} blocks",
           f"estimated time: {_hms(first)} at the first looks, at most "
           f"{_hms(min(most, state['budget_s']))} (budget {_hms(state['budget_s'])})"]
    windows = int(p["block_s"]) * p["pairs"]  # 1-s window maxima per side, first look
    if "max" in state["stats"] and windows < MIN_WINDOWS:
        out.append(f"note: the first look has {windows} window maxima a side and `max` needs "
                   f"{MIN_WINDOWS}: it is decided at a later look at the earliest (a longer "
                   "--block or more --pairs decides it sooner)")
    for n in state["candidates"]:
        why = state["proposed"].get(n)
        out.append(f"  candidate {n}" + (f" (proposed by the doctor: {'; '.join(why)})"
                                         if why else ""))
    for n, why in state["skipped"].items():
        out.append(f"  skipped {n}: {why}")
    for n in state["not_tested"]:
        out.append(f"  not tested {n}: beyond the budget")
    return out


def _hms(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def tune_dir(state: dict[str, Any], base: str | None) -> Path:
    d = (Path(base) if base else tstate.tunes_dir()) / state["id"]
    d.mkdir(parents=True, exist_ok=True)
    return d


def run_tune(state: dict[str, Any], directory: Path, transport: Transport, *,
             on_progress: Callable[[Progress], None] | None = None,
             on_event: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure the plan in `state` on the open target, holding it; resumable."""
    from rtlab.system.applier import hold_target
    from rtlab.system.journal_files import journal_dir
    from rtlab.tune.bench import RunnerBench

    def save(s: dict[str, Any]) -> None:
        tstate.save(directory, s)

    save(state)
    if transport.is_local:
        journal_dir(transport).mkdir(parents=True, exist_ok=True)
    with hold_target(transport, journal_dir(transport), "tune"):
        rebooter = _rebooter(state, on_event, save)
        try:
            bench = RunnerBench(
                target=state["target"], scenario=state["scenario_ref"],
                block_s=state["plan"]["block_s"], store=state["store"], tune_id=state["id"],
                user=state["user_cpus"], system=state["system_cpus"],
                base_shield=None, engine_dir=state.get("engine_dir"),
                boot=rebooter.boot_params if rebooter is not None else None,
                on_event=on_event, command_line=state["command_line"])
            Tuner(state, bench, save=save, on_progress=on_progress, on_event=on_event).run()
        finally:
            if rebooter is not None:
                rebooter.back(state, save)
    return state


def _rebooter(state: dict[str, Any], on_event: Callable[[str], None] | None,
              save: Callable[[dict[str, Any]], None]) -> Any:
    if not state.get("reboot"):
        return None
    from rtlab.tune.boots import BootControl

    return BootControl(state, on_event=on_event, save=save)


def open_for(req: TuneRequest) -> contextlib.AbstractContextManager[Transport]:
    return open_target(req.target, req.engine_dir)


def as_root_hint() -> str | None:
    if os.geteuid() != 0:
        return "rtlab tune changes the system (shield, IRQs, sysctls): run it as root"
    return None


def slo_outcome(state: dict[str, Any]) -> dict[str, Any] | None:
    """The SLO (--slo) checked on every block of the confirmed configuration (the
    baseline's blocks when no knob was kept): met only when every block meets it;
    a block too short to decide a percentile leaves it undecided (not met)."""
    if not state.get("slo"):
        return None
    from rtlab.analysis.slo import evaluate_slo, parse_slo
    from rtlab.probes.registry import shape as probe_shape
    from rtlab.results.store import Store

    exps = {e["name"]: e for e in state["experiments"]}
    conf = exps.get("confirm")
    if conf is not None and conf["blocks"]:
        ids, which = [b["run_id"] for b in conf["blocks"] if b["side"] == "B"], "confirmed"
    else:
        ids = [b["run_id"] for e in state["experiments"] for b in e["blocks"]
               if b["side"] == "A" and not e["a"]]
        which = "baseline"
    if not ids:
        return {"configuration": which, "verdict": "undecided", "passed": False,
                "summary": "SLO NOT DECIDED: no block of the configuration was measured"}
    store = Store.open(state.get("store"), create=False)
    try:
        runs = [store.get(i) for i in ids]
    finally:
        store.close()
    report = evaluate_slo(parse_slo(state["slo"], "--slo"), runs, shape_of=probe_shape)
    return {"configuration": which, "blocks": len(runs), **report.to_dict()}


def keep(state: dict[str, Any], transport: Transport) -> dict[str, Any]:
    """`--keep`: the recommended runtime configuration applied persistently, as `rtlab
    shield --scenario` would (journaled, detached: `rtlab shield --reset` undoes it).
    Boot knobs are not kept (the reboot interface boots once by design): the exported
    kernel command line is for the bootloader. The DMA latency hold lives only as long
    as a process holds it: not kept."""
    from dataclasses import replace

    from rtlab.runner.shield import shield_request
    from rtlab.system.facts import read_facts
    from rtlab.system.journal_files import journal_dir
    from rtlab.system.shield_apply import apply_shield

    final = list(state.get("final") or [])
    notes: list[str] = []
    boot = [n for n in final if catalogue.BY_NAME[n].kind == "boot"]
    if boot:
        notes.append(f"boot knobs not kept ({', '.join(boot)}): install the exported kernel "
                     "command line through the bootloader")
    runtime = [n for n in final if catalogue.BY_NAME[n].kind == "runtime"]
    if not runtime:
        return {"applied": False, "notes": [*notes, "no runtime knob to keep"]}
    online = None if transport.is_local else target_online_cpus(transport)
    _, variants = prepare(RunRequest(scenario=state["scenario_ref"]), online)
    spec = catalogue.runtime_shield(variants[0].shield, runtime, state["user_cpus"],
                                    state["system_cpus"])
    assert spec is not None
    if spec.dma_latency is not None:
        spec = replace(spec, dma_latency=None)
        notes.append("cpu_dma_latency not kept: it holds only while a process keeps "
                     "/dev/cpu_dma_latency open (tuned's force_latency, or the application)")
    facts = read_facts(transport)
    out = apply_shield(transport, shield_request(spec, facts), journal_dir(transport),
                       facts=facts, cpuset=spec.cpuset, system=frozenset(spec.system))
    return {"applied": True, "knobs": runtime, "notes": notes,
            "undo": "rtlab shield --reset" + (f" --target {state['target']}"
                                             if state.get("target") else ""),
            "journal": str(out.get("journal") or "")}
