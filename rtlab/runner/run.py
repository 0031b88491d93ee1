# SPDX-License-Identifier: MIT
"""The run lifecycle: pre-flight -> doctor -> shield -> per phase (loads -> probes ->
collect) -> release -> classify -> store.

One engine run per phase (and per probe of the phase): the engine's statistics are
cumulative per run, so separate runs give each phase its own exact histograms
without any reset protocol, a phase's partial result is the last snapshot of its
own run, and the loads are started and verified between phases, outside any
measurement. The phases' channels are stored as the result's `phases` list.
A matrix (several variants of one file) is one stored run per variant, all with
the same `comparison` id in `scenario` (run_file).

Every exit path stops the loads and releases the shield (normal end, errors,
SIGINT/SIGTERM: the engine is asked to stop, what was measured is kept).

Outcome -> status -> exit code:

| what happened                                  | status    | partial | exit |
|------------------------------------------------|-----------|---------|------|
| engine result `completed`, exit 0              | completed | no      | 0    |
| engine result `threshold`, exit 3              | threshold | no      | 3    |
| SIGINT/SIGTERM to rtlab (forwarded)            | partial   | yes     | 130  |
| engine crashed / killed / silent (watchdog)    | partial   | yes     | 1    |
| engine result `error`                          | failed    | -       | 1    |
| completed, but nothing measured (0 samples)    | failed    | no      | 1    |
| numbers contradict each other (results.validate) | invalid | yes     | 1 (130 if interrupted) |
| engine exit 4 (privilege/feature missing)      | not stored: SkippedError, exit 4 |
| engine exit 2 (usage), or nothing measured     | not stored: error                |

Over phases: the run's status is the worst phase status (invalid > failed > partial >
threshold > completed); a phase that does not complete ends the run (later
phases are not started, the result is partial). A load that died early is a
note in the result and makes the exit code 1 (the conditions asked for were
not met), unless a worse code applies.
"""

from __future__ import annotations

import re
import secrets
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rtlab import __version__
from rtlab.analysis.cpushare import shared_cpu_notes
from rtlab.cpulist import format_cpulist
from rtlab.engine.argv import probe_args
from rtlab.engine.jsonl import log_notes
from rtlab.engine.options import adapt_for
from rtlab.engine.session import EngineSession, SessionOutcome
from rtlab.engine.transport import LocalTransport, Transport
from rtlab.errors import MissingToolError, RtlabError, SkippedError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.loads import LoadSet, from_spec
from rtlab.loads.fallback import builtin_instead, fallback_note
from rtlab.loads.remote import for_target
from rtlab.probes.extras import probe_notes
from rtlab.probes.registry import info as probe_info
from rtlab.results.model import Channel, RunResult
from rtlab.results.model import Phase as ResultPhase
from rtlab.results.store import Store
from rtlab.results.validate import nothing_measured, problems
from rtlab.runner.preflight import Privileges, check_privileges
from rtlab.runner.shield import ShieldBackend, check_stale, default_backend
from rtlab.runner.tracing import check_available, phase_trace
from rtlab.scenario.loader import with_options
from rtlab.scenario.model import LoadSpec, Phase, ProbeSpec, Scenario, ShieldSpec
from rtlab.scenario.units import online_cpus
from rtlab.system.journal import SystemSession, journal_dir, owner_label, run_session_name


@dataclass(frozen=True)
class Progress:
    """One live update (from each engine snapshot)."""

    elapsed_ns: int
    duration_ns: int | None
    channels: list[Channel]
    phase: str = "main"
    phase_index: int = 0
    phases: int = 1


@dataclass
class RunOptions:
    store: Store
    transport: Transport | None = None
    allow_non_rt: bool = False
    on_progress: Callable[[Progress], None] | None = None
    on_start: Callable[[str, Path], None] | None = None  # (run id, raw file of phase 1)
    on_event: Callable[[str], None] | None = None  # one line of what the runner does
    watchdog_s: float | None = None  # default: 3 x snapshot interval + 5 s
    stop_grace_s: float = 5.0
    preflight: Callable[[str, int], Privileges] = check_privileges
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))
    handle_signals: bool = True
    comparison: str | None = None  # shared by the variants of a matrix
    restore_first: bool = False  # restore a stale journal instead of refusing
    no_shield: bool = False  # run without the scenario's shield (recorded)
    doctor: bool = True  # doctor findings into the provenance (local runs)
    shield_backend: Callable[[ShieldSpec, Transport], ShieldBackend] = default_backend
    load_factory: Callable[[LoadSpec], Any] | None = None  # default rtlab.loads.from_spec
    load_settle_s: float = 0.5
    journal_dir: Path | None = None
    control: RunControl | None = None  # shared by runs in parallel (several boards)
    peer_info: Callable[[], dict[str, Any]] | None = None  # where the udp reflector is


