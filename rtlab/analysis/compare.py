# SPDX-License-Identifier: MIT
"""Comparisons of configurations with statistical significance.

A *configuration* is one run, or several runs grouped by kernel, scenario or
variant (their histograms merge exactly). For each configuration we show the
Enea-style row (min, avg, mode, p99, p99.9, p99.99, max). For each pair
(every configuration against the first, the baseline) we test:

* **tail percentiles** (p99, p99.9, p99.99): at the pooled percentile t of
  both configurations, the fractions of samples above t are compared with a
  two-proportion z-test (exact counts from the histograms). The test treats
  samples as independent; latency spikes cluster, which makes it optimistic,
  so a change is called significant only when p < 0.01 *and* the percentile
  moved by at least 5 % *and*, when both configurations have several runs, the
  per-run percentiles of the two do not overlap (run-to-run variation, e.g. of
  a noisy host, is larger than the sampling noise within one run). With single
  runs a significant change says that the two runs differ, and the note says
  so.
* **maxima**: the maximum of a longer run is larger just because it saw more
  samples, so two maxima of different run lengths are not compared directly.
  We compare the *distributions of per-window maxima* (same window length) with
  a Mann-Whitney U test; the effect is P(a window of B has a higher maximum
  than a window of A). Without window maxima the change in max is reported
  but never called significant.

"not significant" is a first-class answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rtlab.analysis.stats import mean, mode, percentile, percentile_label

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from rtlab.results.histogram import LogLinHistogram
    from rtlab.results.model import Channel, RunResult

TAIL_LEVELS: tuple[float, ...] = (99.0, 99.9, 99.99)
TABLE_LEVELS: tuple[float, ...] = (99.0, 99.9, 99.99)
ALPHA = 0.01
MIN_REL_CHANGE = 0.05
GROUP_KEYS = ("run", "kernel", "scenario", "variant")


def group_key(result: RunResult, by: str) -> str:
    if by == "kernel":
        return str(result.system.get("release") or "unknown kernel")
    if by == "scenario":
        return str(result.scenario.get("name") or "no scenario")
    if by == "variant":
        variant = result.scenario.get("variant") or result.provenance.get("variant")
        return str(variant or result.scenario.get("name") or result.run_id)
    return result.run_id


@dataclass
class Config:
    """One configuration: runs merged into one channel (exact histogram merge)."""

    label: str
    runs: list[RunResult]
    channel: Channel
    window_maxima: np.ndarray
    window_ns: int | None
    duration_ns: int | None

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
        assert isinstance(what, float)
        return percentile(ch.hist, what, ch.min_ns, ch.max_ns)


def build_configs(results: Sequence[RunResult], by: str = "run") -> list[Config]:
    """Group results (in the given order of first appearance) into configurations."""
    import numpy as np

    from rtlab.analysis.evt import merged_window_maxima
    from rtlab.results.model import Channel

    if by not in GROUP_KEYS:
        raise ValueError(f"unknown grouping {by!r}")
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        groups.setdefault(group_key(r, by), []).append(r)
    configs = []
    for label, runs in groups.items():
        chans = [ch for r in runs for _, ch in r.channels()]
        merged = Channel.merged("all", chans)
        maxima, window_ns = [], None
        for r in runs:
            m, w = merged_window_maxima([ch for _, ch in r.channels()])
            if window_ns is None:
                window_ns = w
            if w == window_ns and len(m):
                maxima.append(m)
        arr = np.concatenate(maxima) if maxima else np.zeros(0, dtype=np.int64)
        durations = [r.elapsed_ns for r in runs]
        duration = sum(d for d in durations if d) if any(durations) else None
        configs.append(Config(label, runs, merged, arr, window_ns, duration))
    return configs


@dataclass(frozen=True)
class Change:
    """The change of one statistic from A (baseline) to B."""

    what: str  # "p99", "p99.9", "max", ...
    a_ns: float | None
    b_ns: float | None
    p_value: float | None
    significant: bool
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if not self.a_ns or self.b_ns is None:
            return None
        return self.b_ns / self.a_ns

    def describe(self) -> str:
        r = self.ratio
        if r is None:
            return f"{self.what}: n/a" + (f" ({self.note})" if self.note else "")
        pct = (r - 1) * 100
        text = f"{self.what}: {pct:+.1f} %"
        if self.significant:
            direction = "worse" if pct > 0 else "better"
            text += f" ({direction}, significant, p = {_pfmt(self.p_value)})"
        else:
            text += " (not significant" + (
                f", p = {_pfmt(self.p_value)}" if self.p_value is not None else "") + ")"
        if self.note:
            text += f"; {self.note}"
        return text

    @property
    def regression(self) -> bool:
        r = self.ratio
        return self.significant and r is not None and r > 1


def _pfmt(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.1e}" if p < 0.001 else f"{p:.3f}"


@dataclass
class PairComparison:
    a: Config
    b: Config
    changes: list[Change] = field(default_factory=list)

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.regression]


def _above(hist: LogLinHistogram, t: int) -> int:
    return sum(b.count for b in hist.buckets() if b.lo > t)


def two_proportion_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of the pooled two-proportion z-test."""
    if n1 == 0 or n2 == 0:
        return 1.0
    p = (k1 + k2) / (n1 + n2)
    if p in (0.0, 1.0):
        return 1.0
    se = math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))
    z = (k2 / n2 - k1 / n1) / se
    return math.erfc(abs(z) / math.sqrt(2))


