# SPDX-License-Identifier: MIT
"""The scenario model: what to measure, in which phases, under which load.

A scenario has an optional shield, named loads, and phases; each phase runs
its probes for a duration with some of the loads active. Scenario files
(TOML, `rtlab.scenario.loader`) are resolved into these dataclasses, one
`Scenario` per matrix variant. Probe options are kept as a plain mapping
named like the engine's header `config` keys (`*_ns` durations), so any probe
(timer, noise, ...) fits without new model code. `quick()` builds the
single-phase timer scenario programmatically (tests, library users).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from rtlab.errors import UsageError
from rtlab.probes.registry import DEFAULT_PROBE
from rtlab.scenario.units import format_duration, online_cpus
from rtlab.system.shield_knobs import KNOB_NAMES as KNOB_FIELDS

POLICIES = ("fifo", "rr", "other")
RT_POLICIES = ("fifo", "rr")
DEFAULT_SNAPSHOT_NS = 1_000_000_000


@dataclass(frozen=True)
class ProbeSpec:
    """One probe invocation: `rtlab-probe NAME --opt value ...`.

    `label`: the scenario's name for it (channel prefix when a phase has several probes).
    """

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    label: str | None = None

    @property
    def needs_rt(self) -> bool:
        return self.options.get("policy", "fifo") in RT_POLICIES

    @property
    def snapshot_interval_ns(self) -> int:
        return int(self.options.get("snapshot_interval_ns") or DEFAULT_SNAPSHOT_NS)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "options": dict(sorted(self.options.items()))}
        if self.label is not None:
            d["label"] = self.label
        return d

    @property
    def cpus(self) -> list[int]:
        return [int(c) for c in self.options.get("cpus") or []]


@dataclass(frozen=True)
class LoadSpec:
    """A `[[load]]` of a scenario: kind, parameters and placement (CPUs resolved)."""

    name: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    cpus: tuple[int, ...] | None = None
    policy: str | None = None
    priority: int | None = None
    fallback: str | None = None  # "builtin": the engine's load where stress-ng is missing

    def to_spec(self) -> dict[str, Any]:
        """The table `rtlab.loads.from_spec` takes."""
        spec: dict[str, Any] = {"kind": self.kind, **self.params}
        if self.cpus is not None:
            spec["cpus"] = list(self.cpus)
        if self.policy is not None:
            spec["policy"] = self.policy
        if self.priority is not None:
            spec["priority"] = self.priority
        return spec

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "params": dict(sorted(self.params.items())),
                "cpus": list(self.cpus) if self.cpus is not None else None,
                "policy": self.policy, "priority": self.priority,
                **({"fallback": self.fallback} if self.fallback is not None else {})}


@dataclass(frozen=True)
class ReflectorSpec:
    """`[reflector]`: where a udp scenario's reflector runs (another board), bound to
    `address` (its ADDR:PORT on the link), pinned to `cpu`, with thread priorities (the
    seed's NIC IRQ thread at FIFO 99) and IRQ moves applied there for the run."""

    target: str
    address: str | None = None
    cpu: int | None = None
    thread_priorities: tuple[tuple[str, str, int], ...] = ()
    irqs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ShieldSpec:
    """What a scenario asks of the system: CPU sets and what to move off the user CPUs."""

    system: tuple[int, ...]
    user: tuple[int, ...]
    cpuset: bool = True  # exclusive cpuset for the user CPUs (the shield proper)
    tasks: bool = True  # move movable user tasks to the system CPUs
    kthreads: bool = False  # move unbound kernel threads too
    irqs: bool = False  # IRQ affinity to the system CPUs
    default_smp_affinity: bool = False  # /proc/irq/default_smp_affinity to the system CPUs
    sched_rt_runtime_us: int | None = None  # -1: no RT throttling
    dma_latency: int | None = None  # hold /dev/cpu_dma_latency at this many µs
    # threads to re-prioritise, e.g. the NIC's IRQ thread: (name pattern, policy, priority)
    thread_priorities: tuple[tuple[str, str, int], ...] = ()
    # runtime knobs (rtlab.system.shield_knobs, docs/system.md); None: left as it is
    timer_migration: bool | None = None
    watchdogs: bool | None = None
    vm_stat_interval: int | None = None  # s
    idle_max_latency_us: int | None = None
    governor: str | None = None
    min_freq: str | int | None = None  # "max" or kHz
    smt: bool | None = None
    thp: str | None = None  # never | madvise | always
    numa_balancing: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The shield as stored with a run; runtime knobs only when set (so a shield
        without them keeps the hash it always had)."""
        d = {k: v for k, v in self.__dict__.items()
             if k not in KNOB_FIELDS or v is not None}
        d["system"], d["user"] = list(self.system), list(self.user)
        d["thread_priorities"] = [{"match": m, "policy": pol, "priority": pr}
                                  for m, pol, pr in self.thread_priorities]
        return d

    def knobs(self) -> dict[str, Any]:
        """{name: value} of the runtime knobs set."""
        return {k: getattr(self, k) for k in KNOB_FIELDS if getattr(self, k) is not None}


@dataclass(frozen=True)
class TraceSpec:
    """`[trace]` / `rtlab run --trace`: record tracepoints of the measured CPUs during
    each phase and attribute every sample above `threshold_ns`; with `kernel_split` the
    kernel's timerlat tracer records its own split beside it (docs/tracing.md)."""

    enabled: bool = False
    threshold_ns: int = 100_000
    buffer_kb: int = 4096
    kernel_split: bool = False  # also the kernel's timerlat view (rtlab.runner.kernel_split)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Phase:
    """`probe` is the first (measured) probe; `more_probes` run beside it in the phase."""

    name: str
    probe: ProbeSpec
    duration_ns: int | None
    load: str = "idle"  # a word for people: the active loads, or "idle"
    loads: tuple[str, ...] = ()  # names of the scenario's loads active in this phase
    more_probes: tuple[ProbeSpec, ...] = ()

    @property
    def probes(self) -> tuple[ProbeSpec, ...]:
        return (self.probe, *self.more_probes)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "probe": self.probe.to_dict(),
                             "duration_ns": self.duration_ns, "load": self.load}
        if self.loads:
            d["loads"] = list(self.loads)
        if self.more_probes:
            d["more_probes"] = [p.to_dict() for p in self.more_probes]
        return d


