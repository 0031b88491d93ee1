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
  We compare the *distributions of per-window maxima* (same window length, the
  worst channel per window, phase after phase) with a Mann-Whitney U test; the
  effect is P(a window of B has a higher maximum than a window of A), the shown
  change is that of the median window maximum, and the direction (worse or
  better) comes from the effect, never from the two overall maxima. Without
  window maxima, maxima of runs of the same length (within 10 %) are shown but
  never called significant; of different lengths, not shown as a change.
* **imported peers' tails**: samples a peer tool counted beyond its histogram
  range are placed at its max (docs/report.md#importers); a percentile among
  them is only known to lie in [range, max]. Such a change is significant only
  when the intervals do not overlap and the test's threshold lies below the
  range (so the counts above it are exact).

"not significant" is a first-class answer, and it comes in two kinds that are never
confused (`Change.verdict`): **no change** (the interval of the ratio lies within
±`EQUIVALENCE_MARGIN`: a change that large is excluded at the interval's confidence, an
equivalence test in the manner of TOST) and **cannot tell** (no interval, or one that
reaches beyond the margin), which always carries the change it could not judge and what
would decide it.

The configurations come from rtlab.analysis.configs (`build_configs`), the channels
that count from rtlab.analysis.channel_select.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from rtlab.analysis.batchstats import hist_arrays
from rtlab.analysis.compare_stats import (
    Estimate,
    compare_estimates,
    mean_estimate,
    percentile_estimate,
    window_max_estimate,
)
from rtlab.analysis.configs import Config
from rtlab.results.model import Channel
from rtlab.results.summary import percentile, percentile_label

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.results.histogram import LogLinHistogram

TAIL_LEVELS: tuple[float, ...] = (99.0, 99.9, 99.99)
ALPHA = 0.01
MIN_REL_CHANGE = 0.05
CONFIDENCE = 1 - ALPHA  # of the ratio intervals
TARGET_CHANGE = 0.10  # "needs longer runs": what it takes to detect this change
EQUIVALENCE_MARGIN = TARGET_CHANGE  # "no change": the ratio's interval within ±10 %
# Change.verdict, in order of what a summary names first
VERDICTS: tuple[str, ...] = ("worse", "better", "cannot tell", "no change", "n/a")
DECIDED: frozenset[str] = frozenset({"worse", "better", "no change"})
CENTRE_LEVELS: tuple[float, ...] = (50.0,)


@dataclass(frozen=True)
class Change:
    """The change of one statistic from A (baseline) to B.

    `a_lo`/`b_lo`: when set, the value is only known to lie in [lo, value] (beyond a
    peer tool's histogram range). `direction`: +1 B is worse (higher), -1 better, 0 none
    shown; for `max` it comes from the window maxima, not from the two overall maxima.
    `ci_lo`/`ci_hi`: the confidence interval of the ratio B/A at `CONFIDENCE`, from
    batches of windows or runs (docs/report.md#comparisons); None when there is nothing
    to estimate the variance from. `needs`: not significant, and about this many times
    the data (longer runs, or more runs per configuration) are needed to detect a
    `TARGET_CHANGE` with 90 % power; `method`: what the interval rests on; `why`: when
    the change cannot be told, why in a few words ("single runs without windows"; set by
    `compare_pair`, else derived from the interval).

    `verdict` is one of `VERDICTS`: `worse`/`better` (significant), `no change` (not
    significant and the interval within ±`EQUIVALENCE_MARGIN`), `cannot tell` (not
    significant, and no interval or one not within the margin) or `n/a` (no change shown).
    """

    what: str  # "p99", "p99.9", "max", ...
    a_ns: float | None
    b_ns: float | None
    p_value: float | None
    significant: bool
    note: str = ""
    direction: int = 0
    a_lo: float | None = None
    b_lo: float | None = None
    ci_lo: float | None = None
    ci_hi: float | None = None
    needs: float | None = None
    method: str | None = None
    confidence: float = CONFIDENCE  # of ci_lo..ci_hi (1 - the test's alpha)
    why: str = ""  # cannot tell: why, in a few words (compare_pair fills it)

    @property
    def ratio(self) -> float | None:
        if not self.a_ns or self.b_ns is None:
            return None
        return self.b_ns / self.a_ns

    def _ci_text(self) -> str:
        if self.ci_lo is None or self.ci_hi is None:
            return ""
        return (f"; {self.confidence * 100:g} % CI {(self.ci_lo - 1) * 100:+.1f} to "
                f"{(self.ci_hi - 1) * 100:+.1f} %")

    def needs_text(self) -> str:
        """"needs longer or repeated runs" as words ('' when not needed)."""
        if self.needs is None:
            return ""
        k = self.needs
        if k > 100:
            return (f"inconclusive: to detect a {TARGET_CHANGE * 100:.0f} % change, measure "
                    "more than 100× longer, or many more runs per configuration")
        times = f"{k:.0f}" if k >= 10 else f"{k:.1f}"
        runs = max(2, math.ceil(k))
        return (f"inconclusive: to detect a {TARGET_CHANGE * 100:.0f} % change, measure "
                f"~{times}× longer, or {runs} runs of this length per configuration")

    @property
    def verdict(self) -> str:
        """`worse`/`better` (significant), `no change` (not significant, and the ratio's
        interval lies within ±EQUIVALENCE_MARGIN: a change that large is excluded at
        `confidence`), `cannot tell` (not significant, and no interval or one that reaches
        beyond the margin) or `n/a` (no change shown)."""
        if self.ratio is None:
            return "n/a"
        if self.significant:
            return "worse" if self.direction > 0 else "better"
        return "no change" if self.within_margin else "cannot tell"

    @property
    def decided(self) -> bool:
        """Whether the change was judged: worse, better or no change (not `cannot tell`,
        not `n/a`)."""
        return self.verdict in DECIDED

    @property
    def within_margin(self) -> bool:
        """The ratio's interval lies within [1 - EQUIVALENCE_MARGIN, 1 + EQUIVALENCE_MARGIN]
        (both one-sided tests of TOST reject a change of the margin, each at (1 -
        confidence) / 2)."""
        if self.ci_lo is None or self.ci_hi is None:
            return False
        return self.ci_lo >= 1 - EQUIVALENCE_MARGIN and self.ci_hi <= 1 + EQUIVALENCE_MARGIN

    @property
    def regression(self) -> bool:
        return self.significant and self.direction > 0

    def change_text(self) -> str:
        """The change as shown: '+29.9 %', or 'from → lo–hi' where a value is known only as
        an interval, or 'n/a'."""
        r = self.ratio
        if r is None:
            return "n/a"
        if self.a_lo is not None or self.b_lo is not None:
            def show(v: float | None, lo: float | None) -> str:
                return _us(v) if lo is None else f"{_us(lo)}–{_us(v)}"
            return f"{show(self.a_ns, self.a_lo)} → {show(self.b_ns, self.b_lo)}"
        return f"{(r - 1) * 100:+.1f} %"

    def brief(self) -> str:
        """'p99 +29.9 %': the statistic and its change, for summaries."""
        return f"{self.what} {self.change_text()}"

    def undecided_reason(self) -> str:
        """Why the change was not judged, in a few words ('' when it was): `why`, else
        (cannot tell) the interval that reaches beyond the margin or 'no interval', else
        (n/a) the note."""
        verdict = self.verdict
        if verdict in DECIDED:
            return ""
        if self.why:
            return self.why
        if verdict == "n/a":
            return self.note or "not shown"
        if self.ci_lo is None or self.ci_hi is None:
            return "no interval"
        return f"interval not within ±{EQUIVALENCE_MARGIN * 100:.0f} %"

    def describe(self) -> str:
        verdict = self.verdict
        if verdict == "n/a":
            return f"{self.what}: n/a" + (f" ({self.note})" if self.note else "")
        text = f"{self.what}: {self.change_text()}"
        p = f", p = {_pfmt(self.p_value)}" if self.p_value is not None else ""
        margin = f"±{EQUIVALENCE_MARGIN * 100:.0f} %"
        if self.significant:
            text += f" ({verdict}, significant, p = {_pfmt(self.p_value)}{self._ci_text()})"
        elif verdict == "no change":
            text += f" (no change: not significant{p}{self._ci_text()}, within {margin})"
        elif self.ci_lo is None or self.ci_hi is None:
            why = self.why or ("not significant" if self.p_value is None
                               else f"not significant{p}")
            text += f" (cannot tell: no interval, {why})"
        else:
            text += f" (cannot tell: not significant{p}{self._ci_text()}, not within {margin})"
        extra = [x for x in ("" if verdict == "no change" else self.needs_text(), self.note)
                 if x]
        if extra:
            text += "; " + "; ".join(extra)
        return text

    def to_dict(self) -> dict[str, Any]:
        """The change as data: both values (ns; `*_lower_bound_ns`: known only as
        [bound, value]), ratio B/A with its confidence interval, which way it moved
        (`worse`: B higher; null: no direction), the verdict (`VERDICTS`), whether it was
        judged (`decided`), why it cannot be told, the p-value as the text shows it,
        `needs` (not significant and too little data: the factor of more data to detect
        `target_change`), what the interval rests on, the note, the text."""
        r = self.ratio
        return {
            "statistic": self.what,
            "baseline_ns": self.a_ns, "value_ns": self.b_ns,
            "baseline_lower_bound_ns": self.a_lo, "value_lower_bound_ns": self.b_lo,
            "ratio": r, "change_percent": (r - 1) * 100 if r is not None else None,
            "ratio_ci": ([self.ci_lo, self.ci_hi] if self.ci_lo is not None else None),
            "confidence": self.confidence,
            "direction": "worse" if self.direction > 0 else "better" if self.direction < 0
            else None,
            "significant": self.significant, "p_value": self.p_value,
            "verdict": self.verdict, "decided": self.decided,
            "equivalence_margin": EQUIVALENCE_MARGIN,
            "cannot_tell_because": self.undecided_reason() or None,
            "regression": self.regression,
            "inconclusive": self.verdict == "cannot tell",
            "needs": None if self.needs is None else {
                "more_data_factor": self.needs, "target_change": TARGET_CHANGE,
                "runs_per_configuration": max(2, math.ceil(self.needs)),
                "text": self.needs_text()},
            "method": self.method,
            "note": self.note or None, "text": self.describe(),
        }


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

    def selected(self, which: Selector | None = None) -> list[Change]:
        """The changes of the statistics `which` keeps (all when None)."""
        return [c for c in self.changes if which is None or which(c.what)]

    def undecided(self, which: Selector | None = None) -> list[Change]:
        """The changes not judged: `cannot tell` and `n/a`."""
        return [c for c in self.selected(which) if not c.decided]

    def verdict(self, which: Selector | None = None) -> str:
        """The pair's word over the statistics `which` keeps: `worse` (one got worse),
        else `cannot tell` (one was not judged), else `better` (one got better), else
        `no change` (every one within the margin)."""
        words = {c.verdict for c in self.selected(which)}
        if "worse" in words:
            return "worse"
        if words - DECIDED or not words:
            return "cannot tell"
        return "better" if "better" in words else "no change"

    def summary(self, which: Selector | None = None) -> str:
        """One line: each verdict with its statistics, the changes that could not be told
        with why and what would decide them ('worse: p99 +12.0 %; cannot tell: p99.9
        +36.9 % (single runs without windows); no change: median, mean')."""
        chosen = self.selected(which)
        parts = []
        for word in ("worse", "better"):
            hit = [c.brief() for c in chosen if c.verdict == word]
            if hit:
                parts.append(f"{word}: {', '.join(hit)}")
        undecided = undecided_text([c for c in chosen if c.verdict == "cannot tell"])
        if undecided:
            parts.append(f"cannot tell: {undecided}")
        same = [c.what for c in chosen if c.verdict == "no change"]
        if same:
            parts.append(f"no change: {', '.join(same)}")
        absent = undecided_text([c for c in chosen if c.verdict == "n/a"])
        if absent:
            parts.append(f"not compared: {absent}")
        return "; ".join(parts) or "nothing compared"

    def to_dict(self, which: Selector | None = None) -> dict[str, Any]:
        return {"baseline": self.a.label, "configuration": self.b.label,
                "verdict": self.verdict(which), "summary": self.summary(which),
                "changes": [c.to_dict() for c in self.changes],
                "regressions": [c.what for c in self.regressions],
                "undecided": [c.what for c in self.undecided(which)]}


Selector = Callable[[str], bool]


def tails_and_max(what: str) -> bool:
    """The statistics a regression gate judges (`rtlab history`): the tail percentiles
    and the maxima (through the window maxima), not the median or the mean."""
    return what in {percentile_label(q) for q in TAIL_LEVELS} or what.startswith("max")


def undecided_text(changes: Sequence[Change]) -> str:
    """Changes not judged, grouped by why, each group with what would decide it:
    'p99 +29.9 %, p99.9 +36.9 % (single runs without windows), max +20.0 % (no window
    maxima ...)'."""
    groups: dict[str, list[Change]] = {}
    for c in changes:
        groups.setdefault(c.undecided_reason(), []).append(c)
    out = []
    for why, group in groups.items():
        briefs = ", ".join(c.brief() if c.ratio is not None else c.what for c in group)
        needs = [c.needs for c in group if c.needs is not None]
        decide = f"; to decide: {_needs_short(max(needs))}" if needs else ""
        out.append(f"{briefs} ({why}{decide})" if why or decide else briefs)
    return ", ".join(out)


def _needs_short(k: float) -> str:
    """What would decide a change, from `Change.needs` (the factor of more data)."""
    if k > 100:
        return "more than 100× longer runs, or many more runs per configuration"
    times = f"{k:.0f}" if k >= 10 else f"{k:.1f}"
    return f"~{times}× longer runs, or {max(2, math.ceil(k))} runs per configuration"


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
    for heads in c.run_headlines():
        m = Channel.merged("all", heads)
        v = percentile(m.hist, q, m.min_ns, m.max_ns)
        if v is not None:
            out.append(v)
    return out


def _runs_note(a: Config, b: Config) -> str:
    single = [c.label for c in (a, b) if len(c.runs) < 2]
    who = "one run each" if len(single) == 2 else f"one run of {single[0]}"
    return (f"{who}: this shows that these runs differ; measure each configuration two or "
            "more times to separate it from run-to-run variation")


METHOD_TEXT = {
    "window-hist": "batches of consecutive windows",
    "window-max": "batches of windows, each window counted as one observation (no "
                  "per-window histograms: conservative)",
    "runs": "runs as the unit",
}


def _method(a: Estimate, b: Estimate) -> str | None:
    order = ["none", "window-max", "runs", "window-hist"]
    tiers = [t for t in (a.tier, b.tier) if t in order]
    return min(tiers, key=order.index) if tiers else None


def _judge(label: str, a: Config, b: Config, ea: Estimate, eb: Estimate,
           no_test: str, alpha: float = ALPHA) -> Change:
    """The change from two estimates: ratio with interval, p-value, significance (p <
    ALPHA and at least MIN_REL_CHANGE), or not significant and how much more data."""
    va, vb = ea.value, eb.value
    if va is None or vb is None:
        return Change(label, va, vb, None, False, "too few samples")
    direction = 1 if vb > va else -1 if vb < va else 0
    t = compare_estimates(ea, eb, alpha, TARGET_CHANGE)
    if t is None:
        return Change(label, va, vb, None, False, no_test, direction, confidence=1 - alpha)
    moved = abs(t.ratio - 1) >= MIN_REL_CHANGE
    enough = t.needs is None or (ea.short is None and eb.short is None)
    sig = t.p < alpha and moved and enough
    notes = []
    method = _method(ea, eb)
    if method == "window-max" and not label.startswith("max"):
        notes.append("no per-window histograms in "
                     + " and ".join(c.label for c, e in ((a, ea), (b, eb))
                                    if e.tier == "window-max")
                     + ": a window counts as one observation (conservative)")
    if sig and (len(a.runs) < 2 or len(b.runs) < 2):
        notes.append(_runs_note(a, b))
    needs = None if sig or (t.needs is None) else t.needs
    if not enough:  # too few independent tail events: no interval is believable
        notes.insert(0, "too few independent tail events for an interval")
        return Change(label, va, vb, None, False, "; ".join(notes), direction,
                      needs=needs, method=method, confidence=1 - alpha)
    return Change(label, va, vb, t.p, sig, "; ".join(notes), direction,
                  ci_lo=t.lo, ci_hi=t.hi, needs=needs, method=method, confidence=1 - alpha)


_NO_TEST = ("no interval: without windows (an imported peer result has no time "
            "structure) a single run says nothing about its own variation; compare two or "
            "more runs per configuration")


def _estimate(c: Config, q: float) -> Estimate:
    ch = c.channel
    v = c.value(q)
    if c.units is None or v is None:
        return Estimate(v, None)
    hi, cum = hist_arrays(ch.hist)
    return percentile_estimate(c.units, q / 100, float(v), hi, cum, float(ch.min_ns or 0),
                               float(ch.max_ns or 0))


def _percentile_change(a: Config, b: Config, q: float, pooled: LogLinHistogram,
                       alpha: float = ALPHA) -> Change:
    label = "median" if q == 50.0 else percentile_label(q)
    va, vb = a.value(q), b.value(q)
    if va is None or vb is None:
        return Change(label, va, vb, None, False, "too few samples")
    la, lb = a.lower_bound(q), b.lower_bound(q)
    if la is not None or lb is not None:
        # Known only as intervals [lo, value]: a direction needs disjoint intervals, and the
        # counts above t are exact only when t is below every censored sample.
        t = percentile(pooled, q)
        ha, hb = a.channel.hist, b.channel.hist
        p = two_proportion_p(_above(ha, t), ha.total, _above(hb, t), hb.total) \
            if t is not None else 1.0
        lo_a, lo_b = (va if la is None else la), (vb if lb is None else lb)
        direction = 1 if lo_b > va else -1 if lo_a > vb else 0
        exact = t is not None and all(lo is None or t < lo for lo in (la, lb))
        who = " and ".join(c.label for c, lo in ((a, la), (b, lb)) if lo is not None)
        note = (f"{who}: beyond the peer tool's histogram range, only an interval is known")
        # the z-test treats samples as independent: with time structure unknown (imports)
        # it only counts together with a dependence-aware interval that agrees
        t2 = compare_estimates(_estimate(a, q), _estimate(b, q), alpha, TARGET_CHANGE)
        sig = (direction != 0 and exact and p < alpha and t2 is not None and t2.p < alpha)
        return Change(label, va, vb, p if exact else None, sig, note, direction, la, lb,
                      confidence=1 - alpha)
    ch = _judge(label, a, b, _estimate(a, q), _estimate(b, q), _NO_TEST, alpha)
    ra, rb = _per_run(a, q), _per_run(b, q)
    if len(ra) >= 2 and len(rb) >= 2:
        apart = max(ra) < min(rb) or max(rb) < min(ra)
        runs = ("runs " + ("do not overlap" if apart else "overlap") + ": "
                f"{min(ra) / 1000:.1f}-{max(ra) / 1000:.1f} vs "
                f"{min(rb) / 1000:.1f}-{max(rb) / 1000:.1f} µs")
        ch = replace(ch, note="; ".join(x for x in (ch.note, runs) if x))
    return ch


def _mean_change(a: Config, b: Config, alpha: float = ALPHA) -> Change:
    ea = mean_estimate(a.units, a.value("avg")) if a.units else Estimate(a.value("avg"), None)
    eb = mean_estimate(b.units, b.value("avg")) if b.units else Estimate(b.value("avg"), None)
    if a.censored or b.censored:
        return Change("mean", ea.value, eb.value, None, False,
                      "samples beyond the peer tool's histogram range: the mean is not exact",
                      confidence=1 - alpha)
    return _judge("mean", a, b, ea, eb, "no interval: no per-window sums (an older engine "
                  "or an import) and one run per configuration; compare two or more runs "
                  "per configuration", alpha)


def _max_change(a: Config, b: Config, alpha: float = ALPHA) -> Change:
    """Maxima: from the distributions of the per-window maxima, never from the two overall
    maxima of runs of different length."""
    ma, mb = a.channel.max_ns, b.channel.max_ns
    da, db = a.duration_ns, b.duration_ns
    same_length = bool(da and db and abs(da / db - 1) <= 0.1)
    overall = f"overall max {_us(ma)} in {_s(da)} vs {_us(mb)} in {_s(db)}"
    wa, wb = a.window_maxima, b.window_maxima
    if (a.window_ns and a.window_ns == b.window_ns and len(wa) >= MIN_WINDOWS
            and len(wb) >= MIN_WINDOWS):
        _, effect = mann_whitney(wa, wb)
        ea = window_max_estimate(a.units) if a.units else Estimate(a.value("window"), None)
        eb = window_max_estimate(b.units) if b.units else Estimate(b.value("window"), None)
        ch = _judge("max (median window max)", a, b, ea, eb,
                    "too few windows for an interval", alpha)
        note = (f"{a.window_ns / 1e9:g} s window maxima (batches of consecutive windows): "
                f"P(a window of B has the higher max) = {effect:.2f}; {overall}"
                + ("" if same_length else " (different lengths: not comparable directly)"))
        note = "; ".join(x for x in (note, ch.note) if x)
        return replace(ch, note=note, method="window-max" if ch.method else None)
    why = _no_window_test(a, b)
    if same_length:
        return Change("max", ma, mb, None, False,
                      f"{why}: one maximum per run has no significance test",
                      confidence=1 - alpha)
    return Change("max", None, None, None, False,
                  f"{overall}: maxima of runs of different length are not comparable "
                  f"directly, and {why}", confidence=1 - alpha)


MIN_WINDOWS = 10  # window maxima each configuration needs for the maxima's test


def _no_window_test(a: Config, b: Config) -> str:
    """Why the window maxima cannot be compared: none, other lengths, or too few."""
    wa, wb = a.window_maxima, b.window_maxima
    if not len(wa) or not len(wb):
        return "no window maxima"
    if a.window_ns != b.window_ns:
        return "window maxima of different window lengths"
    return (f"too few window maxima ({len(wa)} and {len(wb)}; the test needs "
            f"{MIN_WINDOWS} each: measure longer)")


def _us(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    v = ns / 1000
    return f"{v:,.0f} µs" if v >= 100 else f"{v:.3g} µs"


def _s(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    s = ns / 1e9
    return (f"{s:.3g} s" if s < 1000 else f"{s / 3600:.3g} h" if s < 2 * 86400
            else f"{s / 86400:.3g} days")


def compare_pair(a: Config, b: Config, *, alpha: float = ALPHA) -> PairComparison:
    """Every statistic's change from A to B, each tested at `alpha` (a caller that makes
    many tests at once, as `rtlab tune`, passes its family-wise share)."""
    out = PairComparison(a, b)
    pooled = a.channel.hist.merge(b.channel.hist)
    out.changes.append(_percentile_change(a, b, 50.0, pooled, alpha))
    out.changes.append(_mean_change(a, b, alpha))
    for q in TAIL_LEVELS:
        out.changes.append(_percentile_change(a, b, q, pooled, alpha))
    out.changes.append(_max_change(a, b, alpha))
    out.changes = [c if c.decided or c.why else replace(c, why=_why_undecided(a, b, c))
                   for c in out.changes]
    return out


def _why_undecided(a: Config, b: Config, ch: Change) -> str:
    """Why a change was not judged, in a few words, from what the configurations hold;
    '' where the change's interval says it (one that reaches beyond the margin)."""
    if ch.verdict == "n/a":
        if ch.what == "max":
            return f"runs of different length and {_no_window_test(a, b)}"
        return ch.note or "not shown"
    if ch.ci_lo is not None:
        return ""
    if ch.a_lo is not None or ch.b_lo is not None:
        return "known only as intervals, beyond the peer tool's histogram range"
    if ch.what == "mean" and (a.censored or b.censored):
        return "not exact: samples beyond the peer tool's histogram range"
    if ch.what == "max":
        return _no_window_test(a, b)
    bare = [c.label for c in (a, b) if c.units is None or c.units.tier == "none"]
    if len(bare) == 2:
        return "single runs without windows"
    if bare:
        return f"{bare[0]}: a single run without windows"
    if ch.needs is not None:
        return "too few independent tail events"
    if ch.what.startswith("max"):
        return "too few windows for an interval"
    return "no interval"


def compare_configs(configs: Sequence[Config], *, alpha: float = ALPHA
                    ) -> list[PairComparison]:
    """Every configuration against the first (the baseline)."""
    return [compare_pair(configs[0], c, alpha=alpha) for c in configs[1:]]
