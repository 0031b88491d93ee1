# SPDX-License-Identifier: MIT
"""One phase of a run: its loads started and verified, its probes run in parallel (one
engine process each, or two for a probe split by a cgroup v2 partition), the shield
checked again while the loads still run, spikes attributed when traced, and the
probes' results combined into one. A phase returns what it did (`PhaseRecord`); it
writes into nothing it is given."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rtlab.analysis.cpushare import shared_cpu_notes
from rtlab.cpulist import format_cpulist
from rtlab.engine.argv import probe_args
from rtlab.engine.options import adapt_for
from rtlab.engine.session import EngineSession, SessionOutcome
from rtlab.engine.transport import Transport
from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode
from rtlab.loads import LoadSet
from rtlab.probes.registry import info as probe_info
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import RunResult
from rtlab.runner.control import RunControl
from rtlab.runner.outcome import classify, combine_probes
from rtlab.runner.raw_layout import layout_add, raw_for, split_raw
from rtlab.runner.run_options import Progress, RunOptions
from rtlab.runner.shield import ShieldBackend
from rtlab.runner.tracing import TRACE_START_GRACE_S, PhaseTrace, phase_trace
from rtlab.scenario.model import Phase, ProbeSpec, Scenario, ShieldSpec
from rtlab.scenario.overrides import with_options

Traced = tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], list[str]]


def now() -> str:
    """The wall clock as the provenance records it."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class RunContext:
    """What every phase of one run shares."""

    scenario: Scenario
    opts: RunOptions
    control: RunControl
    transport: Transport
    run_id: str
    first_raw: Path
    host: dict[str, Any]  # the run's provenance.host, given to each probe's result
    ref: dict[str, Any]  # the scenario reference stored with the result
    backend: ShieldBackend | None = None
    owner: Any = None  # a board's owner session (its journal), when not shielded


@dataclass
class PhaseRecord:
    """What one phase did: its provenance (`info`), its combined result and exit code
    (None: nothing measured, e.g. stopped before it measured), the loads that died
    early, the shield's check after it, and the error that ended it."""

    info: dict[str, Any]
    outcome: tuple[RunResult, ExitCode] | None = None
    loads_died: list[str] = field(default_factory=list)
    shield_check: dict[str, Any] | None = None
    error: RtlabError | None = None


def run_phase(ctx: RunContext, index: int, phase: Phase,
              loads: dict[str, Any]) -> PhaseRecord:
    """One phase: its loads, its probes in parallel, collected into one result phase.
    An RtlabError ends the phase and is returned in the record (with what the phase
    did until then), never raised."""
    record = PhaseRecord({"name": phase.name, "duration_ns": phase.duration_ns,
                          "loads": [], "raw": [], "engine_args": [], "start_wall": now()})
    try:
        record.outcome = _measure(ctx, index, phase, loads, record)
    except RtlabError as exc:
        record.error = exc
    return record