@dataclass
class RunOutcome:
    result: RunResult
    exit_code: ExitCode
    raw_path: Path
    loads_died: bool = False  # a load died early: the run lacked the load it asked for


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class RunControl:
    """Signals of the whole run: SIGINT/SIGTERM stop the running engines and the run."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.sessions: list[EngineSession] = []
        self._lock = threading.Lock()

    def request(self, signum: int) -> None:
        with self._lock:
            if self.signal is None:
                self.signal = signum
            sessions = list(self.sessions)
        for s in sessions:
            s.request_stop(signum)

    def add(self, session: EngineSession) -> None:
        with self._lock:
            self.sessions.append(session)
            sig = self.signal
        if sig is not None:
            session.request_stop(sig)

    def remove(self, sessions: list[EngineSession]) -> None:
        """Forget these sessions (ended); another run's sessions stay."""
        with self._lock:
            self.sessions = [s for s in self.sessions if s not in sessions]


@contextmanager
def handle_signals(control: RunControl, enabled: bool = True) -> Iterator[None]:
    """SIGINT/SIGTERM go to `control` (which stops its engines) while inside, in the
    main thread only (one run, or several boards' runs sharing one control)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        control.request(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


STATUS_RANK = {"completed": 0, "threshold": 1, "partial": 2, "failed": 3, "invalid": 4}
_EXIT_RANK = {ExitCode.OK: 0, ExitCode.THRESHOLD: 1, ExitCode.ERROR: 2}


def worst_exit(*codes: ExitCode) -> ExitCode:
    """The exit code that says the most: ok < threshold < error < anything else
    (interrupted, skipped, usage)."""
    return max(codes, key=lambda c: _EXIT_RANK.get(c, 3))


def _preflight(scenario: Scenario, opts: RunOptions) -> None:
    seen: set[tuple[str, int]] = set()
    for phase in scenario.phases:
        for probe in phase.probes:
            allow = opts.allow_non_rt or bool(probe.options.get("allow_non_rt"))
            if not probe.needs_rt or allow:
                continue
            key = (str(probe.options.get("policy", "fifo")),
                   int(probe.options.get("priority", 99)))
            if key in seen:
                continue
            seen.add(key)
            priv = opts.preflight(*key)
            if not priv.ok:
                raise SkippedError(f"not starting: {priv.reason()}", hint=priv.fix())


def _build_loads(scenario: Scenario, opts: RunOptions) -> tuple[dict[str, Any], list[str]]:
    """Load objects by name (tools checked on the target: SkippedError before anything
    starts) and the notes about them. On a board each load is started there by its engine
    (rtlab.loads.remote). A stress load with `fallback = "builtin"` whose stress-ng is
    missing runs as the engine's own load, with a note that says so (rtlab.loads.fallback)."""
    if not scenario.loads:
        return {}, []
    factory = opts.load_factory
    if factory is None:

        def factory(spec: LoadSpec) -> Any:
            return from_spec(spec.to_spec())
    remote = opts.transport is not None and not opts.transport.is_local
    out: dict[str, Any] = {}
    notes: list[str] = []
    for spec in scenario.loads:
        plain = factory(spec)
        plain.name = spec.name
        load = for_target(plain, opts.transport) if remote else plain
        try:
            load.check_tools()
        except MissingToolError as exc:
            sub = (builtin_instead(plain, exc)
                   if spec.fallback == "builtin" and "stress-ng" in exc.tools else None)
            if sub is None:
                raise
            load = for_target(sub, opts.transport) if remote else sub
            load.check_tools()
            notes += [n for n in (fallback_note(load),) if n]
        out[spec.name] = load
    return out, notes