@dataclass(frozen=True)
class Scenario:
    """One runnable scenario (a matrix variant of a file is one Scenario).

    `text`/`source`: the file it came from (recorded in the result); `variants`:
    the number of variants of its file (1 without a matrix).
    """

    name: str
    description: str
    phases: tuple[Phase, ...]
    loads: tuple[LoadSpec, ...] = ()
    shield: ShieldSpec | None = None
    variant: str | None = None
    source: str | None = None
    text: str | None = None
    trace: TraceSpec | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "description": self.description,
                             "phases": [p.to_dict() for p in self.phases]}
        if self.trace is not None and self.trace.enabled:
            d["trace"] = self.trace.to_dict()
        if self.loads:
            d["loads"] = [ld.to_dict() for ld in self.loads]
        if self.shield is not None:
            d["shield"] = self.shield.to_dict()
        if self.variant is not None:
            d["variant"] = self.variant
        return d

    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON of the resolved scenario (what was asked on this
        machine, variant included; not the file text, see `text_hash`)."""
        canon = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()

    @property
    def text_hash(self) -> str | None:
        return hashlib.sha256(self.text.encode()).hexdigest() if self.text is not None else None

    @property
    def duration_ns(self) -> int | None:
        values = [p.duration_ns for p in self.phases]
        return None if any(v is None for v in values) else sum(v or 0 for v in values)

    @property
    def measured_cpus(self) -> list[int]:
        return sorted({c for p in self.phases for c in p.probe.cpus})

    def load(self, name: str) -> LoadSpec:
        for ld in self.loads:
            if ld.name == name:
                return ld
        raise KeyError(name)

    def ref(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "hash": self.hash}
        if self.variant is not None:
            d["variant"] = self.variant
        if self.source is not None:
            d["source"] = self.source
        if self.text is not None:
            d["text"] = self.text
            d["text_hash"] = self.text_hash
        d["resolved"] = self.to_dict()
        return d


_S = 1_000_000_000


def _check_range(option: str, ns: int, lo: int, hi: int) -> None:
    """The engine's ranges, checked before anything starts."""
    if not lo <= ns <= hi:
        raise UsageError(f"{option} {format_duration(ns)} is out of range "
                         f"({format_duration(lo)}..{format_duration(hi)})")


def quick(
    *,
    duration_ns: int = 10_000_000_000,
    cpus: list[int] | None = None,
    interval_ns: int = 1_000_000,
    priority: int | None = None,
    policy: str = "fifo",
    threshold_ns: int | None = None,
    samples_file: str | None = None,
    allow_non_rt: bool = False,
    snapshot_interval_ns: int = DEFAULT_SNAPSHOT_NS,
) -> Scenario:
    """The built-in `quick` scenario: timer probe on all online CPUs, idle system."""
    if policy not in POLICIES:
        raise UsageError(f"invalid policy {policy!r}", hint=f"choose one of {', '.join(POLICIES)}")
    if priority is None:
        priority = 99 if policy in RT_POLICIES else 0
    if policy in RT_POLICIES and not 1 <= priority <= 99:
        raise UsageError(f"--priority {priority} out of range for {policy} (1-99)")
    if policy == "other" and priority != 0:
        raise UsageError(f"--priority {priority} out of range for other (0)")
    _check_range("--interval", interval_ns, 1_000, 10 * _S)
    _check_range("--duration", duration_ns, 1_000_000, 1000 * 3600 * _S)
    if threshold_ns is not None:
        _check_range("--stop-threshold", threshold_ns, 1, 3600 * _S)
    _check_range("--snapshot-interval", snapshot_interval_ns, 10_000_000, 3600 * _S)
    options: dict[str, Any] = {
        "cpus": sorted(cpus) if cpus is not None else online_cpus(),
        "interval_ns": interval_ns,
        "priority": priority,
        "policy": policy,
        "duration_ns": duration_ns,
        "snapshot_interval_ns": snapshot_interval_ns,
    }
    if threshold_ns is not None:
        options["threshold_ns"] = threshold_ns
    if samples_file is not None:
        options["samples_file"] = samples_file
    if allow_non_rt:
        options["allow_non_rt"] = True
    probe = ProbeSpec(DEFAULT_PROBE, options)
    return Scenario(
        name="quick",
        description="timer wake-up latency on every online CPU, idle system",
        phases=(Phase("main", probe, duration_ns, "idle"),),
    )
