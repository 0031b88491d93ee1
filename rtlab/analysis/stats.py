# SPDX-License-Identifier: MIT
"""Confidence intervals of percentiles. (The percentile rule itself, mean, mode and
summaries live below the result model, in rtlab.results.summary.)

Confidence intervals for percentiles (`percentile_intervals`, docs/report.md
"How sure is a tail percentile?"): distribution-free, from order statistics. With
N independent samples, K = #{samples <= the true p-quantile} is Binomial(N, p) (or
stochastically as large), so [X_(l), X_(u)] covers the true quantile with
probability >= P(l <= K <= u - 1). The ranks are chosen equal-tailed (each end
misses with probability <= (1 - level)/2). From the histogram the interval's ends
are bucket edges taken outward (the low edge of the bucket holding rank l, the
high edge of the one holding rank u, clamped to the exact min/max), so the
histogram only ever widens the interval. An end that needs a rank outside 1..N
is unbounded (None): e.g. with 10^6 samples no sample bounds p99.9999 from above.
Samples are not independent. Per-window coarse histograms, when present, measure
how much the fraction of samples below the percentile varies between batches of
consecutive windows (`BatchDependence`): the interval is computed for N / VIF
effective samples, at a level widened for the batches' degrees of freedom.
Per-window maxima detect clustered tails (`clustering`), which also widens it.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from rtlab.analysis.batchstats import coarse_edges, ratio_var, t_ppf
from rtlab.results.summary import (
    DEFAULT_PERCENTILES,
    HistogramLike,
    _exact,
    percentile,
    percentile_label,
)

DEFAULT_LEVEL = 0.95  # two-sided confidence level of the percentile intervals
TAIL_PERCENTILES: tuple[float, ...] = tuple(q for q in DEFAULT_PERCENTILES if q >= 99.0)
WIDE = 0.10  # an interval is "wide" when unbounded or high/low - 1 > WIDE


# --- confidence intervals for percentiles (order statistics) -------------------------

_WINDOW_CAP = 4_000_000  # binomial terms summed exactly; beyond, a normal approximation


def _binomial_window(n: int, q: float) -> tuple[np.ndarray, np.ndarray]:
    """(k, P(M = k)) for M ~ Binomial(n, q) over every k with non-negligible mass."""
    mu = n * q
    sd = math.sqrt(n * q * (1 - q))
    lo = max(0, math.floor(mu - 12 * sd - 30))
    hi = min(n, math.ceil(mu + 12 * sd + 30))
    ks = np.arange(lo, hi + 1, dtype=np.float64)
    if q <= 0.0:
        return ks[:1], np.ones(1)
    log0 = (math.lgamma(n + 1) - math.lgamma(lo + 1) - math.lgamma(n - lo + 1)
            + lo * math.log(q) + (n - lo) * math.log1p(-q))
    if len(ks) > 1:
        step = np.log(n - ks[:-1]) - np.log(ks[:-1] + 1) + (math.log(q) - math.log1p(-q))
        logs = np.concatenate(([log0], log0 + np.cumsum(step)))
    else:
        logs = np.array([log0])
    pmf = np.exp(logs - logs.max())
    return ks, pmf / pmf.sum()


@lru_cache(maxsize=4096)
def rank_interval(n: int, p: float, level: float = DEFAULT_LEVEL) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) with P(X_(l) <= x_p <= X_(u)) >= level for N independent
    samples (x_p the true p-quantile), each end missing with probability <= (1-level)/2;
    None for an end that no rank in 1..N provides (unbounded)."""
    if n <= 0:
        return None, None
    q = float(1 - _exact(p) / 100)  # M = N - K = samples above x_p ~ Binomial(N, q)
    alpha = (1 - level) / 2
    mu, sd = n * q, math.sqrt(n * q * (1 - q))
    if 24 * sd > _WINDOW_CAP:  # huge N: the normal approximation is exact to << 1 rank
        z = _z(1 - alpha)
        a = math.ceil(mu + z * sd + 0.5)
        b = math.floor(mu - z * sd - 0.5)
    else:
        ks, pmf = _binomial_window(n, q)
        sf = np.cumsum(pmf[::-1])[::-1]  # P(M >= k)
        cdf = np.cumsum(pmf)  # P(M <= k)
        above = np.nonzero(sf <= alpha)[0]
        a = int(ks[above[0]]) if len(above) else int(ks[-1]) + 1  # P(M >= a) <= alpha
        below = np.nonzero(cdf <= alpha)[0]
        b = int(ks[below[-1]]) if len(below) else int(ks[0]) - 1  # P(M <= b) <= alpha
    low = n - a + 1  # X_(low) > x_p needs M >= a
    up = n - b  # X_(up) < x_p needs M <= b
    return (low if low >= 1 else None), (up if b >= 0 else None)