def _doctor(scenario: Scenario, transport: Transport) -> dict[str, Any] | None:
    if transport.name not in ("local", "ssh"):
        return None
    try:
        from rtlab.system.doctor import run_checks, summarize, top_findings

        cpus = scenario.measured_cpus or None
        if transport.is_local:
            findings = run_checks("/", cpus=cpus)
        else:
            from rtlab.system.remote import doctor_tree

            with tempfile.TemporaryDirectory(prefix="rtlab-board-") as tree:
                findings = run_checks(str(doctor_tree(transport, Path(tree))), cpus=cpus,
                                      engine=transport)
    except Exception as exc:  # the doctor informs; it never stops a measurement
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"cpus": cpus, "summary": summarize(findings),
            "top": [f.to_dict() for f in top_findings(findings, 3)],
            "findings": [f.to_dict() for f in findings]}


def run_scenario(scenario: Scenario, opts: RunOptions) -> RunOutcome:
    """Run every phase of one scenario (one variant) and store one result."""
    transport = opts.transport or LocalTransport()
    notes: list[str] = []
    if isinstance(transport, LocalTransport):
        transport.describe()  # the engine must exist before anything starts

    # 1. before anything changes: tracing support, stale journal, privileges, load tools
    if scenario.trace is not None and scenario.trace.enabled:
        if transport.name != "local":
            raise UsageError("--trace needs a local run (tracefs of this machine)")

        check_available()
    # every run: changes a crashed run left behind would spoil any measurement
    notes += check_stale(opts.restore_first, opts.journal_dir, transport,
                         lenient=scenario.shield is None or opts.no_shield)
    if transport.is_local:  # a board's engine says itself when RT is refused (exit 4)
        _preflight(scenario, opts)
    loads, load_notes = _build_loads(scenario, opts)
    notes += load_notes
    backend = (opts.shield_backend(scenario.shield, transport)
               if scenario.shield is not None and not opts.no_shield else None)

    peer = opts.peer_info() if opts.peer_info is not None else None
    if peer is not None and peer.get("note"):
        notes.append(str(peer["note"]))
    store = opts.store
    run_id = store.new_id()
    first_raw = store.raw_path(run_id)
    write_layout(first_raw, run_id, scenario)
    host: dict[str, Any] = {
        "rtlab_version": __version__,
        "hostname": socket.gethostname(),
        "start_wall": _now(),
        "end_wall": None,
        "command_line": opts.command_line,
        "transport": transport.name,
        "target": _target_info(transport),
        **({"udp_peer": peer} if peer is not None else {}),
        "engine_args": None,
        "phases": [],
    }
    if opts.doctor:
        doctor = _doctor(scenario, transport)
        if doctor is not None:
            host["doctor"] = doctor
    shield_info: dict[str, Any] = {
        "requested": scenario.shield.to_dict() if scenario.shield is not None else None,
        "in_effect": None}
    if scenario.shield is not None and opts.no_shield:
        shield_info["skipped"] = "--no-shield"
        notes.append("measured WITHOUT the scenario's shield (--no-shield)")
    host["shield"] = shield_info
    ref = scenario.ref()
    if opts.comparison is not None:
        ref["comparison"] = opts.comparison

    control = opts.control or RunControl()
    done: list[tuple[RunResult, ExitCode]] = []
    loads_died: list[str] = []
    error: RtlabError | None = None
    if opts.on_start is not None:
        opts.on_start(run_id, first_raw)
    owner: Any = None
    with handle_signals(control, opts.handle_signals):
        try:
            if backend is None and not transport.is_local:
                owner = _own_board(transport, opts)
            if backend is not None:
                _event(opts, "applying the shield")
                shield_info["in_effect"] = backend.apply()
                note = shield_note(shield_info["in_effect"], scenario.shield)
                if note is not None:
                    notes.append(note)
            for index, phase in enumerate(scenario.phases):
                if control.signal is not None:
                    break
                outcome = _run_phase(scenario, index, phase, loads, backend, control, opts,
                                     run_id, first_raw, transport, host, ref, loads_died,
                                     owner=owner)
                if outcome is None:
                    break
                done.append(outcome)
                if outcome[0].status != "completed" or control.signal is not None:
                    break
        except RtlabError as exc:
            error = exc
        finally:
            if owner is not None:
                owner.release()
            if backend is not None:
                try:
                    _event(opts, "releasing the shield")
                    shield_info["released"] = backend.release()
                except Exception as exc:  # report, never hide a failed restore
                    shield_info["release_error"] = str(exc)
                    notes.append(f"releasing the shield failed: {exc} (run `rtlab restore`)")
    host["end_wall"] = _now()

    interrupted = control.signal is not None
    if not done:
        _discard_unmeasured(first_raw, run_id, scenario)
        if error is not None:
            raise error
        if interrupted:
            raise RtlabError("interrupted before anything was measured",
                             code=ExitCode.INTERRUPTED)
        raise RtlabError("nothing was measured")  # pragma: no cover
    result, code = merge_phases(done, len(scenario.phases), interrupted, control.signal)
    if error is not None:
        result.notes.append(f"stopped: {error.one_line()}")
        result.partial = True
        if STATUS_RANK[result.status] < STATUS_RANK["partial"]:
            result.status = "partial"
        code = worst_exit(code, ExitCode.ERROR)
    elif len(done) < len(scenario.phases) and result.status == "completed":
        result.status, result.partial = "partial", True
    if len(done) < len(scenario.phases):
        missing = [p.name for p in scenario.phases[len(done):]]
        result.notes.append("phases not run: " + ", ".join(missing))
    if loads_died:
        result.notes += loads_died
        code = worst_exit(code, ExitCode.ERROR)
    result.notes = notes + result.notes
    result.scenario = ref
    result.provenance["host"] = {**host, **result.provenance.get("host", {}),
                                 "phases": host["phases"]}
    result.provenance["host"]["shield"] = shield_info
    if "doctor" in host:
        result.provenance["doctor"] = host["doctor"]
        result.provenance["host"].pop("doctor", None)
    result.provenance["host"]["end_wall"] = host["end_wall"]
    store.add(result)
    return RunOutcome(result, code, first_raw, bool(loads_died))


