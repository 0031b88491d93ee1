# SPDX-License-Identifier: MIT
"""The table of load kinds, each with its parameter table (declared once, see params.py),
and the building of a load from a scenario's load table.

stress       stress-ng stressors (CPU, memory, I/O, scheduler and timer heavy): stress.py
rt-competitor  extra rtlab-probe timer threads at a lower RT priority: engine_loads.py
net          UDP traffic at a bounded rate between two private network namespaces:
             sockperf.py
osadl-mid    the OSADL QA farm "mid load", approximated (stress + net; on a board the
             engine's own load, rtlab.loads.osadl_board): osadl_mid.py
builtin      the engine's own CPU + memory load (`rtlab-probe load`), for targets without
             stress-ng: labelled as such, never substituted for `stress` silently:
             engine_loads.py
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rtlab.errors import UsageError
from rtlab.loads.engine_loads import (
    BUILTIN_PARAMS,
    BUILTIN_POLICIES,
    COMPETITOR_PARAMS,
    BuiltinLoad,
    RtCompetitorLoad,
    builtin_values,
    check_builtin,
)
from rtlab.loads.lifecycle import Load, Placement, check_placement
from rtlab.loads.osadl_mid import OSADL_PARAMS, OsadlMidLoad, check_osadl
from rtlab.loads.params import Param, check_params
from rtlab.loads.proc import group_members
from rtlab.loads.sockperf import NET_PARAMS, NetLoad, check_net
from rtlab.loads.stress import STRESS_PARAMS, StressLoad, check_stress, stress_values


@dataclass(frozen=True)
class LoadKind:
    name: str
    help: str
    params: tuple[Param, ...]
    load_class: Callable[..., Load]
    default_placement: Placement
    cross_check: Callable[[Mapping[str, Any]], list[str]] | None = None
    values: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    policies: tuple[str, ...] | None = None  # the placement policies it can honour (None: all)

    def check_policy(self, placement: Placement) -> list[str]:
        if self.policies is None or placement.policy in self.policies:
            return []
        return [f"{self.name}.policy: {placement.policy!r} is not available for this kind; "
                "allowed: " + ", ".join(repr(p) for p in self.policies)]

    def resolve(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """All values (defaults filled in) and the errors, each naming its key."""
        given, errors = check_params(self.name, self.params, params)
        if self.values is not None:
            full = self.values(given)
        else:
            full = {p.name: p.default for p in self.params}
            full.update(given)
        if not errors and self.cross_check is not None:
            errors += self.cross_check(full)
        return full, errors

    def build(self, params: Mapping[str, Any] | None = None,
              placement: Placement | None = None) -> Load:
        full, errors = self.resolve(params or {})
        if placement is None:
            placement = self.default_placement
        else:
            given = {k: v for k, v in placement.to_dict().items() if v is not None}
            errors += check_placement(self.name, given, self.default_placement)[1]
            errors += self.check_policy(placement)
        if errors:
            raise UsageError("; ".join(errors))
        return self.load_class(full, placement)


LOAD_KINDS: dict[str, LoadKind] = {
    k.name: k for k in (
        LoadKind("stress", "stress-ng stressors: CPU, memory, I/O, scheduler and timer load",
                 STRESS_PARAMS, StressLoad, StressLoad.default_placement,
                 check_stress, stress_values),
        LoadKind("rt-competitor", "competing rtlab-probe timer threads at a lower RT "
                 "priority (default SCHED_FIFO 98)", COMPETITOR_PARAMS, RtCompetitorLoad,
                 RtCompetitorLoad.default_placement),
        LoadKind("net", "UDP traffic at a bounded rate between two private network "
                 "namespaces joined by a veth pair", NET_PARAMS, NetLoad,
                 NetLoad.default_placement, check_net),
        LoadKind("osadl-mid", "approximation of the OSADL QA farm mid load: ~1 Mbit/s "
                 "network, small synced file I/O, ~1 MB/s memory allocation", OSADL_PARAMS,
                 OsadlMidLoad, OsadlMidLoad.default_placement, check_osadl),
        LoadKind("builtin", "the engine's own CPU + memory load (rtlab-probe load), for "
                 "targets without stress-ng", BUILTIN_PARAMS, BuiltinLoad,
                 BuiltinLoad.default_placement, check_builtin, builtin_values,
                 policies=BUILTIN_POLICIES),
    )
}

PLACEMENT_KEYS = ("cpus", "policy", "priority")


def validate(kind: str, params: Mapping[str, Any]) -> list[str]:
    """Errors of one load's parameters (empty if valid); each names the key and what is allowed."""
    k = LOAD_KINDS.get(kind)
    if k is None:
        return [f"kind: unknown load kind {kind!r}; allowed: " + ", ".join(LOAD_KINDS)]
    return k.resolve(params)[1]


def validate_spec(spec: Mapping[str, Any], online: Sequence[int] | None = None) -> list[str]:
    """Errors of a scenario's load table: `kind`, the kind's keys and cpus/policy/priority."""
    return _from_spec(spec, online)[1]


def from_spec(spec: Mapping[str, Any], online: Sequence[int] | None = None) -> Load:
    """A Load from a scenario's load table, or UsageError with every problem."""
    load, errors = _from_spec(spec, online)
    if errors or load is None:
        raise UsageError("; ".join(errors))
    return load


def _from_spec(spec: Mapping[str, Any], online: Sequence[int] | None
               ) -> tuple[Load | None, list[str]]:
    kind_name = spec.get("kind")
    if not isinstance(kind_name, str):
        return None, ["kind: missing; allowed: " + ", ".join(LOAD_KINDS)]
    kind = LOAD_KINDS.get(kind_name)
    if kind is None:
        return None, validate(kind_name, {})
    params = {k: v for k, v in spec.items() if k != "kind" and k not in PLACEMENT_KEYS}
    placement_keys = {k: v for k, v in spec.items() if k in PLACEMENT_KEYS}
    full, errors = kind.resolve(params)
    placement, perr = check_placement(kind_name, placement_keys, kind.default_placement, online)
    errors += perr or kind.check_policy(placement)
    if errors:
        return None, errors
    return kind.load_class(full, placement), []


def running_workers(load: Load) -> list[int]:
    """PIDs of every live process of a load's groups (leaders and workers)."""
    return [m.pid for p in load.procs for m in group_members(p.pgid)]