def mann_whitney(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(two-sided p-value, P(B > A) + P(B = A)/2) of the Mann-Whitney U test (normal approx.)."""
    import numpy as np

    n1, n2 = len(a), len(b)
    x = np.concatenate([a, b])
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    cum = np.cumsum(counts)
    ranks = (cum - (counts - 1) / 2.0)[inv]
    r2 = float(ranks[n1:].sum())
    u2 = r2 - n2 * (n2 + 1) / 2
    n = n1 + n2
    ties = float(((counts.astype(np.float64) ** 3) - counts).sum())
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    effect = u2 / (n1 * n2)
    if var <= 0:
        return 1.0, effect
    z = (u2 - n1 * n2 / 2) / math.sqrt(var)
    return math.erfc(abs(z) / math.sqrt(2)), effect


def _per_run(c: Config, q: float) -> list[int]:
    """Percentile q of each run of a configuration (all channels merged), where supported."""
    out = []
    for r in c.runs:
        m = r.merged()
        v = percentile(m.hist, q, m.min_ns, m.max_ns)
        if v is not None:
            out.append(v)
    return out


def compare_pair(a: Config, b: Config) -> PairComparison:
    out = PairComparison(a, b)
    ha, hb = a.channel.hist, b.channel.hist
    na, nb = ha.total, hb.total
    pooled = ha.merge(hb)
    for q in TAIL_LEVELS:
        va, vb = a.value(q), b.value(q)
        label = percentile_label(q)
        t = percentile(pooled, q)
        if va is None or vb is None or t is None:
            out.changes.append(Change(label, va, vb, None, False, "too few samples"))
            continue
        ka, kb = _above(ha, t), _above(hb, t)
        p = two_proportion_p(ka, na, kb, nb)
        moved = abs(vb / va - 1) >= MIN_REL_CHANGE if va else vb != va
        sig = p < ALPHA and moved
        note = ""
        ra, rb = _per_run(a, q), _per_run(b, q)
        if len(ra) >= 2 and len(rb) >= 2:
            # run-to-run variation: also require that the runs do not overlap
            apart = max(ra) < min(rb) or max(rb) < min(ra)
            sig = sig and apart
            note = ("runs " + ("do not overlap" if apart else "overlap") + ": "
                    f"{min(ra) / 1000:.1f}-{max(ra) / 1000:.1f} vs "
                    f"{min(rb) / 1000:.1f}-{max(rb) / 1000:.1f} µs")
        elif sig:
            note = ("single runs: this shows that these runs differ; repeat each "
                    "configuration (>= 2 runs) to separate it from run-to-run variation")
        out.changes.append(Change(label, va, vb, p, sig, note))
    ma, mb = a.channel.max_ns, b.channel.max_ns
    wa, wb = a.window_maxima, b.window_maxima
    if a.window_ns and a.window_ns == b.window_ns and len(wa) >= 10 and len(wb) >= 10:
        p, effect = mann_whitney(wa, wb)
        note = (f"window maxima ({a.window_ns / 1e9:g} s windows): P(B window max > A) = "
                f"{effect:.2f}")
        sig = p < ALPHA and abs(effect - 0.5) >= 0.05
        out.changes.append(Change("max", ma, mb, p, sig, note))
    else:
        out.changes.append(Change(
            "max", ma, mb, None, False,
            "no comparable window maxima: maxima of runs of different length are not "
            "comparable directly"))
    return out


def compare_configs(configs: Sequence[Config]) -> list[PairComparison]:
    """Every configuration against the first (the baseline)."""
    return [compare_pair(configs[0], c) for c in configs[1:]]