def shield_note(effect: Any, spec: ShieldSpec | None = None) -> str | None:
    """One line for a shield that is not wholly in effect (what the check found), so
    the terminal and the report say it, not only the stored provenance. Only what the
    shield asked for counts: tasks and kthreads left on its CPUs are no problem of a
    shield that moves no task (thread priorities only), nor IRQs of one that moves none
    (the stored check keeps every fact)."""
    if not isinstance(effect, dict):
        return None
    found = [str(p) for p in effect.get("problems") or []
             if spec is None or _asked_for(str(p), spec)]
    if not found:
        return None
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return "shield not wholly in effect: " + "; ".join(found[:3]) + more


def _asked_for(problem: str, spec: ShieldSpec) -> bool:
    """Is this problem of the shield check about something `spec` moves?"""
    if "user task(s)" in problem or "unbound kthread(s)" in problem:
        return spec.cpuset or spec.tasks
    if re.match(r"CPU \d+: IRQ ", problem):
        return spec.irqs
    return True


def _own_board(transport: Transport, opts: RunOptions) -> Any:
    """A board is measured by one run at a time: an applier that holds the board's owner
    lock (beside its journals) for the run, with nothing to undo (a shielded run's
    applier holds it instead)."""

    _event(opts, f"taking {transport.target} for this run")
    session = SystemSession(transport, opts.journal_dir or journal_dir(transport),
                            name=run_session_name(transport), owner=owner_label())
    try:
        return session.__enter__()
    except SkippedError:
        if not opts.allow_non_rt:
            raise
        _event(opts, f"not root on {transport.target}: measuring without its owner lock")
        return None


def _target_info(transport: Transport) -> dict[str, Any]:
    """Where the run measured: this machine, or the board and the engine on it."""
    board = getattr(transport, "board", None)
    if board is None:
        return {"kind": transport.name, "target": transport.target}
    return {"kind": transport.name, **board.describe()}


def _event(opts: RunOptions, text: str) -> None:
    if opts.on_event is not None:
        opts.on_event(text)


LAYOUT_SUFFIX = ".layout.json"


def write_layout(first: Path, run_id: str, scenario: Scenario) -> None:
    """`runs/ID.layout.json` beside the raw files, before anything runs: every phase's
    name and its raw files with their probe labels, so that `rtlab results import` can
    rebuild a run whose host died without guessing from file names. Best effort."""
    import json

    phases = [{"name": ph.name,
               "files": [{"label": (p.label or p.name) if ph.more_probes else None,
                          "file": _raw_for(first, run_id, scenario, i, ph, p).name}
                         for p in ph.probes]}
              for i, ph in enumerate(scenario.phases)]
    doc = {"version": 1, "run_id": run_id, "phases": phases}
    with suppress(OSError):
        first.parent.mkdir(parents=True, exist_ok=True)
        first.with_name(run_id + LAYOUT_SUFFIX).write_text(json.dumps(doc, indent=1) + "\n")