def _z(prob: float) -> float:
    """Standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9)."""
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
         1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
         6.680131188771972e01, -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
         -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
         3.754408661907416e00)
    if prob < 0.02425:
        t = math.sqrt(-2 * math.log(prob))
        return (((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5]) / \
            ((((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1)
    if prob > 1 - 0.02425:
        return -_z(1 - prob)
    t = prob - 0.5
    r = t * t
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * t / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


def samples_to_bound(p: float, level: float = DEFAULT_LEVEL) -> int:
    """The fewest independent samples whose maximum bounds the p-quantile from above at
    `level` (two-sided convention): p^N <= (1 - level)/2."""
    frac = float(_exact(p) / 100)
    if frac >= 1:
        return 1
    return math.ceil(math.log((1 - level) / 2) / math.log(frac))


class WindowsLike(Protocol):
    index: Any  # numpy arrays, one entry per window
    max_ns: Any
    samples: Any


class ChannelLike(Protocol):
    @property
    def hist(self) -> Any: ...
    @property
    def windows(self) -> Any: ...


@dataclass(frozen=True)
class Clustering:
    """How clustered the samples above `threshold_ns` are, from the per-window maxima:
    `clusters` runs of consecutive windows whose maximum exceeds it, against `expected`
    such runs if the `exceedances` samples above it were independent. theta (<= 1) is
    the factor applied to the sample count: (windows hit / hit windows expected), i.e.
    several samples above it in one window, divided by the variance inflation of the
    hit-window count (its autocorrelation over consecutive windows). `significant` when
    fewer runs or hit windows than independence allows (one-sided z < -2.33, 1 %) and
    theta < 0.9; only then is an interval widened."""

    threshold_ns: int
    exceedances: int
    clusters: int
    expected: float
    theta: float
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        return {"threshold_ns": self.threshold_ns, "exceedances": self.exceedances,
                "clusters": self.clusters, "expected_if_independent": round(self.expected, 2),
                "theta": round(self.theta, 4), "significant": self.significant}


MIN_WINDOWS = 30  # fewer windows than this: clustering is not checked


def _cum(hist: HistogramLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low edges, high edges, cumulative counts) of the non-empty buckets."""
    arrays = getattr(hist, "bucket_arrays", None)
    if arrays is not None:  # a LogLinHistogram: no Bucket object per bucket
        lo_a, hi_a, cnt_a = arrays()
        return lo_a, hi_a, np.cumsum(cnt_a)
    lo, hi, cnt = [], [], []
    for b in hist.buckets():
        lo.append(b.lo)
        hi.append(b.hi)
        cnt.append(b.count)
    return (np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64),
            np.cumsum(np.asarray(cnt, dtype=np.int64)))


class _WindowSeries:
    """One channel's window maxima prepared once for `clustering` at any threshold: the
    maxima as they are (no int64 copy), which windows follow their predecessor, and the
    samples per window as distinct values with their counts (a 1 kHz run has one or a
    few), so that the expected hits of a threshold cost a few numbers, not a pass over
    every window. Derived only from the arrays, which a WindowMaxima never changes."""

    def __init__(self, windows: Any) -> None:
        self.wmax = np.asarray(windows.max_ns)
        idx = np.asarray(windows.index)
        self.nwin = len(idx)
        self.adjacent = np.diff(idx) == 1  # window i+1 follows window i
        self.all_adjacent = bool(self.adjacent.all())
        wn = np.asarray(windows.samples)
        steady = self.nwin > 0 and wn.strides == (0,)  # one count for all (WindowMaxima)
        lo, hi = ((int(wn[0]), int(wn[0])) if steady else
                  (int(wn.min()), int(wn.max())) if self.nwin else (0, 0))
        span = hi - lo + 1
        self.values: np.ndarray | None = None
        self.raw = wn
        if lo == hi and self.nwin:  # every window counts the same
            self.values = np.array([float(lo)])
            self.counts = np.array([float(self.nwin)])
            self.pair_cur = self.pair_prev = np.zeros(1, dtype=np.int64)
            self.pair_counts = np.array([float(np.count_nonzero(self.adjacent))])
        elif lo >= 0 and span <= 4096:  # distinct values and adjacent pairs by bincount
            codes = (wn - lo).astype(np.int64)
            cnt = np.bincount(codes, minlength=span)
            keep = np.flatnonzero(cnt)
            self.values = (keep + lo).astype(np.float64)
            self.counts = cnt[keep].astype(np.float64)
            remap = np.full(span, -1, dtype=np.int64)
            remap[keep] = np.arange(len(keep))
            u = len(keep)
            c = remap[codes]
            pairs = (c[1:] * u + c[:-1])[self.adjacent]
            pc = np.bincount(pairs, minlength=u * u)
            pk = np.flatnonzero(pc)
            self.pair_cur, self.pair_prev = pk // u, pk % u
            self.pair_counts = pc[pk].astype(np.float64)

    def expected(self, rate: float) -> tuple[float, float]:
        """(hit windows, runs of hit windows) expected when each sample exceeds the
        threshold independently with probability `rate`: a window of m samples is hit
        with probability h(m) = 1 - exp(-rate * m); a run starts at a hit window whose
        predecessor (if adjacent) is not hit."""
        if self.values is None:  # many distinct sample counts: one pass over the windows
            h = -np.expm1(-rate * self.raw.astype(np.float64))
            h_prev = np.concatenate(([0.0], h[:-1]))
            h_prev[1:] *= self.adjacent
            return float(np.sum(h)), float(np.sum(h * (1 - h_prev)))
        hu = -np.expm1(-rate * self.values)
        hits = float(np.sum(hu * self.counts))
        both = float(np.sum(hu[self.pair_cur] * hu[self.pair_prev] * self.pair_counts))
        return hits, hits - both


def _threshold(hist: HistogramLike, nwin: int, target: float) -> tuple[int, int, int] | None:
    """(threshold ns, samples above it, samples) for `clustering`: the bucket edge with
    about `target` samples above it, moved into [30, nwin/3]; None when too few windows
    or too few samples above any edge."""
    if nwin < MIN_WINDOWS or nwin / 3 < 30:
        return None
    _, hi, cum = _cum(hist)
    if not len(cum):
        return None
    n = int(cum[-1])
    k_target = min(max(target, 30.0), nwin / 3)
    above = n - cum  # samples above each bucket's high edge (exactly)
    j = int(np.argmin(np.abs(above - k_target)))
    k = int(above[j])
    if k < 10:
        return None
    return int(hi[j]), k, n


def clustering(hist: HistogramLike, windows: Any, target: float) -> Clustering | None:
    """Clustering of the samples above the bucket edge with about `target` samples above
    it (moved into [30, windows/3] so that it can be measured), or None when the channel
    has too few windows or too few samples above any edge."""
    if windows is None:
        return None
    at = _threshold(hist, len(windows), target)
    return None if at is None else _clustering_at(_WindowSeries(windows), *at)


def _clustering_at(ws: _WindowSeries, thr: int, k: int, n: int) -> Clustering | None:
    """`clustering` of prepared windows at threshold `thr`, with k of n samples above."""
    hit = ws.wmax > thr
    hits = int(np.count_nonzero(hit))
    follow = hit[1:] & hit[:-1]  # window i+1 and window i both hit
    both_adjacent = int(np.count_nonzero(follow if ws.all_adjacent else follow & ws.adjacent))
    runs = hits - both_adjacent
    hits_expected, expected = ws.expected(k / max(n, 1))
    if expected <= 0:
        return None
    within = min(1.0, hits / hits_expected)  # several samples above it in one window
    # hit windows following each other
    vif = _between_windows_hits(hit, hits, int(np.count_nonzero(follow)))
    z_runs = (runs - expected) / math.sqrt(expected)
    z_hits = (hits - hits_expected) / math.sqrt(hits_expected)
    theta = min(1.0, within / vif)
    significant = (z_runs < -2.33 or z_hits < -2.33) and theta < 0.9
    return Clustering(thr, k, runs, expected, theta, significant)


def _between_windows_hits(hit: np.ndarray, hits: int, follow1: int) -> float:
    """`_between_windows` of a 0/1 series given as booleans, from counts instead of
    float products: with m = hits / n the centred lag-L product is
    B - m * (A + C) + (n - L) * m^2, B the pairs L apart both hit, A and C the hits in
    the first and last n - L. `follow1`: B at lag 1, already counted by the caller."""
    n = len(hit)
    if n == 0 or hits == 0 or hits == n:
        return 1.0
    m = hits / n
    var = hits * (1 - m)  # sum of (x - m)^2
    total = 0.0
    for lag in range(1, max(2, n // 4)):
        if lag >= n:
            break
        both = follow1 if lag == 1 else int(np.count_nonzero(hit[:-lag] & hit[lag:]))
        head = hits - int(np.count_nonzero(hit[n - lag:]))  # hits in x[:-lag]
        tail = hits - int(np.count_nonzero(hit[:lag]))  # hits in x[lag:]
        rho = (both - m * (head + tail) + (n - lag) * m * m) / var
        if rho <= 2 / math.sqrt(n):  # no longer distinguishable from 0
            break
        total += rho
    return 1.0 + 2.0 * total


MIN_BATCH_COUNT = 5  # fewer batches of windows than this: no batch-means estimate


@dataclass(frozen=True)
class BatchDependence:
    """How much more the fraction of samples at or below a percentile varies than it
    would with independent samples (variance inflation factor, VIF), measured from
    batches of consecutive windows' coarse histograms (batch means, as in the
    comparisons): at the coarse edge `edge_ns` next to the percentile, with `df`
    degrees of freedom (batches - 1). The interval is then computed for N / max(1, VIF)
    effective samples at a level widened for df (Student's t); it is reported as
    widened for dependence only when the VIF is significantly above 1."""

    edge_ns: int
    vif: float
    df: int
    batches: int
    vif_between: float  # from the batches' spread alone (no lag-1 term): for the test

    @property
    def significant(self) -> bool:
        """The batches vary significantly more than independent samples allow (one-sided
        0.5 % at each of the two edges looked at: under independence vif_between * df is
        about chi-square with df degrees of freedom; Wilson-Hilferty quantile)."""
        k = 2 / (9 * self.df)
        return self.vif_between > (1 - k + 2.576 * math.sqrt(k)) ** 3

    def to_dict(self) -> dict[str, Any]:
        return {"edge_ns": self.edge_ns, "variance_inflation": round(self.vif, 3),
                "df": self.df, "batches": self.batches, "significant": self.significant}


def _window_hist_of(ch: Any) -> Any:
    """The channel's per-window histograms when they match its windows, else None."""
    wh = getattr(ch, "window_hist", None)
    w = getattr(ch, "windows", None)
    if wh is None or w is None or len(wh) != len(w) or not len(wh):
        return None
    if not np.array_equal(wh.index, np.asarray(w.index, dtype=np.int64)):
        return None
    return wh


class _Batches:
    """One channel's per-window coarse histograms summed over batches of about sqrt(W)
    consecutive windows: counts at or below each coarse edge per batch."""

    def __init__(self, wh: Any) -> None:

        w = len(wh)
        size = max(1, round(math.sqrt(w)))
        nb = max(1, w // size)
        rows = np.repeat(np.arange(w), np.diff(wh.ptr))
        batch = np.minimum(rows // size, nb - 1)  # the remainder joins the last batch
        k = int(wh.bucket.max()) + 1 if len(wh.bucket) else 1
        counts = np.zeros((nb, k), dtype=np.float64)
        np.add.at(counts, (batch, wh.bucket), wh.count)
        self.cum = np.cumsum(counts, axis=1)  # (B, K) samples <= edge k
        self.x = counts.sum(axis=1)
        self.edges = coarse_edges(wh.sub_bits, k)
        self.n = float(self.x.sum())
        self._var: tuple[np.ndarray, np.ndarray] | None = None
        self.df = nb - 1

    def at(self, value: float) -> BatchDependence | None:
        """The VIF at the coarse edges on both sides of `value` (the larger of those
        with samples on both sides), or None when there are too few batches."""

        if len(self.x) < MIN_BATCH_COUNT or self.n <= 0:
            return None
        if self._var is None:
            self._var = (ratio_var(self.cum, self.x, series=True)[0],
                         ratio_var(self.cum, self.x)[0])
        var, var_between = self._var
        f = self.cum.sum(axis=0) / self.n
        k_hi = int(np.searchsorted(self.edges, value, side="left"))
        best: BatchDependence | None = None
        for k in (k_hi - 1, k_hi):
            if not 0 <= k < len(self.edges):
                continue
            fk = float(f[k])
            if min(fk, 1 - fk) * self.n < 1:
                continue
            iid = fk * (1 - fk) / self.n
            vif = float(var[k]) / iid
            if best is None or vif > best.vif:
                best = BatchDependence(int(self.edges[k]), vif, self.df, len(self.x),
                                       float(var_between[k]) / iid)
        return best


def _t_level(level: float, df: int) -> float:
    """The normal-theory level whose z equals Student's t quantile of `level` with
    `df` degrees of freedom (an interval from an estimated variance is wider)."""

    alpha = (1 - level) / 2
    t = t_ppf(1 - alpha, df)
    return 1 - math.erfc(t / math.sqrt(2))  # 2 * Phi(t) - 1


@dataclass(frozen=True)
class PercentileInterval:
    """A distribution-free confidence interval for percentile `p` (ns). `low_ns`/`high_ns`
    None = unbounded on that side (too few samples below/above). `theta` is set when the
    interval was widened for clustered samples (effective sample size N * theta)."""

    p: float
    level: float
    samples: int
    value_ns: int | None
    low_ns: int | None
    high_ns: int | None
    low_rank: int | None
    high_rank: int | None
    theta: float | None = None
    clustering: Clustering | None = None
    checked_dependence: bool = False
    batch: BatchDependence | None = None

    @property
    def label(self) -> str:
        return percentile_label(self.p)

    @property
    def wide(self) -> bool:
        """Unbounded, or the upper end more than WIDE (10 %) above the lower."""
        if self.low_ns is None or self.high_ns is None:
            return True
        return self.high_ns > (1 + WIDE) * max(self.low_ns, 1)

    @property
    def bounded_above(self) -> bool:
        return self.high_ns is not None

    @property
    def widened(self) -> str | None:
        """Why the interval was widened beyond independent samples' ("dependent samples,
        variance xV" from batches of windows, or "clustered tail" from the window
        maxima), or None."""
        b = self.batch
        if b is not None and b.significant:
            return f"dependent samples, variance x{b.vif:.3g}"
        if self.clustering is not None and self.clustering.significant:
            return "clustered tail"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "value_ns": self.value_ns, "low_ns": self.low_ns, "high_ns": self.high_ns,
            "low_rank": self.low_rank, "high_rank": self.high_rank, "wide": self.wide,
            "widened_for_clustering": self.theta is not None,
            "widened_because": self.widened,
            "theta": None if self.theta is None else round(self.theta, 4),
            "dependence": (self.clustering.to_dict() if self.clustering is not None
                           else ("not measurable (too few windows or exceedances)"
                                 if self.checked_dependence else
                                 "not checked (no per-window maxima)")),
            "batch_dependence": (self.batch.to_dict() if self.batch is not None else
                                 "not measured (no per-window histograms, or fewer than "
                                 f"{MIN_BATCH_COUNT} batches of windows)"),
        }


def _widened_ranks(n: int, p: float, level: float, theta: float
                   ) -> tuple[int | None, int | None]:
    """Ranks for N samples in clusters of mean size 1/theta: the counts above the
    quantile of Binomial(N * theta, q), scaled by 1/theta."""
    n_eff = max(1, int(n * theta))
    l_eff, u_eff = rank_interval(n_eff, p, level)
    if l_eff is None:
        low = None
    else:
        a = math.ceil((n_eff - l_eff + 1) / theta)
        low = n - a + 1 if n - a + 1 >= 1 else None
    if u_eff is None:
        up = None
    else:
        b = math.floor((n_eff - u_eff) / theta)
        up = n - b
    return low, up


def _has_windows(part: Any) -> bool:
    w = getattr(part, "windows", None)
    return w is not None and bool(len(w))


# Clusterings already found, per window series (by identity, forgotten with the series):
# a report asks for the same channel's at the same percentiles in its own row and again
# as a part of the merged row.
_FOUND: dict[int, tuple[weakref.ref[Any], dict[tuple[int, int, int], Clustering | None]]] = {}


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    if key in _FOUND and _FOUND[key][0] is ref:
        del _FOUND[key]


def _found_for(windows: Any) -> dict[tuple[int, int, int], Clustering | None] | None:
    key = id(windows)
    entry = _FOUND.get(key)
    if entry is not None and entry[0]() is windows:
        return entry[1]
    try:
        ref = weakref.ref(windows, functools.partial(_forget, key))
    except TypeError:  # not weakly referenceable: nothing kept
        return None
    memo: dict[tuple[int, int, int], Clustering | None] = {}
    _FOUND[key] = (ref, memo)
    return memo


def part_clusterings(part: Any, qs: Iterable[float]) -> dict[float, Clustering | None]:
    """`clustering` of one channel (hist, windows) at the samples above each percentile
    in `qs`; the windows are prepared once for all of them (and the results kept with
    the windows: they depend on nothing else but the threshold and its counts)."""
    hist, windows = part.hist, part.windows
    n_part = hist.total
    memo = _found_for(windows)
    series: _WindowSeries | None = None
    out: dict[float, Clustering | None] = {}
    for q in qs:
        at = _threshold(hist, len(windows), n_part * float(1 - _exact(q) / 100))
        if at is None:
            out[q] = None
            continue
        if memo is not None and at in memo:
            out[q] = memo[at]
            continue
        if series is None:
            series = _WindowSeries(windows)
        out[q] = _clustering_at(series, *at)
        if memo is not None:
            memo[at] = out[q]
    return out


def percentile_intervals(
    hist: HistogramLike, qs: Iterable[float], *, min_ns: int | None, max_ns: int | None,
    parts: Iterable[ChannelLike] = (), level: float = DEFAULT_LEVEL,
) -> dict[float, PercentileInterval]:
    """The interval of each percentile in `qs` from `hist` (with its exact min/max).

    `parts`: the channel itself (or, for a merge, the channels merged) with their
    per-window maxima: when their samples above the percentile are significantly
    clustered, the interval is widened by the smallest theta found (`clustering`)."""
    lo_e, hi_e, cum = _cum(hist)
    n = int(cum[-1]) if len(cum) else 0
    parts = list(parts)
    qs = list(qs)
    batches = [_Batches(wh) for wh in (_window_hist_of(p) for p in parts) if wh is not None]
    # each part's clustering at every percentile at once: its windows prepared once
    per_part = [(part_clusterings(part, qs), True) if _has_windows(part) else ({}, False)
                for part in parts]
    out: dict[float, PercentileInterval] = {}
    for q in qs:
        value = percentile(hist, q, min_ns, max_ns)
        found: Clustering | None = None
        checked = False
        for found_at, has_windows in per_part:
            if not has_windows:
                continue
            checked = True
            c = found_at[q]
            if c is not None and (found is None or (c.significant and (
                    not found.significant or c.theta < found.theta))):
                found = c
        theta = found.theta if found is not None and found.significant else None
        batch: BatchDependence | None = None
        if value is not None:
            for b in batches:
                d = b.at(value)
                if d is not None and (batch is None or d.vif > batch.vif):
                    batch = d
        use_level = level
        if batch is not None:  # the batches' variance (never below independent), with t
            use_level = _t_level(level, batch.df)
            if batch.vif > 1:
                theta = min(theta if theta is not None else 1.0, 1 / batch.vif)
        low_r, up_r = (_widened_ranks(n, q, use_level, theta) if theta is not None
                       else rank_interval(n, q, use_level))

        def edge(rank: int | None, upper: bool) -> int | None:
            if rank is None or not n:
                return None
            if upper and rank == 1 and min_ns is not None:
                return min_ns
            if not upper and rank == n and max_ns is not None:
                return max_ns
            j = int(np.searchsorted(cum, rank, side="left"))
            v = int(hi_e[j]) if upper else int(lo_e[j])
            if max_ns is not None:
                v = min(v, max_ns)
            if min_ns is not None:
                v = max(v, min_ns)
            return v

        out[q] = PercentileInterval(q, level, n, value, edge(low_r, False), edge(up_r, True),
                                    low_r, up_r, theta, found, checked, batch)
    return out


def channel_intervals(ch: Any, qs: Iterable[float] = TAIL_PERCENTILES,
                      parts: Iterable[Any] | None = None,
                      level: float = DEFAULT_LEVEL) -> dict[float, PercentileInterval]:
    """`percentile_intervals` of a channel (anything with hist, min_ns, max_ns, windows);
    for a merged channel pass the channels it merges as `parts`."""
    return percentile_intervals(ch.hist, qs, min_ns=ch.min_ns, max_ns=ch.max_ns,
                                parts=[ch] if parts is None else parts, level=level)