def _measure(ctx: RunContext, index: int, phase: Phase, loads: dict[str, Any],
             record: PhaseRecord) -> tuple[RunResult, ExitCode] | None:
    scenario, opts, backend, info = ctx.scenario, ctx.opts, ctx.backend, record.info
    active = [loads[n] for n in phase.loads]
    tracer = None
    shield_notes: list[str] = []
    load_notes: list[str] = []  # what a load says about itself once it runs (`notes`)
    traced: Traced | None = None
    if scenario.trace is not None and scenario.trace.enabled:
        phase, tracer = _traced_phase(scenario, index, phase, ctx)
    with ExitStack() as stack:
        loadset = None
        if active:
            opts.event(f"phase {phase.name}: starting loads " + ", ".join(phase.loads))
            # the journal of the target: the shield's, else a board's owner session
            recorder = backend.recorder if backend is not None else ctx.owner
            partition = getattr(backend, "probe_cgroup", None) if backend is not None else None
            if partition and scenario.shield is not None:
                # a cgroup v2 partition: what runs on its CPUs must be inside it
                for ld in active:
                    ld.join_partition(str(partition), frozenset(scenario.shield.user))
            loadset = LoadSet(active, recorder, settle_s=opts.load_settle_s,
                              on_death=lambda ld: opts.event(f"load {ld.name} died early"))
            stack.callback(lambda: info.__setitem__("loads", loadset.describe()))
            stack.callback(loadset.stop)
            loadset.start()
            load_notes += [n for ld in active for n in getattr(ld, "notes", ())]
            for n in load_notes:
                opts.event(n)
        if ctx.control.signal is not None:
            return None
        if backend is not None and scenario.shield is not None:
            spec = scenario.shield
            # if this fails, the check at the end has no IRQ counts to compare with
            with suppress(RtlabError, OSError, ValueError):
                backend.phase_start()

            def recheck() -> None:
                record.shield_check = _recheck_shield(backend, spec, phase.name, active,
                                                      shield_notes)
            stack.callback(recheck)
        opts.event(f"phase {phase.name}: measuring" + (", traced" if tracer else ""))
        outcomes = _run_probes(ctx, index, phase, info, tracer)
        if tracer is not None:
            opts.event(f"phase {phase.name}: attributing spikes")
            traced = _finish_trace(tracer, outcomes, phase.name, ctx.transport)
        if loadset is not None:
            for ld in loadset.died():
                why = next((p.describe()["stderr_tail"].splitlines()[-1:]
                            for p in ld.procs if p.died_early), [])
                record.loads_died.append(f"phase {phase.name}: load {ld.name} died early"
                                         + (f": {why[0]}" if why else ""))
    info["end_wall"] = now()
    results: list[tuple[RunResult, ExitCode]] = []
    error: RtlabError | None = None
    for probe, outcome in outcomes:
        try:
            res, code = classify(outcome, ctx.run_id, ctx.host, ctx.ref, phase.name)
        except RtlabError as exc:
            error = error or exc
            continue
        if phase.more_probes:
            for ch in res.phases[0].channels:
                ch.name = f"{probe.label or probe.name}.{ch.name}"
        results.append((res, code))
    if not results:
        if error is not None and error.code == ExitCode.INTERRUPTED:
            return None
        if error is not None:
            raise error
        return None
    base = results[0][0]
    base.notes += shield_notes + load_notes
    shielded = set(scenario.shield.user) if backend is not None and scenario.shield else None
    base.notes += shared_cpu_notes(
        probe_shape(base.probe), [ch for res, _ in results for ch in res.phases[0].channels],
        _load_cpus(active, shielded, [ch.cpu for res, _ in results
                                      for ch in res.phases[0].channels]))
    if not phase.more_probes and len(results) > 1:  # one probe in parts: CPUs in order
        merged = combine_probes(results)
        merged[0].phases[0].channels.sort(key=lambda ch: (ch.cpu is None, ch.cpu or 0))
        results = [merged]
        base = merged[0]
    if traced is not None:
        spikes, summary, tinfo, tnotes = traced
        ph = base.phases[0]
        ph.spikes, ph.spike_summary, ph.trace = spikes, summary, tinfo
        base.notes += tnotes
    return combine_probes(results)


def _recheck_shield(backend: ShieldBackend, spec: ShieldSpec, phase: str, loads: list[Any],
                    notes: list[str]) -> dict[str, Any]:
    """The shield checked again after the phase measured, its loads still running (for
    provenance.host.shield.phase_checks), and a note for tasks that appeared on the
    shielded CPUs during the phase. A failed check is recorded, never fatal."""
    user = set(spec.user)
    own: dict[int, str] = {}
    for ld in loads:  # loads placed on shielded CPUs on purpose, every process of them
        cpus = getattr(getattr(ld, "placement", None), "cpus", None)
        if cpus is None or not user & set(cpus):
            continue
        what = f"load {ld.name} (placed on CPUs {format_cpulist(cpus)})"
        for pid in ld.own_pids():
            own[pid] = what
    try:
        check = {"phase": phase, **backend.phase_check(own)}
    except (RtlabError, OSError, ValueError) as exc:
        check = {"phase": phase, "error": str(exc)}
    new = check.get("new_tasks") or []
    if new:
        named = ", ".join(f"{t['comm']}[{t['tid']}] (CPU {t['cpu']})" for t in new[:3])
        more = check.get("new_tasks_total", len(new)) - 3
        notes.append("task(s) that may run on a shielded CPU appeared during "
                     f"the phase: {named}" + (f" and {more} more" if more > 0 else ""))
    return check