def _discard_unmeasured(first: Path, run_id: str, scenario: Scenario) -> None:
    """Nothing was stored (the engine refused its options, a privilege was missing, the
    run was stopped at once): leave no trace of it in the store, unless an engine wrote
    something (then its raw files and layout stay for `rtlab results import`)."""
    raws = [_raw_for(first, run_id, scenario, i, ph, p)
            for i, ph in enumerate(scenario.phases) for p in ph.probes]
    raws += sorted(first.parent.glob(f"{run_id}.*{SPLIT_SUFFIX}"))
    if any(r.exists() and r.stat().st_size > 0 for r in raws):
        return
    for path in [*raws, first.with_name(run_id + LAYOUT_SUFFIX)]:
        with suppress(OSError):
            path.unlink()


def _raw_for(first: Path, run_id: str, scenario: Scenario, index: int, phase: Phase,
             probe: ProbeSpec) -> Path:
    if index == 0 and probe is phase.probe:
        return first  # the run's raw file (store.raw_path) is its first phase's
    suffix = f"-{probe.label or probe.name}" if phase.more_probes else ""
    return first.with_name(f"{run_id}.{index + 1}-{phase.name}{suffix}.jsonl")


def _run_phase(scenario: Scenario, index: int, phase: Phase, loads: dict[str, Any],
               backend: ShieldBackend | None, control: RunControl, opts: RunOptions,
               run_id: str, first_raw: Path, transport: Transport, host: dict[str, Any],
               ref: dict[str, Any], loads_died: list[str], owner: Any = None
               ) -> tuple[RunResult, ExitCode] | None:
    """One phase: its loads, its probes in parallel, collected into one result phase."""
    from contextlib import ExitStack

    info: dict[str, Any] = {"name": phase.name, "duration_ns": phase.duration_ns,
                            "loads": [], "raw": [], "engine_args": [],
                            "start_wall": _now()}
    host["phases"].append(info)
    active = [loads[n] for n in phase.loads]
    tracer = None
    shield_notes: list[str] = []
    load_notes: list[str] = []  # what a load says about itself once it runs (`notes`)
    traced: tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], list[str]] | None = None
    if scenario.trace is not None and scenario.trace.enabled:
        phase, tracer = _traced_phase(scenario, index, phase, run_id, first_raw)
    with ExitStack() as stack:
        loadset = None
        if active:

            _event(opts, f"phase {phase.name}: starting loads " + ", ".join(phase.loads))
            # the journal of the target: the shield's, else a board's owner session
            recorder = backend.recorder if backend is not None else owner
            partition = getattr(backend, "probe_cgroup", None) if backend is not None else None
            if partition and scenario.shield is not None:
                # a cgroup v2 partition: what runs on its CPUs must be inside it
                for ld in active:
                    ld.join_partition(str(partition), frozenset(scenario.shield.user))
            loadset = LoadSet(active, recorder, settle_s=opts.load_settle_s,
                              on_death=lambda ld: _event(opts, f"load {ld.name} died early"))
            stack.callback(lambda: info.__setitem__("loads", loadset.describe()))
            stack.callback(loadset.stop)
            loadset.start()
            load_notes += [n for ld in active for n in getattr(ld, "notes", ())]
            for n in load_notes:
                _event(opts, n)
        if control.signal is not None:
            return None
        if backend is not None and scenario.shield is not None:
            # if this fails, the check at the end has no IRQ counts to compare with
            with suppress(RtlabError, OSError, ValueError):
                backend.phase_start()
            stack.callback(lambda: _recheck_shield(backend, scenario.shield, phase.name,
                                                   active, host, shield_notes))
        if tracer is not None:
            _event(opts, f"phase {phase.name}: tracing CPUs "
                   + ",".join(map(str, tracer.cpus)))
            stack.callback(tracer.close)
            tracer.start()
        _event(opts, f"phase {phase.name}: measuring")
        outcomes = _run_probes(scenario, index, phase, control, opts, run_id, first_raw,
                               transport, info, backend)
        if tracer is not None:
            _event(opts, f"phase {phase.name}: attributing spikes")
            traced = _finish_trace(tracer, outcomes, phase.name)
        if loadset is not None:
            for ld in loadset.died():
                why = next((p.describe()["stderr_tail"].splitlines()[-1:]
                            for p in ld.procs if p.died_early), [])
                loads_died.append(f"phase {phase.name}: load {ld.name} died early"
                                  + (f": {why[0]}" if why else ""))
    info["end_wall"] = _now()
    host["engine_args"] = host["engine_args"] or (info["engine_args"] or [None])[0]
    results: list[tuple[RunResult, ExitCode]] = []
    error: RtlabError | None = None
    for probe, outcome in outcomes:
        try:
            res, code = classify(outcome, run_id, host, ref, phase.name)
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
        base.probe, [ch for res, _ in results for ch in res.phases[0].channels],
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


