# SPDX-License-Identifier: MIT
"""Configurations to compare: one run, or several runs grouped by kernel, scenario,
variant or host, their headline channels merged exactly (rtlab.analysis.compare tests
them against each other).

**One quantity**: runs are compared only when their probes measure the same quantity
(`ResultShape.measures`, from the probe registry through the caller's `shape_of`: a
timer's wake-up latency, a udp round trip, a noise gap...). `mixed_quantities` says
why runs cannot be compared; `build_configs` refuses them (UsageError, exit 2) rather
than print a ratio of a round trip to a wake-up latency.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from rtlab.analysis.compare_stats import Units, config_units
from rtlab.analysis.window_maxima import run_window_maxima
from rtlab.errors import RtlabError, UsageError
from rtlab.results.model import Channel, RunResult
from rtlab.results.shape import ResultShape, ShapeOf
from rtlab.results.summary import mean, mode, percentile, percentile_label
from rtlab.results.validate import failed_validation

TABLE_LEVELS: tuple[float, ...] = (99.0, 99.9, 99.99)
GROUP_KEYS = ("run", "kernel", "scenario", "variant", "host")


def host_of(result: RunResult) -> str:
    """The measured machine: the board's own hostname (from its engine), else the target
    it was reached as, else the controlling host."""
    host = result.provenance.get("host") or {}
    target = host.get("target") or {}
    return str(result.system.get("hostname") or target.get("target") or host.get("hostname")
               or "unknown host")


def host_cpu_model(runs: Iterable[RunResult]) -> str | None:
    """The processor of a host's runs, as their engines named it (`system.cpu_model`):
    the one name, or the different ones joined with " / " (e.g. a run of an older engine
    that could not name an ARM core, or boards that share a host name); None when no
    run recorded one."""
    names = list(dict.fromkeys(str(m) for r in runs if (m := r.system.get("cpu_model"))))
    return " / ".join(names) if names else None


def group_key(result: RunResult, by: str) -> str:
    if by == "host":
        return host_of(result)
    if by == "kernel":
        return str(result.system.get("release") or "unknown kernel")
    if by == "scenario":
        return str(result.scenario.get("name") or "no scenario")
    if by == "variant":
        variant = result.scenario.get("variant") or result.provenance.get("variant")
        return str(variant or result.scenario.get("name") or result.run_id)
    return result.run_id


def beyond_range(result: RunResult, channels: Collection[str] | None = None
                 ) -> tuple[int, int | None]:
    """Samples an imported run's peer tool counted beyond its histogram range (placed at
    the max; docs/report.md#importers) and the smallest lower bound of their values, over
    all channels or the named ones."""
    beyond = (result.provenance.get("imported") or {}).get("beyond_range") or {}
    items = [v for k, v in beyond.items() if (channels is None or k in channels)
             and isinstance(v, dict) and v.get("count")]
    if not items:
        return 0, None
    return (sum(int(v["count"]) for v in items),
            min(int(v.get("above_ns") or 0) for v in items))


@dataclass
class Config:
    """One configuration: runs merged into one channel (exact histogram merge)."""

    label: str
    runs: list[RunResult]
    channel: Channel
    window_maxima: np.ndarray
    window_ns: int | None
    duration_ns: int | None
    censored: int = 0  # samples only known to be >= censored_above_ns (imported peers)
    censored_above_ns: int | None = None
    units: Units | None = None  # what the variance of its statistics is estimated from
    cpu_model: str | None = None  # by host: the board's processor ("Cortex-A53")
    shapes: list[ResultShape] = field(default_factory=list)  # of each run's probe

    def run_headlines(self) -> list[list[Channel]]:
        """Each run's headline channels, phase after phase."""
        return [[ch for _, ch in r.headline_channels(shape)]
                for r, shape in zip(self.runs, self.shapes, strict=True)]

    @property
    def display(self) -> str:
        """The label as shown: by host with the processor, "board7 (Cortex-A53)", so the
        boards side by side read as the cores they are."""
        return f"{self.label} ({self.cpu_model})" if self.cpu_model else self.label

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    def value(self, what: str | float) -> float | None:
        ch = self.channel
        if what == "min":
            return ch.min_ns
        if what == "max":
            return ch.max_ns
        if what == "avg":
            return mean(ch.sum_ns, ch.samples)
        if what == "mode":
            return mode(ch.hist)
        if what == "window":
            return float(np.median(self.window_maxima)) if len(self.window_maxima) else None
        assert isinstance(what, float)
        return percentile(ch.hist, what, ch.min_ns, ch.max_ns)

    def lower_bound(self, q: float) -> float | None:
        """The percentile q as far as it is known: None when exact, else the lower bound of
        an interval [bound, value] (q falls among samples a peer tool counted beyond its
        histogram, which were placed at the max)."""
        n = self.channel.samples
        if not self.censored or not n or self.censored_above_ns is None:
            return None
        rank = math.ceil(Fraction(str(q)) / 100 * n)
        return float(self.censored_above_ns) if rank > n - self.censored else None

    def to_dict(self) -> dict[str, Any]:
        """The configuration's row of `rtlab compare` as data (ns; null: too few samples
        support it). `lower_bounds_ns`: a percentile only known to lie in [bound, value]."""
        levels = [(percentile_label(q), q) for q in TABLE_LEVELS]
        return {
            "label": self.label,
            "cpu_model": self.cpu_model,
            "runs": [{"id": r.run_id, "status": r.status, "notes": list(r.notes)}
                     for r in self.runs],
            "samples": self.channel.samples,
            "duration_ns": self.duration_ns,
            "min_ns": self.value("min"), "avg_ns": self.value("avg"),
            "mode_ns": self.value("mode"),
            "percentiles_ns": {name: self.value(q) for name, q in levels},
            "lower_bounds_ns": {name: self.lower_bound(q) for name, q in levels},
            "max_ns": self.value("max"),
            "median_window_max_ns": self.value("window"),
            "window_ns": self.window_ns, "windows": len(self.window_maxima),
            "beyond_range": ({"count": self.censored, "above_ns": self.censored_above_ns}
                             if self.censored else None),
        }