def _load_cpus(loads: list[Any], shielded: set[int] | None, measured: list[int | None]
               ) -> set[int] | None:
    """The measured CPUs where the phase's loads may run (None: all of them): a load's
    placement, or anywhere (outside a shield's CPUs) when it has none."""
    out: set[int] = set()
    for ld in loads:
        cpus = getattr(getattr(ld, "placement", None), "cpus", None)
        if cpus is not None:
            out |= set(cpus)
        elif shielded is None:
            return None
        else:
            out |= {c for c in measured if c is not None and c not in shielded}
    return out


def _traced_phase(scenario: Scenario, index: int, phase: Phase, ctx: RunContext
                  ) -> tuple[Phase, PhaseTrace]:
    """The phase with its measured probe writing samples, and its PhaseTrace (the engine
    of the measured probe records; on a board into the board's runs directory)."""
    assert scenario.trace is not None
    board = getattr(ctx.transport, "board", None)
    target_runs = None if ctx.transport.is_local else str(board.runs_dir)
    tracer = phase_trace(scenario.trace, ctx.first_raw.parent, ctx.run_id, index, phase.name,
                         target_runs)
    if probe_info(phase.probe.name).lists_gaps:
        # a polling probe has no samples: it lists its gaps; list every gap that can spike
        if "record_gaps_above_ns" not in phase.probe.options:
            phase = replace(phase, probe=with_options(
                phase.probe, record_gaps_above_ns=scenario.trace.threshold_ns))
        tracer.writes_samples = False  # nothing to fetch from a board but the capture
        return phase, tracer
    given = phase.probe.options.get("samples_file")
    if given and target_runs is None:
        tracer.samples_path = Path(str(given))
    else:  # a board writes its samples in its runs directory; they are fetched home
        phase = replace(phase, probe=with_options(
            phase.probe, samples_file=tracer.target_path(tracer.samples_path.name)))
    return phase, tracer


def _finish_trace(tracer: PhaseTrace, outcomes: list[tuple[ProbeSpec, SessionOutcome]],
                  phase: str, transport: Transport) -> Traced:
    """Attribution never loses the measurement: a failure becomes a note."""
    collector = outcomes[0][1].collector if outcomes else None
    header = collector.header if collector else None
    try:
        return tracer.finish(header, phase, gaps=collector.gaps if collector else None,
                             transport=transport)
    except Exception as exc:
        return [], {"threshold_ns": tracer.threshold_ns, "spikes": 0, "attributed": 0,
                    "stored": 0, "by_class": {}, "top_causes": {},
                    "error": f"{type(exc).__name__}: {exc}"}, {
            "threshold_ns": tracer.threshold_ns}, [
            f"tracing failed: {type(exc).__name__}: {exc}"]


