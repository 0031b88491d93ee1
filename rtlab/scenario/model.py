# SPDX-License-Identifier: MIT
"""The scenario model: what to measure, in which phases, under which load.

A scenario has phases; each phase runs probes (and, later, loads) for a
duration. Issue 3 reads these from TOML with a matrix of variants; for now the
built-in `quick` scenario is constructed here. Probe options are kept as a
plain mapping named like the engine's header `config` keys (`*_ns` durations),
so any probe (timer, noise, ...) fits without new model code.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from rtlab.errors import UsageError
from rtlab.scenario.units import format_duration, online_cpus

POLICIES = ("fifo", "rr", "other")
RT_POLICIES = ("fifo", "rr")
DEFAULT_SNAPSHOT_NS = 1_000_000_000


@dataclass(frozen=True)
class ProbeSpec:
    """One probe invocation: `rtlab-probe NAME --opt value ...`."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def needs_rt(self) -> bool:
        return self.options.get("policy", "fifo") in RT_POLICIES

    @property
    def snapshot_interval_ns(self) -> int:
        return int(self.options.get("snapshot_interval_ns") or DEFAULT_SNAPSHOT_NS)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "options": dict(sorted(self.options.items()))}


@dataclass(frozen=True)
class Phase:
    name: str
    probe: ProbeSpec
    duration_ns: int | None
    load: str = "idle"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "probe": self.probe.to_dict(),
                "duration_ns": self.duration_ns, "load": self.load}


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    phases: tuple[Phase, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "phases": [p.to_dict() for p in self.phases]}

    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON of the scenario (what was asked, not the file text)."""
        canon = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()

    def ref(self) -> dict[str, Any]:
        return {"name": self.name, "hash": self.hash}


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
        _check_range("--threshold", threshold_ns, 1, 3600 * _S)
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
    probe = ProbeSpec("timer", options)
    return Scenario(
        name="quick",
        description="timer wake-up latency on every online CPU, idle system",
        phases=(Phase("main", probe, duration_ns, "idle"),),
    )