def _refuse_unbelievable(result: RunResult) -> None:
    """No comparison (a verdict) from a run whose numbers failed validation."""
    why = failed_validation(result, f"run {result.run_id}",
                            "(when it was stored (see its notes))")
    if why is not None:
        raise RtlabError(f"{why}: it is not compared",
                         hint="its numbers contradict each other; measure again")


def quantity(result: RunResult, shape_of: ShapeOf) -> str:
    """What a run's headline values are ("wake-up latency", "round trip", "noise gap"...):
    its probe's `ResultShape.measures` (an imported run has the probe whose quantity the
    peer tool measured: cyclictest timer, sockperf udp, oslat noise)."""
    return shape_of(result.probe).measures


def mixed_quantities(results: Sequence[RunResult], shape_of: ShapeOf) -> str | None:
    """Why `results` cannot be compared with each other (their probes measure different
    quantities, naming the first run of two of them), or None when they measure one."""
    first: dict[str, RunResult] = {}
    for r in results:
        first.setdefault(quantity(r, shape_of), r)
    if len(first) < 2:
        return None
    (qa, a), (qb, b) = list(first.items())[:2]
    more = f" (and {len(first) - 2} more quantities)" if len(first) > 2 else ""
    return (f"run {a.run_id} measures {qa} (probe {a.probe}) and run {b.run_id} {qb} "
            f"(probe {b.probe}){more}: a ratio of different quantities means nothing")


def build_configs(results: Sequence[RunResult], by: str = "run", *, shape_of: ShapeOf
                  ) -> list[Config]:
    """Group results (in the given order of first appearance) into configurations;
    `shape_of`: each run's probe's result shape (rtlab.probes.registry.shape). Runs of
    different quantities (`mixed_quantities`) are refused: UsageError."""
    if by not in GROUP_KEYS:
        raise ValueError(f"unknown grouping {by!r}")
    why = mixed_quantities(results, shape_of)
    if why is not None:
        raise UsageError(f"not compared: {why}",
                         hint="compare runs of one quantity; `rtlab results list` shows "
                         "each run's probe")
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        _refuse_unbelievable(r)
        groups.setdefault(group_key(r, by), []).append(r)
    configs = []
    for label, runs in groups.items():
        shapes = [shape_of(r.probe) for r in runs]
        chans = [ch for r, sh in zip(runs, shapes, strict=True)
                 for _, ch in r.headline_channels(sh)]
        merged = Channel.merged("all", chans)
        maxima, window_ns = [], None
        for r, sh in zip(runs, shapes, strict=True):
            m, w = run_window_maxima(r, sh)
            if window_ns is None:
                window_ns = w
            if w == window_ns and len(m):
                maxima.append(m)
        arr = np.concatenate(maxima) if maxima else np.zeros(0, dtype=np.int64)
        durations = [r.elapsed_ns for r in runs]
        duration = sum(d for d in durations if d) if any(durations) else None
        cens = [beyond_range(r, {ch.name for _, ch in r.channels()}) for r in runs]
        bounds = [b for c, b in cens if c and b is not None]
        configs.append(Config(label, runs, merged, arr, window_ns, duration,
                              sum(c for c, _ in cens), min(bounds) if bounds else None,
                              config_units(runs, shapes, window_ns),
                              host_cpu_model(runs) if by == "host" else None, shapes))
    return configs


def side_by_side(configs: Sequence[Config]) -> list[tuple[str, list[Channel | None]]]:
    """The channels of every configuration side by side (the "Cortex-A53 vs Cortex-A9"
    table: one row per CPU, one column per board): each channel name in order of first
    appearance, with that configuration's runs' channels of that name merged (None where
    a configuration has no such channel)."""
    names: list[str] = []
    per: list[dict[str, list[Channel]]] = []
    for c in configs:
        found: dict[str, list[Channel]] = {}
        for heads in c.run_headlines():
            for ch in heads:
                found.setdefault(ch.name, []).append(ch)
                if ch.name not in names:
                    names.append(ch.name)
        per.append(found)
    return [(name, [Channel.merged(name, f[name]) if name in f else None for f in per])
            for name in names]