def _run_probes(ctx: RunContext, index: int, phase: Phase, info: dict[str, Any],
                tracer: PhaseTrace | None = None) -> list[tuple[ProbeSpec, SessionOutcome]]:
    scenario, opts, control, transport = ctx.scenario, ctx.opts, ctx.control, ctx.transport
    run_id, first_raw, backend = ctx.run_id, ctx.first_raw, ctx.backend
    sessions: list[tuple[ProbeSpec, EngineSession]] = []
    partition = getattr(backend, "probe_cgroup", None) if backend is not None else None
    for probe in phase.probes:
        raw = raw_for(first_raw, run_id, scenario, index, phase, probe)
        for part, (cpus, cgroup, part_raw) in enumerate(
                _probe_parts(probe, partition, scenario, raw)):
            options = dict(probe.options)
            if tracer is not None and probe is phase.probe:  # its engine records the trace
                options.update(tracer.engine_options(part))
            if cpus is not None:
                options["cpus"] = list(cpus)
            if opts.allow_non_rt:
                options["allow_non_rt"] = True
            options = adapt_for(transport, probe.name, options)  # cpus->cpu etc. per probe
            args = probe_args(probe.name, options)
            if cgroup is not None:
                # a cgroup v2 partition: only its own tasks may use the shielded CPUs
                args = ["--cgroup", cgroup, *args]
            if part_raw != raw:
                layout_add(first_raw, run_id, index, part_raw)
            watchdog = opts.watchdog_s or 3 * probe.snapshot_interval_ns / 1e9 + 5.0
            session = EngineSession(transport, args, part_raw, watchdog_s=watchdog,
                                    stop_grace_s=opts.stop_grace_s, keep_as=part_raw.name,
                                    start_grace_s=TRACE_START_GRACE_S if "trace_dir" in options
                                    else 0.0,
                                    on_record=_progress_cb(opts, phase, index,
                                                           len(scenario.phases)))
            info["engine_args"].append(args)
            info["raw"].append(part_raw.name)
            sessions.append((probe, session))
    for _, session in sessions:
        session.on_record = _bind(session.on_record, session)
        control.add(session)
    outcomes: list[SessionOutcome | BaseException | None] = [None] * len(sessions)

    def work(i: int, session: EngineSession) -> None:
        try:
            outcomes[i] = session.run()
        except BaseException as exc:  # re-raised in the main thread
            outcomes[i] = exc

    if len(sessions) == 1:
        work(0, sessions[0][1])
    else:
        threads = [threading.Thread(target=work, args=(i, s), daemon=True)
                   for i, (_, s) in enumerate(sessions)]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.1)
    control.remove([s for _, s in sessions])
    out: list[tuple[ProbeSpec, SessionOutcome]] = []
    for (probe, _), oc in zip(sessions, outcomes, strict=True):
        if isinstance(oc, BaseException):
            raise oc
        assert oc is not None
        out.append((probe, oc))
    return out


def _probe_parts(probe: ProbeSpec, partition: object, scenario: Scenario, raw: Path
                 ) -> list[tuple[tuple[int, ...] | None, str | None, Path]]:
    """(CPUs or None: as the scenario says, cgroup to join, raw file) of each engine process
    a probe needs: one, or under a cgroup v2 partition one per side when its CPUs lie on
    both (a process is in one cgroup; a partition takes its CPUs from every other one)."""
    if not partition or scenario.shield is None:
        return [(None, None, raw)]
    shielded = set(scenario.shield.user)
    cpus = probe.options.get("cpus")
    if not isinstance(cpus, list | tuple):
        one = probe.options.get("cpu")
        inside = isinstance(one, int) and one in shielded
        return [(None, str(partition) if inside or one is None else None, raw)]
    ins = tuple(c for c in cpus if c in shielded)
    outs = tuple(c for c in cpus if c not in shielded)
    if not outs:
        return [(None, str(partition), raw)]
    if not ins:
        return [(None, None, raw)]
    return [(ins, str(partition), raw), (outs, None, split_raw(raw, scenario))]


def _progress_cb(opts: RunOptions, phase: Phase, index: int, phases: int
                 ) -> Callable[[dict[str, Any]], None] | None:
    if opts.on_progress is None:
        return None
    cb = opts.on_progress

    def on_record(rec: dict[str, Any], session: EngineSession | None = None) -> None:
        if session is not None and rec["type"] in ("snapshot", "result"):
            cb(Progress(int(rec.get("elapsed_ns") or 0), phase.duration_ns,
                        session.collector.channels(), phase.name, index, phases))
    return on_record  # type: ignore[return-value]


def _bind(cb: Any, session: EngineSession) -> Callable[[dict[str, Any]], None] | None:
    if cb is None:
        return None
    return lambda rec: cb(rec, session)


