# SPDX-License-Identifier: MIT
"""What `rtlab run` will run, decided before anything starts: the scenario (or the
one-phase scenario of `--probe`), its matrix variants chosen, durations scaled, the
measured probe's CPUs, interval, priority and policy overridden, tracing and sample
files set, and every probe's options validated. The CLI only turns its arguments into
a `RunRequest`; a bad value is a UsageError naming the flag (exit 2)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rtlab.errors import UsageError
from rtlab.runner.direct import DirectRequest, probe_scenario
from rtlab.runner.kernel_split import check_probes
from rtlab.scenario import (
    find,
    load_file,
    online_cpus,
    override_probes,
    parse_cpu_list,
    parse_duration,
    scale_durations,
)
from rtlab.scenario.model import Scenario, TraceSpec
from rtlab.scenario.overrides import validate_probes, with_options
from rtlab.scenario.sections import TRACE_MAX_BUFFER_KB, TRACE_MIN_BUFFER_KB


@dataclass(frozen=True)
class RunRequest:
    """`rtlab run`'s options as given (text where the user typed text)."""

    scenario: str | None = None
    probe: str | None = None
    probe_opts: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    duration: str | None = None
    interval: str | None = None
    threshold: str | None = None  # --stop-threshold
    cpus: str | None = None
    priority: int | None = None
    policy: str | None = None
    allow_non_rt: bool = False
    trace: bool = False
    trace_threshold: str | None = None
    trace_buffer_kb: int | None = None
    kernel_split: bool = False  # --kernel-split (implies --trace)
    samples: str | None = None
    peer: str | None = None  # a two-ended probe's other end the user started


def resolve_priority(priority: int | None, policy: str | None) -> int | None:
    """The measured probe's priority: as given (0-99 when no policy is given), else 99
    for fifo/rr and 0 for other when only a policy is given."""
    if priority is not None and policy is None and not 0 <= priority <= 99:
        raise UsageError(f"--priority {priority} out of range (1-99 for fifo/rr, 0 for "
                         "other)")
    if policy is not None and priority is None:
        return 99 if policy in ("fifo", "rr") else 0
    return priority


def prepare(args: RunRequest, online: list[int] | None = None
            ) -> tuple[Any, list[Scenario]]:
    """Everything validated and resolved before anything starts: (file, variants)."""
    # an empty value is a bad value, not a value left out
    duration = parse_duration(args.duration, "--duration") if args.duration is not None \
        else None
    interval = parse_duration(args.interval, "--interval") if args.interval is not None \
        else None
    threshold = (parse_duration(args.threshold, "--stop-threshold")
                 if args.threshold is not None else None)
    online = online if online is not None else online_cpus()
    cpus = parse_cpu_list(args.cpus, online) if args.cpus is not None else None
    priority = resolve_priority(args.priority, args.policy)
    trace = _trace_overrides(args)
    if args.probe is not None:
        return _prepare_probe(args, cpus, interval, duration, threshold, trace)
    if args.probe_opts:
        raise UsageError("--probe-opt needs --probe NAME (scenario files set probe options "
                         "in [[probe]] options)")
    sfile = load_file(find(args.scenario or "quick"), online=online)
    variants = list(sfile.variants)
    if args.variants:
        known = [v.variant for v in variants]
        for name in args.variants:
            if name not in known:
                allowed = ", ".join(str(k) for k in known if k) or "none (no [matrix])"
                raise UsageError(f"--variant {name}: no such variant in {sfile.source}; "
                                 f"allowed: {allowed}")
        variants = [v for v in variants if v.variant in args.variants]
    out = []
    for sc in variants:
        if duration is not None:
            sc = scale_durations(sc, duration)
        sc = override_probes(sc, cpus=cpus, interval_ns=interval, priority=priority,
                             policy=args.policy, threshold_ns=threshold,
                             allow_non_rt=True if args.allow_non_rt else None)
        if trace is not None:
            sc = _with_trace(sc, trace)
        if args.samples:
            base = str(Path(args.samples).resolve())
            sc = _samples(sc, base)
        validate_probes(sc)
        check_probes(sc)
        out.append(sc)
    return sfile, out


def _trace_overrides(args: RunRequest) -> dict[str, Any] | None:
    """--trace* flags -> TraceSpec fields to set (None: keep the scenario's)."""

    if not (args.trace or args.trace_threshold or args.trace_buffer_kb is not None
            or args.kernel_split):
        return None
    out: dict[str, Any] = {"enabled": True}
    if args.kernel_split:
        out["kernel_split"] = True
    if args.trace_threshold:
        ns = parse_duration(args.trace_threshold, "--trace-threshold")
        if not 1_000 <= ns <= 3_600_000_000_000:
            raise UsageError(f"--trace-threshold {args.trace_threshold} out of range (1us..1h)")
        out["threshold_ns"] = ns
    if args.trace_buffer_kb is not None:
        if not TRACE_MIN_BUFFER_KB <= args.trace_buffer_kb <= TRACE_MAX_BUFFER_KB:
            raise UsageError(f"--trace-buffer-kb {args.trace_buffer_kb} out of range "
                             f"({TRACE_MIN_BUFFER_KB}-{TRACE_MAX_BUFFER_KB})")
        out["buffer_kb"] = args.trace_buffer_kb
    return out


def _with_trace(sc: Scenario, fields: dict[str, Any]) -> Any:


    return replace(sc, trace=replace(sc.trace or TraceSpec(), **fields))


def _samples(sc: Scenario, base: str) -> Any:


    many = len(sc.phases) > 1
    phases = tuple(replace(p, probe=with_options(p.probe, samples_file=f"{base}.{p.name}" if many
                                          else base)) for p in sc.phases)
    return replace(sc, phases=phases)


def _prepare_probe(args: RunRequest, cpus: list[int] | None, interval: int | None,
                   duration: int | None, threshold: int | None,
                   trace: dict[str, Any] | None) -> tuple[Any, list[Any]]:
    """`--probe NAME`: a one-phase scenario of that probe (everything validated)."""


    if args.scenario is not None:
        raise UsageError(f"give either a SCENARIO ({args.scenario}) or --probe, not both")
    if args.variants:
        raise UsageError("--variant is for scenario files with a [matrix], not --probe")
    sc = probe_scenario(DirectRequest(
        probe=args.probe, probe_opts=tuple(args.probe_opts), cpus=cpus, interval_ns=interval,
        priority=args.priority, policy=args.policy, duration_ns=duration,
        threshold_ns=threshold,
        peer=args.peer))
    if trace is not None:
        sc = _with_trace(sc, trace)
    if args.samples:
        sc = _samples(sc, str(Path(args.samples).resolve()))
    check_probes(sc)
    return SimpleNamespace(has_matrix=False, source=f"--probe {args.probe}"), [sc]