def combine_probes(results: list[tuple[RunResult, ExitCode]]) -> tuple[RunResult, ExitCode]:
    """The results of one phase's probes as one: the first's, with the others' channels
    and notes added, the worst status and exit code."""
    base, code = results[0]
    for res, c in results[1:]:
        base.phases[0].channels += res.phases[0].channels
        base.notes += res.notes
        code = worst_exit(code, c)
        if STATUS_RANK[res.status] > STATUS_RANK[base.status]:
            base.status, base.partial = res.status, res.partial
    return base, code


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


def _recheck_shield(backend: ShieldBackend, spec: ShieldSpec, phase: str, loads: list[Any],
                    host: dict[str, Any], notes: list[str]) -> None:
    """The shield checked again after the phase measured, its loads still running: into
    provenance.host.shield.phase_checks, and a note for tasks that appeared on the
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
    host["shield"].setdefault("phase_checks", []).append(check)
    new = check.get("new_tasks") or []
    if new:
        named = ", ".join(f"{t['comm']}[{t['tid']}] (CPU {t['cpu']})" for t in new[:3])
        more = check.get("new_tasks_total", len(new)) - 3
        notes.append("task(s) that may run on a shielded CPU appeared during "
                     f"the phase: {named}" + (f" and {more} more" if more > 0 else ""))


def _traced_phase(scenario: Scenario, index: int, phase: Phase, run_id: str,
                  first_raw: Path) -> tuple[Phase, Any]:
    """The phase with its measured probe writing samples, and its PhaseTrace."""
    from dataclasses import replace


    assert scenario.trace is not None
    online = online_cpus()
    tracer = phase_trace(scenario.trace, phase.probe.cpus or online, online, first_raw.parent,
                         run_id, index, phase.name)
    if probe_info(phase.probe.name).lists_gaps:
        # a polling probe has no samples: it lists its gaps; list every gap that can spike
        if "record_gaps_above_ns" not in phase.probe.options:
            phase = replace(phase, probe=with_options(
                phase.probe, record_gaps_above_ns=scenario.trace.threshold_ns))
        return phase, tracer
    given = phase.probe.options.get("samples_file")
    if given:
        tracer.samples_path = Path(str(given))
    else:
        phase = replace(phase, probe=with_options(phase.probe,
                                                  samples_file=str(tracer.samples_path)))
    return phase, tracer


def _finish_trace(tracer: Any, outcomes: list[tuple[ProbeSpec, SessionOutcome]], phase: str
                  ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], list[str]]:
    """Attribution never loses the measurement: a failure becomes a note."""
    collector = outcomes[0][1].collector if outcomes else None
    header = collector.header if collector else None
    try:
        result: tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], list[str]] = (
            tracer.finish(header, phase, gaps=collector.gaps if collector else None))
        return result
    except Exception as exc:
        tracer.close()
        return [], {"threshold_ns": tracer.threshold_ns, "spikes": 0, "attributed": 0,
                    "stored": 0, "by_class": {}, "top_causes": {},
                    "error": f"{type(exc).__name__}: {exc}"}, {
            "threshold_ns": tracer.threshold_ns}, [
            f"tracing failed: {type(exc).__name__}: {exc}"]


def _run_probes(scenario: Scenario, index: int, phase: Phase, control: RunControl,
                opts: RunOptions, run_id: str, first_raw: Path, transport: Transport,
                info: dict[str, Any], backend: ShieldBackend | None = None
                ) -> list[tuple[ProbeSpec, SessionOutcome]]:
    sessions: list[tuple[ProbeSpec, EngineSession]] = []
    partition = getattr(backend, "probe_cgroup", None) if backend is not None else None
    for probe in phase.probes:
        raw = _raw_for(first_raw, run_id, scenario, index, phase, probe)
        for cpus, cgroup, part_raw in _probe_parts(probe, partition, scenario, raw):
            options = dict(probe.options)
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
                _layout_add(first_raw, run_id, index, part_raw)
            watchdog = opts.watchdog_s or 3 * probe.snapshot_interval_ns / 1e9 + 5.0
            session = EngineSession(transport, args, part_raw, watchdog_s=watchdog,
                                    stop_grace_s=opts.stop_grace_s, keep_as=part_raw.name,
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
    split = raw.with_name(raw.name.removesuffix(".jsonl") + SPLIT_SUFFIX)
    if _PHASE_RAW.fullmatch(raw.name) is None:  # the run's first file ID.jsonl
        split = raw.with_name(f"{raw.stem}.1-{scenario.phases[0].name}{SPLIT_SUFFIX}")
    return [(ins, str(partition), raw), (outs, None, split)]


SPLIT_SUFFIX = "-outside.jsonl"  # the part of a split probe outside the partition
_PHASE_RAW = re.compile(r"[^.]+\.\d+-.+\.jsonl")


def _layout_add(first: Path, run_id: str, index: int, raw: Path) -> None:
    """One more raw file of phase `index` in the run's layout (a probe split in two by
    a cgroup v2 partition), so that `rtlab results import` merges it too. Best effort."""
    import json

    path = first.with_name(run_id + LAYOUT_SUFFIX)
    with suppress(OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        doc = json.loads(path.read_text())
        files = doc["phases"][index]["files"]
        if all(f.get("file") != raw.name for f in files):
            files.append({"label": None, "file": raw.name})
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(doc, indent=1) + "\n")
            tmp.replace(path)


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


def merge_phases(done: list[tuple[RunResult, ExitCode]], n_phases: int, interrupted: bool,
                 sig: int | None) -> tuple[RunResult, ExitCode]:
    """The phases' results as one run: phases in order, worst status, notes per phase
    (prefixed with the phase's name when the scenario has `n_phases` > 1)."""
    first = done[0][0]
    phases: list[ResultPhase] = []
    notes: list[str] = []
    status, code = "completed", ExitCode.OK
    rt_valid: bool | None = True
    for res, c in done:
        phases += res.phases
        prefix = f"phase {res.phases[0].name}: " if n_phases > 1 else ""
        notes += [prefix + n for n in res.notes]
        if STATUS_RANK[res.status] > STATUS_RANK[status]:
            status = res.status
        code = worst_exit(code, c)
        if res.rt_valid is False:
            rt_valid = False
        elif res.rt_valid is None and rt_valid is True:
            rt_valid = None
    stream = first.stream
    for res, _ in done[1:]:
        stream.records += res.stream.records
        stream.snapshots += res.stream.snapshots
        stream.corrupt_lines += res.stream.corrupt_lines
        stream.ignored_records += res.stream.ignored_records
        stream.truncated_tail = stream.truncated_tail or res.stream.truncated_tail
        stream.logs += res.stream.logs
        if res.stream.threshold_hit:
            stream.threshold_hit = res.stream.threshold_hit
        stream.engine_status = res.stream.engine_status
        stream.engine_exit_code = res.stream.engine_exit_code
    if interrupted:
        code = ExitCode.INTERRUPTED
        if status == "completed":
            status = "partial"
        name = signal.Signals(sig or signal.SIGINT).name
        if not any(name in n for n in notes):
            notes.append(f"interrupted by {name}")
    partial = status in ("partial", "failed", "invalid") or any(r.partial for r, _ in done)
    result = RunResult(run_id=first.run_id, status=status, probe=first.probe, phases=phases,
                       partial=partial, notes=notes, rt_valid=rt_valid,
                       scenario=first.scenario, stream=stream, provenance=first.provenance)
    return result, code


def new_comparison_id() -> str:
    return "cmp-" + secrets.token_hex(4)


def run_variants(variants: list[Scenario], opts: RunOptions,
                 on_outcome: Callable[[RunOutcome], None] | None = None) -> list[RunOutcome]:
    """Each variant a separate stored run, all with one comparison id (a matrix).
    Stops after an interrupted variant."""
    if len(variants) > 1 and opts.comparison is None:
        opts.comparison = new_comparison_id()
    out: list[RunOutcome] = []
    for sc in variants:
        _event(opts, f"variant {sc.variant}" if sc.variant else f"scenario {sc.name}")
        outcome = run_scenario(sc, opts)
        out.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
        if outcome.exit_code == ExitCode.INTERRUPTED:
            break
    return out


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def classify(
    outcome: SessionOutcome, run_id: str, host: dict[str, Any], scenario: dict[str, Any],
    phase: str = "main",
) -> tuple[RunResult, ExitCode]:
    """Turn what happened into a status and an exit code (table in the module doc)."""
    col = outcome.collector
    code = outcome.exit_code
    engine_status = col.result.get("status") if col.result else None
    notes = list(outcome.notes)
    interrupted = outcome.stop_signal is not None

    if code == ExitCode.SKIPPED and col.state is None:
        raise SkippedError(outcome.stderr_line() or "the engine skipped the run (exit 4)")
    if code == ExitCode.USAGE and col.state is None:
        raise UsageError(f"the engine refused its arguments: {outcome.stderr_line() or 'exit 2'}")
    if col.state is None:
        if interrupted:
            raise RtlabError("interrupted before anything was measured",
                             code=ExitCode.INTERRUPTED)
        why = outcome.stderr_line() or (
            f"killed by {_signal_name(code)}" if code is not None and code < 0 else f"exit {code}")
        raise RtlabError(f"the engine failed before measuring anything: {why}",
                         hint=notes[0] if notes else None)

    if code is not None and code < 0 and not outcome.killed:
        notes.append(f"engine killed by {_signal_name(code)}")
    elif code == 255 and host.get("transport") == "ssh":  # ssh's own failure
        target = (host.get("target") or {}).get("target", "the board")
        notes.append(f"the SSH connection to {target} was lost"
                     + (f" ({outcome.stderr_line()})" if outcome.stderr_line() else "")
                     + f"; the board kept the whole run: `rtlab results fetch --target "
                     f"{target}`")
    elif code not in (None, 0, 3, 130) and engine_status != "error":
        line = outcome.stderr_line()
        notes.append(f"engine exited with code {code}" + (f": {line}" if line else ""))
    notes += log_notes(col.stream.logs)

    if engine_status == "completed" and not interrupted:
        status, partial, exit_code = "completed", False, ExitCode.OK
    elif engine_status == "threshold":
        status, partial, exit_code = "threshold", False, ExitCode.THRESHOLD
    elif engine_status == "error":
        err = col.result.get("error") if col.result else None
        notes.append(f"engine error: {err or outcome.stderr_line() or 'unknown'}")
        status, partial, exit_code = "failed", True, ExitCode.ERROR
    else:
        status, partial = "partial", True
        if interrupted or engine_status == "interrupted":
            exit_code = ExitCode.INTERRUPTED
            sig = outcome.stop_signal or signal.SIGINT
            notes.append(f"interrupted by {signal.Signals(sig).name}")
        else:
            exit_code = ExitCode.ERROR
    result = col.to_result(run_id, status=status, partial=partial, host=host,
                           scenario=scenario, phase=phase, extra_notes=notes)
    result.stream.engine_exit_code = code
    return result, believable(result, exit_code)


def believable(result: RunResult, exit_code: ExitCode) -> ExitCode:
    """Mark a result whose numbers contradict each other `invalid`, and one that measured
    nothing `failed`: neither is ever `completed`, both make the exit code non-zero."""
    found = problems(result)
    if found:
        result.status, result.partial = "invalid", True
        result.notes += [f"the engine's numbers failed validation: {p}" for p in found[:5]]
        if len(found) > 5:
            result.notes.append(f"... and {len(found) - 5} more validation failures")
        return worst_exit(exit_code, ExitCode.ERROR)
    why = nothing_measured(result)
    if why is not None:
        result.notes.append(why)
        if result.status in ("completed", "threshold"):
            result.status = "failed"
        return worst_exit(exit_code, ExitCode.ERROR)
    result.notes += probe_notes(result)  # e.g. no Amdahl fit outside its physical bounds
    return exit_code
