# SPDX-License-Identifier: MIT
"""The probes the host knows, by name: each probe module's `INFO` (rtlab.probes.description).
Adding a probe on the host is one module with its INFO and one entry here."""

from __future__ import annotations

from rtlab.probes import event, hwnoise, interfere, noise, overhead, switch, timer, udp
from rtlab.probes.description import Monitored, ProbeInfo, TwoEnded
from rtlab.results.shape import ResultShape

PROBES: dict[str, ProbeInfo] = {m.INFO.name: m.INFO for m in (
    timer, noise, switch, overhead, interfere, udp, event, hwnoise)}


# the probe a run, a scenario's [[probe]], `rtlab monitor` and `rtlab history` use when
# none is named, and that the competing real-time thread load (rt-competitor) runs
DEFAULT_PROBE = "timer"


def info(name: str) -> ProbeInfo:
    """What the host knows of probe `name`; a probe it does not know (a newer engine's)
    gets the defaults: every channel is a headline, "latency"."""
    return PROBES.get(name) or ProbeInfo(name)


def shape(name: str) -> ResultShape:
    """What probe `name`'s results look like (rtlab.results.shape): what the result model
    and the analysis are handed by the layers that know the probes
    (`rtlab.results.shape.ShapeOf`)."""
    return info(name).shape


def names(*, single_cpu: bool | None = None) -> list[str]:
    """The probes' names in the registry's order, optionally only the (non-)single-CPU."""
    return [n for n, p in PROBES.items() if single_cpu is None or p.single_cpu == single_cpu]


def two_ended(name: str) -> TwoEnded | None:
    """How probe `name`'s other end is set up; None for a probe with one end."""
    return info(name).two_ended


def two_ended_names() -> list[str]:
    """The two-ended probes' names, in the registry's order."""
    return [n for n, p in PROBES.items() if p.two_ended is not None]


def monitored() -> dict[str, Monitored]:
    """The probes `rtlab monitor` can run, the default (DEFAULT_PROBE) first."""
    found = {n: p.monitor for n, p in PROBES.items() if p.monitor is not None}
    return dict(sorted(found.items(), key=lambda kv: kv[0] != DEFAULT_PROBE))
