# SPDX-License-Identifier: MIT
"""The run lifecycle: pre-flight -> doctor -> shield -> per phase (loads -> probes ->
collect: rtlab.runner.phase) -> release -> classify (rtlab.runner.outcome) -> store.

One engine run per phase (and per probe of the phase): the engine's statistics are
cumulative per run, so separate runs give each phase its own exact histograms
without any reset protocol, a phase's partial result is the last snapshot of its
own run, and the loads are started and verified between phases, outside any
measurement. The phases' channels are stored as the result's `phases` list.
A matrix (several variants of one file) is one stored run per variant, all with
the same `comparison` id in `scenario` (run_variants). Where the raw files go:
rtlab.runner.raw_layout.

Every exit path stops the loads and releases the shield (normal end, errors,
SIGINT/SIGTERM: the engine is asked to stop, what was measured is kept).
"""

from __future__ import annotations

import re
import secrets
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rtlab import __version__
from rtlab.engine.transport import LocalTransport, Transport
from rtlab.errors import MissingToolError, RtlabError, SkippedError
from rtlab.exitcodes import ExitCode
from rtlab.loads import from_spec
from rtlab.loads.fallback import builtin_instead, fallback_note
from rtlab.loads.on_target import for_target
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import RunResult
from rtlab.runner.control import RunControl, handle_signals
from rtlab.runner.kernel_split import check_tracer
from rtlab.runner.outcome import STATUS_RANK, merge_phases, worst_exit
from rtlab.runner.phase import RunContext, now, run_phase
from rtlab.runner.raw_layout import discard_unmeasured, write_layout
from rtlab.runner.run_options import RunOptions, RunOutcome
from rtlab.runner.shield import check_stale
from rtlab.runner.tracing import check_available
from rtlab.scenario.model import LoadSpec, Scenario, ShieldSpec
from rtlab.system.applier import SystemSession
from rtlab.system.journal_files import journal_dir, run_session_name
from rtlab.system.target_lock import owner_label


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
    (rtlab.loads.board). A stress load with `fallback = "builtin"` whose stress-ng is
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
            from rtlab.system.target_snapshot import doctor_tree

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
    if scenario.trace is not None and scenario.trace.enabled and transport.is_local:
        check_available()  # a board's engine says itself what its tracefs lacks (exit 4)
        if scenario.trace.kernel_split:
            check_tracer()  # the same: a board's engine without timerlat
    # every run: changes a crashed run left behind would spoil any measurement
    notes += check_stale(opts.restore_first, opts.journal_dir, transport,
                         lenient=scenario.shield is None or opts.no_shield)
    if transport.is_local:  # a board's engine says itself when RT is refused (exit 4)
        _preflight(scenario, opts)
    loads, load_notes = _build_loads(scenario, opts)
    notes += load_notes
    backend = (_shield_backend(scenario, transport, opts)
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
        "start_wall": now(),
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
            if backend is None and not transport.is_local and not opts.owner_held:
                owner = _own_board(transport, opts)
            if backend is not None:
                opts.event("applying the shield")
                shield_info["in_effect"] = backend.apply()
                note = shield_note(shield_info["in_effect"], scenario.shield)
                if note is not None:
                    notes.append(note)
                if isinstance(shield_info["in_effect"], dict):  # e.g. runtime knobs skipped
                    notes += [str(n) for n in shield_info["in_effect"].get("notes") or []]
            ctx = RunContext(scenario, opts, control, transport, run_id, first_raw, host,
                             ref, backend, owner)
            for index, phase in enumerate(scenario.phases):
                if control.signal is not None:
                    break
                record = run_phase(ctx, index, phase, loads)
                host["phases"].append(record.info)
                host["engine_args"] = (host["engine_args"]
                                       or (record.info["engine_args"] or [None])[0])
                loads_died += record.loads_died
                if record.shield_check is not None:
                    shield_info.setdefault("phase_checks", []).append(record.shield_check)
                if record.error is not None:
                    raise record.error
                if record.outcome is None:
                    break
                done.append(record.outcome)
                if record.outcome[0].status != "completed" or control.signal is not None:
                    break
        except RtlabError as exc:
            error = exc
        finally:
            if owner is not None:
                owner.release()
            if backend is not None:
                try:
                    opts.event("releasing the shield")
                    shield_info["released"] = backend.release()
                except Exception as exc:  # report, never hide a failed restore
                    shield_info["release_error"] = str(exc)
                    notes.append(f"releasing the shield failed: {exc} (run `rtlab restore`)")
    host["end_wall"] = now()

    interrupted = control.signal is not None
    if not done:
        discard_unmeasured(first_raw, run_id, scenario)
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
    store.add(result, probe_shape)
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


def _shield_backend(scenario: Scenario, transport: Transport, opts: RunOptions) -> Any:
    """The scenario's shield; when the caller holds the owner lock, one without a lock."""
    assert scenario.shield is not None
    if opts.owner_held:
        return opts.shield_backend(scenario.shield, transport, take_owner=False)  # type: ignore[call-arg]
    return opts.shield_backend(scenario.shield, transport)


def _own_board(transport: Transport, opts: RunOptions) -> Any:
    """A board is measured by one run at a time: an applier that holds the board's owner
    lock (beside its journals) for the run, with nothing to undo (a shielded run's
    applier holds it instead)."""

    opts.event(f"taking {transport.target} for this run")
    session = SystemSession(transport, opts.journal_dir or journal_dir(transport),
                            name=run_session_name(transport), owner=owner_label())
    try:
        return session.__enter__()
    except SkippedError:
        if not opts.allow_non_rt:
            raise
        opts.event(f"not root on {transport.target}: measuring without its owner lock")
        return None


def _target_info(transport: Transport) -> dict[str, Any]:
    """Where the run measured: this machine, or the board and the engine on it."""
    board = getattr(transport, "board", None)
    if board is None:
        return {"kind": transport.name, "target": transport.target}
    return {"kind": transport.name, **board.describe()}


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
        opts.event(f"variant {sc.variant}" if sc.variant else f"scenario {sc.name}")
        outcome = run_scenario(sc, opts)
        out.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
        if outcome.exit_code == ExitCode.INTERRUPTED:
            break
    return out


