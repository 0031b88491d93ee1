# SPDX-License-Identifier: MIT
"""Command-line adjustments of a parsed scenario (`--duration`, `--cpus`, `--interval`,
...), validated like the file."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rtlab.errors import UsageError
from rtlab.scenario.model import ProbeSpec, Scenario, _check_range
from rtlab.scenario.sections import DEFAULT_PHASE_NS, MIN_PHASE_NS, RT_POLICIES


def scale_durations(sc: Scenario, total_ns: int) -> Scenario:
    """`--duration`: the phases keep their proportions and add up to `total_ns`."""
    durs = [p.duration_ns or DEFAULT_PHASE_NS for p in sc.phases]
    whole = sum(durs)
    new: list[int] = []
    for i, d in enumerate(durs):
        if i == len(durs) - 1:
            ns = total_ns - sum(new)
        else:
            ns = total_ns * d // whole
            ns -= ns % 1_000_000 if ns > 1_000_000_000 else 0
        new.append(ns)
    if min(new) < MIN_PHASE_NS:
        raise UsageError(f"--duration is too short for {len(durs)} phases: each phase needs "
                         "at least 1ms")
    phases = tuple(
        replace(p, duration_ns=ns,
                probe=with_options(p.probe, duration_ns=ns),
                more_probes=tuple(with_options(q, duration_ns=ns) for q in p.more_probes))
        for p, ns in zip(sc.phases, new, strict=True))
    return replace(sc, phases=phases)


def with_options(p: ProbeSpec, **opts: Any) -> ProbeSpec:
    options = dict(p.options)
    for k, v in opts.items():
        if v is None:
            options.pop(k, None)
        else:
            options[k] = v
    return ProbeSpec(p.name, options, p.label)


def override_probes(sc: Scenario, **opts: Any) -> Scenario:
    """Command-line probe options (cpus, interval_ns, ...) replace the file's, for the
    measured (first) probe of every phase. Keys whose value is None are left alone."""
    given = {k: v for k, v in opts.items() if v is not None}
    if not given:
        return sc
    phases = tuple(replace(p, probe=with_options(p.probe, **given)) for p in sc.phases)
    return replace(sc, phases=phases)


def validate_probes(sc: Scenario) -> None:
    """The measured probes after command-line overrides: policy/priority and ranges."""

    for phase in sc.phases:
        o = phase.probe.options
        policy, priority = o.get("policy", "fifo"), o.get("priority", 99)
        if policy in RT_POLICIES and not 1 <= int(priority) <= 99:
            raise UsageError(f"--priority {priority} out of range for {policy} (1-99)")
        if policy not in RT_POLICIES and int(priority) != 0:
            raise UsageError(f"--priority {priority} out of range for {policy} (0)")
        _check_range("--interval", int(o.get("interval_ns", 1_000_000)), 1_000,
                     10_000_000_000)
        if o.get("threshold_ns") is not None:
            _check_range("--stop-threshold", int(o["threshold_ns"]), 1, 3_600_000_000_000)
