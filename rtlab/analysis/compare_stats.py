# SPDX-License-Identifier: MIT
"""Intervals for comparisons that hold when samples depend on each other.

Latency samples are not independent: a busy kworker, a thermal event or the host
makes whole seconds slow (bursts), and a slowly wandering state makes neighbours
alike (autocorrelation). A test that counts samples as independent is then far too
sure of itself (docs/report.md, "Comparisons"). Here the unit is not the sample but a
*batch* of consecutive windows (batch means: Conway 1963, Schmeiser 1982; the block
idea of Künsch 1989): within a run, windows are grouped into B batches of L windows,
and the variance of a statistic is estimated from how much it varies between batches.
Runs are never mixed inside a batch, but the batches of all runs of a configuration are
pooled: k runs give k times the batches of one, as one k-times longer run does. When a
configuration has several runs, the run-to-run variance is estimated as well (runs as the
unit, k - 1 degrees of freedom) and replaces the batches' only when it is significantly
larger than the batches predict (an F test at RUNS_TEST_LEVEL: a random run effect,
e.g. boot-to-boot differences, is then evidenced and the runs are the honest unit).
Taking the larger of the two every time, as before, let one degree of freedom decide
half of all two-run comparisons: two 1-min runs had less power than one
(bench/calibrate_runs.py).

Percentiles go through their exceedance fraction (Woodruff 1952): the standard error of
F(t) at the percentile t is estimated from the batches, and the interval of the
percentile is [Q(q - se), Q(q + se)] read off the run's fine histogram. What the
batches need per window is the count of samples at or below t: newer engines record a
coarse per-window histogram (`window_hist`, 4 buckets per power of two), and the
variance inflation factor (VIF: batch variance over the independent-sample variance)
measured at the coarse edges next to t is interpolated to t. The standard error of the
log percentile is the mean of the two Woodruff half-widths; a comparison's interval
takes each bound from the sides it is about (how far B may lie below and A above, or
the opposite). These choices are unbiased where the older ones (the larger VIF and the
larger half-width) overstated the standard error 1.2-2x and lost power for nothing
(bench/oracle_power.py; docs/report.md, "Calibration"). Older runs have only window
maxima: then the VIF is bounded by the samples per window (a window counts as one
observation: a fraction in [0, 1] varies at most as a single Bernoulli trial) times the
inflation between windows seen in their maxima — valid, and conservative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rtlab.analysis.batchstats import (
    MIN_BATCHES,
    betainc,
    coarse_edges,
    hist_arrays,
    ratio_var,
    t_ppf,
    t_sf,
)
from rtlab.results.model import Channel

Z90 = 1.2815515655446004  # one-sided z of 90 % power
SE_LOG_FLOOR = 0.004  # half a fine histogram bucket (2**-7 wide): the resolution
MIN_EVENTS = 10.0  # independent tail events an interval needs (point estimate) ...
MIN_EVENTS_LOWER = 5.0  # ... or, from enough batches, their 90 % lower bound
# Below this many batches (B - 1; a run under ~7 min) the tail events are counted with
# the larger VIF of the two coarse edges: with 3-s bursts about once a minute, 2-run
# 1-min configurations otherwise showed p99/p99.9 intervals that covered only 85-88 %
# (a run without a burst cannot know about them, and 10 batches underrate a few bursts)
FEW_BATCHES = 20
# The run-to-run variance replaces the batches' only when larger at this level (F test, one
# sided): with no run effect it costs at most this share of the tests the batches' power
# (5 % cost two 2-run configurations ~10 % of their power, more than they gain)
RUNS_TEST_LEVEL = 0.01


# the data of one configuration ---------------------------------------------------------------
@dataclass
class RunWindows:
    """One run's windows, all headline channels merged per window (phase after phase):
    samples, maximum, and where recorded the sum and the coarse cumulative counts."""

    n: np.ndarray                 # (W,) samples per window
    maxima: np.ndarray            # (W,) maximum per window (ns)
    sums: np.ndarray | None = None  # (W,) sum per window (ns)
    cum: np.ndarray | None = None   # (W, K) samples <= edges[k]
    samples: int = 0              # the run's samples (its histogram total)
    sum_ns: int = 0               # the run's exact sum
    hist_hi: np.ndarray | None = None  # the run's fine histogram: bucket upper edges
    hist_cum: np.ndarray | None = None  # and cumulative counts


@dataclass
class Units:
    """A configuration's data for the variance of its statistics."""

    runs: list[RunWindows]
    edges: np.ndarray | None  # (K,) inclusive upper edges of the coarse buckets
    tier: str  # "window-hist" | "window-max" | "runs" | "none"

    @property
    def windows(self) -> int:
        return sum(len(r.n) for r in self.runs)

    def batch_len(self) -> int:
        """Windows per batch: about the square root of the windows, so that both the
        batches' length (bias) and their number (variance) grow with the run."""
        if not self.runs:
            return 1
        w = self.windows
        shortest = min(len(r.n) for r in self.runs)
        L = max(1, min(round(math.sqrt(w)), shortest))
        if len(self.runs) > 1 and shortest:
            # several runs: batches that tile the shortest run evenly (k runs of W windows
            # then give the batches of one k x W run: 8 1-min runs 24 batches of 20, not
            # 16 of 22 with a remainder of 16 in each run's last)
            L = max(1, shortest // max(1, round(shortest / L)))
        return L

    def batch_starts(self, run: RunWindows, L: int) -> np.ndarray:
        nb = max(1, len(run.n) // L)
        return np.arange(nb) * L

    def batches(self, per_run: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(Y_b, X_b): per batch the sums of `per_run` values (leading axis: windows) and
        the samples; the remainder of a run joins its last batch."""
        L = self.batch_len()
        ys, xs = [], []
        for r, v in zip(self.runs, per_run, strict=True):
            if not len(r.n):
                continue
            st = self.batch_starts(r, L)
            ys.append(np.add.reduceat(v, st, axis=0))
            xs.append(np.add.reduceat(r.n.astype(np.float64), st))
        if not ys:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(ys), np.concatenate(xs)


def _quantile(hi: np.ndarray, cum: np.ndarray, p: float, lo_v: float, hi_v: float) -> float:
    """The p-quantile (0..1) of a histogram given as upper edges and cumulative counts,
    clipped to [min, max]."""
    n = cum[-1]
    rank = min(max(math.ceil(p * n - 1e-9), 1), n)
    v = float(hi[np.searchsorted(cum, rank)])
    return min(max(v, lo_v), hi_v)


@dataclass
class Estimate:
    """A statistic of one configuration with the standard error of its logarithm."""

    value: float | None
    se_log: float | None  # None: no interval (nothing to estimate the variance from)
    df: float = math.inf
    tier: str = "none"
    short: float | None = None  # > 1: the data hold too few independent events: ~x more
    note: str = ""
    # one-sided standard errors of the log (Woodruff: how far the truth may lie below /
    # above the estimate); None: se_log on that side
    se_below: float | None = None
    se_above: float | None = None

    def side(self, above: bool) -> float:
        s = self.se_above if above else self.se_below
        return s if s is not None else float(self.se_log or 0.0)


def _edge_vifs(units: Units, t: float, n_total: int
               ) -> tuple[list[tuple[float, float, float]], int] | None:
    """(edge, VIF of F(edge), df of that VIF) at the coarse edges on both sides of t that
    carry information (some samples on each side), with the batches' degrees of freedom.
    The df of a VIF is that of a variance from batches whose sums are not normal:
    2 / (2 / (B - 1) + kappa / B), kappa the excess kurtosis of the batches' residuals
    (Var s^2 = sigma^4 (2 / (B - 1) + kappa / B)). Rare exceedances in clusters make
    kappa large: most batches hold none, a few many, and the variance they give is far
    less certain than B - 1 degrees of freedom claim."""
    edges = units.edges
    if edges is None:
        return None
    y, x = units.batches([r.cum for r in units.runs if r.cum is not None])
    if len(x) < 2:
        return None
    f = y.sum(axis=0) / x.sum()
    var, df = ratio_var(y, x, series=True)
    k_hi = int(np.searchsorted(edges, t, side="left"))
    b = len(x)
    out = []
    for k in (k_hi - 1, k_hi):
        if not 0 <= k < len(edges):
            continue
        fk = float(f[k])
        if min(fk, 1 - fk) * n_total >= 1:
            e = y[:, k] - fk * x
            m2 = float(np.mean(e * e))
            kappa = float(np.mean(e ** 4)) / (m2 * m2) - 3 if m2 > 0 else 0.0
            dfk = 2 / (2 / max(df, 1) + max(kappa, 0.0) / b)
            out.append((float(edges[k]), float(var[k]) / (fk * (1 - fk) / n_total), dfk))
    return (out, df) if out else None


def _vif_at(units: Units, t: float, q: float, n_total: int) -> tuple[float, int] | None:
    """The variance inflation factor of F(t) measured at the coarse edges next to t
    (the larger of the two that carry information: an upper bound), with its degrees of
    freedom."""
    got = _edge_vifs(units, t, n_total)
    if got is None:
        return None
    return max(1.0, max(v for _, v, _ in got[0])), got[1]


def _vif_between(units: Units, t: float, q: float, n_total: int
                 ) -> tuple[float, float] | None:
    """The VIF of F(t) interpolated between the coarse edges next to t (geometrically,
    in log t; the one edge that carries information when only one does), at least 1,
    with its degrees of freedom (interpolated alike; kurtosis-corrected, _edge_vifs: the
    batches' B - 1 made the t-test too sure of few clustered tail events, 1.2-1.3 %
    false positives at p99.9 in 10 min and p99.99 in 1 h of AR(1) phi 0.99). In a tail
    the VIF changes fast from edge to edge (with 3-s bursts ~4x between the edges around
    p99.9, which are 19 % apart): the larger of the two overstates the variance, the
    interpolation does not (calibration: A/A spread of the estimates,
    bench/oracle_power.py)."""
    got = _edge_vifs(units, t, n_total)
    if got is None:
        return None
    pts, _ = got
    if len(pts) == 1:
        return max(1.0, pts[0][1]), pts[0][2]
    (e0, v0, _), (e1, v1, _) = pts
    lo = math.log(max(e0, 1.0))
    w = min(max((math.log(max(t, 1.0)) - lo) / (math.log(max(e1, 1.0)) - lo), 0.0), 1.0) \
        if e1 > e0 else 0.5
    v = math.exp((1 - w) * math.log(max(v0, 1e-12)) + w * math.log(max(v1, 1e-12)))
    df = math.exp((1 - w) * math.log(pts[0][2]) + w * math.log(pts[1][2]))
    return max(1.0, v), df


def min_events(df: float) -> float:
    """The independent tail events (point estimate) an interval from batches needs: 10,
    or fewer when so many batches measured their variance that a one-sided 90 % lower
    bound of the events (chi-square with df degrees of freedom, Wilson-Hilferty) is still
    MIN_EVENTS_LOWER: 6.5 with 60 batches (1 h), 10 up to ~12 batches (under 3 min).
    Below it the normal approximation of F(t) fails and the VIF of few, clustered
    exceedances is mostly underestimated (calibration: 1-min A/A intervals then cover
    only 73-91 %)."""
    if not math.isfinite(df) or df <= 0:
        return MIN_EVENTS
    a = 2 / (9 * df)
    lower = max(1 - a - Z90 * math.sqrt(a), 1e-9) ** 3  # chi2(0.10, df) / df
    return min(MIN_EVENTS, MIN_EVENTS_LOWER / lower)


def _woodruff_se(halves: dict[str, float]) -> tuple[float, float, float]:
    """(se_log, se_below, se_above) from the Woodruff half-widths read off at q - se
    ("below": how far the truth may lie below the estimate) and q + se ("above"), each at
    least SE_LOG_FLOOR; a side that cannot be read (q - se <= 0 or q + se >= 1) takes
    the other's. se_log, the symmetric summary, is their mean: the central difference of
    log Q(q), i.e. se over the density (the larger of the two overstates it wherever log Q
    is curved, as in every tail, or the histogram's buckets are coarse against the
    interval). A test uses the side its question needs (compare_estimates), which keeps
    a bimodal distribution honest (a percentile inside a burst's mode: the truth may lie
    far below, at the main mode)."""
    lo = halves.get("below", halves.get("above", 0.0))
    hi = halves.get("above", lo)
    return (max((lo + hi) / 2, SE_LOG_FLOOR), max(lo, SE_LOG_FLOOR), max(hi, SE_LOG_FLOOR))


def _window_inflation(units: Units) -> tuple[float, int]:
    """How much the window maxima vary between batches beyond independent windows
    (>= 1), from log window maxima."""
    logm = [np.log(np.maximum(r.maxima.astype(np.float64), 1.0)) for r in units.runs]
    ones = [np.ones(len(r.n)) for r in units.runs]
    L = units.batch_len()
    ybs, nbs = [], []
    for lm, o, r in zip(logm, ones, units.runs, strict=True):
        if not len(lm):
            continue
        st = units.batch_starts(r, L)
        ybs.append(np.add.reduceat(lm, st))
        nbs.append(np.add.reduceat(o, st))
    yb, nb = np.concatenate(ybs), np.concatenate(nbs)
    allm = np.concatenate(logm)
    s2 = float(allm.var(ddof=1)) if len(allm) > 1 else 0.0
    if len(nb) < 2 or s2 <= 0:
        return 1.0, max(len(nb) - 1, 0)
    v, df = ratio_var(yb, nb, series=True)
    return max(1.0, float(v) * len(allm) / s2), df


def f_sf(f: float, d1: float, d2: float) -> float:
    """P(F > f) of Fisher's F with (d1, d2) degrees of freedom (d2 = inf: chi-square)."""
    if f <= 0:
        return 1.0
    d2 = min(d2, 1e7) if math.isfinite(d2) else 1e7
    return betainc(d2 / 2, d1 / 2, d2 / (d2 + d1 * f))


def with_runs(var: float | None, df: float, runs: tuple[float, int] | None
              ) -> tuple[float | None, float, bool]:
    """(variance, degrees of freedom, from the runs?) of a statistic given its batches'
    variance `var` (None: none) and the run-to-run one `runs` (variance, k - 1; None: one
    run). Both estimate the same variance when runs differ only by what happens inside
    them; the runs' replaces the batches' only when significantly larger (F test at
    RUNS_TEST_LEVEL): a run effect is then evidenced, and with k - 1 degrees of freedom
    the interval is honestly wide. Otherwise the batches of all runs decide, with their
    degrees of freedom (k runs: k times the batches of one)."""
    if runs is None or runs[1] < 1 or not math.isfinite(runs[0]):
        return var, df, False
    if var is None or not math.isfinite(var):
        return runs[0], runs[1], True
    if runs[0] <= var:
        return var, df, False
    if var <= 0 or f_sf(runs[0] / var, runs[1], max(df, 1.0)) < RUNS_TEST_LEVEL:
        return runs[0], runs[1], True
    return var, df, False


def _runs_var_fraction(units: Units, t: float) -> tuple[float, int] | None:
    """Run-to-run variance of F(t) (several runs)."""
    if len(units.runs) < 2 or any(r.hist_hi is None for r in units.runs):
        return None
    y = np.array([float(r.hist_cum[np.searchsorted(r.hist_hi, t, side="right") - 1])
                  if np.searchsorted(r.hist_hi, t, side="right") > 0 else 0.0
                  for r in units.runs])
    x = np.array([float(r.samples) for r in units.runs])
    v, df = ratio_var(y, x)
    return float(v), df


def _few_batches(units: Units) -> bool:
    """Fewer than FEW_BATCHES + 1 batches over all runs (a run under ~7 min)."""
    L = units.batch_len()
    return sum(len(units.batch_starts(r, L)) for r in units.runs if len(r.n)) - 1 \
        < FEW_BATCHES


def percentile_estimate(units: Units, q: float, value: float | None, hist_hi: np.ndarray,
                        hist_cum: np.ndarray, lo_v: float, hi_v: float) -> Estimate:
    """Percentile q (0..1) of the merged histogram with a dependence-aware standard error
    of its logarithm (Woodruff interval of width +-1 se)."""
    if value is None or not len(hist_cum):
        return Estimate(value, None)
    n = int(hist_cum[-1])
    qq = q if 0 < q < 1 else 0.5
    iid = qq * (1 - qq) / n
    vif = _vif_between(units, value, qq, n) if units.tier == "window-hist" else None
    few = _few_batches(units)
    if vif is not None and few:
        # few batches: the VIF behind the interval is the larger of the two edges, the one
        # the events guard below counts with. Interpolated, the interval shown only when
        # that guard passed (i.e. when the batches happened to underrate the VIF) was too
        # narrow: 1-min AR(1) phi 0.99 p99 covered 95-97 % (stated 99 %) where shown
        top = _vif_at(units, value, qq, n)
        if top is not None:
            vif = (max(vif[0], top[0]), vif[1])
    tier = units.tier
    var: float | None = None
    df: float = math.inf
    note = ""
    if vif is not None:
        var, df = vif[0] * iid, vif[1]
    elif units.tier in ("window-hist", "window-max") and units.windows >= 2 * MIN_BATCHES:
        per_window = n / units.windows
        infl, df = _window_inflation(units)
        var = max(1.0, per_window * infl) * iid
        tier = "window-max"
        note = "no per-window histograms: a window counts as one observation"
    var, df, from_runs = with_runs(var, df, _runs_var_fraction(units, value))
    if from_runs:
        tier = "runs"
    if var is None or not math.isfinite(var) or df < 1:
        return Estimate(value, None, tier="none")
    se_f = math.sqrt(var)
    halves: dict[str, float] = {}
    lo_q, hi_q = qq - se_f, qq + se_f
    if lo_q > 0:
        halves["below"] = math.log(value) - math.log(max(_quantile(hist_hi, hist_cum, lo_q,
                                                                   lo_v, hi_v), 1.0))
    if hi_q < 1:
        halves["above"] = math.log(_quantile(hist_hi, hist_cum, hi_q, lo_v, hi_v)) \
            - math.log(value)
    if not halves:
        return Estimate(value, None, tier=tier)
    se_log, se_below, se_above = _woodruff_se(halves)
    # independent tail events behind it: too few and the normal approximation fails
    events = qq * (1 - qq) * min(qq, 1 - qq) / var if var > 0 else math.inf
    if tier == "window-hist" and few:
        # few batches: their VIF is too uncertain to trust the interpolation for this
        # guard; the larger VIF of the two edges decides (see FEW_BATCHES)
        top = _vif_at(units, value, qq, n)
        if top is not None:
            events = min(events, n * min(qq, 1 - qq) / top[0])
    need = min_events(df) if tier == "window-hist" else MIN_EVENTS
    short = need / events if events < need else None
    return Estimate(value, se_log, df, tier, short, note, se_below, se_above)


def mean_estimate(units: Units, value: float | None) -> Estimate:
    if value is None or value <= 0:
        return Estimate(value, None)
    var, df, tier = None, 0, "none"
    if units.tier == "window-hist" and all(r.sums is not None for r in units.runs):
        y, x = units.batches([r.sums.astype(np.float64) for r in units.runs])
        if len(x) >= 2:
            v, df = ratio_var(y, x, series=True)
            var, tier = float(v), "window-hist"
    if len(units.runs) >= 2:
        y = np.array([float(r.sum_ns) for r in units.runs])
        x = np.array([float(r.samples) for r in units.runs])
        v, d = ratio_var(y, x)
        var, df, from_runs = with_runs(var, df, (float(v), d))
        if from_runs:
            tier = "runs"
    if var is None or df < 1:
        return Estimate(value, None, note="no per-window sums (older engine or import) and "
                        "one run: the mean has no interval")
    return Estimate(value, max(math.sqrt(var) / value, SE_LOG_FLOOR / 4), df, tier)


def window_max_estimate(units: Units) -> Estimate:
    """The median window maximum with the standard error of its logarithm (Woodruff on
    the window maxima; batches of consecutive windows)."""
    allm = np.concatenate([r.maxima for r in units.runs]).astype(np.float64) \
        if units.runs else np.zeros(0)
    if len(allm) < 2 * MIN_BATCHES:
        return Estimate(float(np.median(allm)) if len(allm) else None, None)
    srt = np.sort(allm)

    def quant(p: float) -> float:
        return float(srt[min(max(math.ceil(p * len(srt)) - 1, 0), len(srt) - 1)])

    m = float(np.median(allm))
    ind = [(r.maxima <= m).astype(np.float64) for r in units.runs]
    L = units.batch_len()
    ys, xs = [], []
    for v, r in zip(ind, units.runs, strict=True):
        if not len(v):
            continue
        st = units.batch_starts(r, L)
        ys.append(np.add.reduceat(v, st))
        xs.append(np.add.reduceat(np.ones(len(v)), st))
    y, x = np.concatenate(ys), np.concatenate(xs)
    var, df = ratio_var(y, x, series=True)
    iid = 0.25 / len(allm)
    var = max(float(var), iid)
    tier = "window-max"
    if len(units.runs) >= 2:
        yr = np.array([float(v.sum()) for v in ind])
        xr = np.array([float(len(v)) for v in ind])
        vr, dr = ratio_var(yr, xr)
        got, df, from_runs = with_runs(var, df, (float(vr), dr))
        var = float(got) if got is not None else var
        if from_runs:
            tier = "runs"
    if df < 1:
        return Estimate(m, None)
    se = math.sqrt(var)
    halves: dict[str, float] = {}
    if 0.5 - se > 0:
        halves["below"] = math.log(max(m, 1.0)) - math.log(max(quant(0.5 - se), 1.0))
    if 0.5 + se < 1:
        halves["above"] = math.log(max(quant(0.5 + se), 1.0)) - math.log(max(m, 1.0))
    if not halves:
        return Estimate(m, SE_LOG_FLOOR, df, tier)
    se_log, se_below, se_above = _woodruff_se(halves)
    return Estimate(m, se_log, df, tier, se_below=se_below, se_above=se_above)


@dataclass(frozen=True)
class Test:
    """The change B/A of one statistic: ratio, its interval at `level`, p-value, and the
    factor of more data (longer or more runs) needed to detect a `target` change with
    90 % power (None: already enough)."""

    ratio: float
    lo: float
    hi: float
    p: float
    df: float
    needs: float | None


def _welch(va: float, vb: float, da: float, db: float) -> float:
    df = (va + vb) ** 2 / ((va * va / da if math.isfinite(da) else 0.0)
                            + (vb * vb / db if math.isfinite(db) else 0.0) or 1e-300)
    return max(1.0, min(df, 1e7))


def compare_estimates(a: Estimate, b: Estimate, alpha: float, target: float) -> Test | None:
    """Welch's t on d = log(B/A). Each bound of the interval uses the sides of the two
    estimates it is about: the lower bound how far B's truth may lie below its estimate
    and A's above, the upper bound the opposite; the p-value is the one of the bound on
    the side of 1 (so p < alpha exactly when the interval excludes 1)."""
    if (a.value is None or b.value is None or a.se_log is None or b.se_log is None
            or a.value <= 0 or b.value <= 0):
        return None
    d = math.log(b.value / a.value)
    da, db = max(a.df, 1.0), max(b.df, 1.0)
    bounds = []
    for sign, va, vb in ((-1, a.side(True) ** 2, b.side(False) ** 2),
                         (1, a.side(False) ** 2, b.side(True) ** 2)):
        df = _welch(va, vb, da, db)
        se = math.sqrt(va + vb)
        bounds.append((d + sign * t_ppf(1 - alpha / 2, df) * se, se, df))
    (lo, se_dn, df_dn), (hi, se_up, df_up) = bounds
    se, df = (se_dn, df_dn) if d >= 0 else (se_up, df_up)
    p = min(1.0, 2 * t_sf(abs(d) / se, df))
    # to detect a change of `target` either way: the symmetric standard errors
    va, vb = a.se_log ** 2, b.se_log ** 2
    df_s = _welch(va, vb, da, db)
    detect = (t_ppf(1 - alpha / 2, df_s) + Z90) * math.sqrt(va + vb)
    want = math.log1p(target)
    needs = (detect / want) ** 2 if detect > want else None
    short = max(a.short or 0.0, b.short or 0.0)
    if short > 1:
        needs = max(needs or 1.0, short)
    return Test(math.exp(d), math.exp(lo), math.exp(hi), p, df, needs)


# from results ---------------------------------------------------------------------------
def run_windows(result, shape, window_ns: int | None) -> tuple[RunWindows, int | None]:  # type: ignore[no-untyped-def]
    """One run's windows with all headline channels (of its probe's `shape`) merged per
    window, phase after phase (windows of another length than `window_ns` are left out),
    and the sub_bits of its per-window histograms (None when some channel has none or
    they do not add up)."""
    ns, mx, sm, cums = [], [], [], []
    sub_bits: int | None = -1
    maxb = 0
    chans_all = []
    for phase in result.phases:
        chans = [c for c in phase.headline(shape) if c.windows
                 and (window_ns is None or c.window_ns == window_ns)]
        chans_all += phase.headline(shape)
        if not chans:
            continue
        idx = np.unique(np.concatenate([c.windows.index.astype(np.int64) for c in chans]))
        n = np.zeros(len(idx), dtype=np.int64)
        m = np.zeros(len(idx), dtype=np.int64)
        s = np.zeros(len(idx), dtype=np.int64)
        dense_parts = []
        for c in chans:
            pos = np.searchsorted(idx, c.windows.index.astype(np.int64))
            np.add.at(n, pos, c.windows.samples.astype(np.int64))
            np.maximum.at(m, pos, c.windows.max_ns.astype(np.int64))
            wh = c.window_hist
            ok = (wh is not None and len(wh) == len(c.windows)
                  and np.array_equal(wh.index, c.windows.index.astype(np.int64))
                  and np.array_equal(wh.samples(), c.windows.samples.astype(np.int64)))
            if not ok:
                sub_bits = None
                continue
            if sub_bits == -1:
                sub_bits = wh.sub_bits
            elif sub_bits != wh.sub_bits:
                sub_bits = None
                continue
            np.add.at(s, pos, wh.sum_ns)
            d = wh.dense()
            maxb = max(maxb, d.shape[1])
            dense_parts.append((pos, d))
        ns.append(n)
        mx.append(m)
        sm.append(s)
        if sub_bits is not None and sub_bits != -1:
            cums.append((len(idx), dense_parts))
    merged = Channel.merged("all", chans_all)
    hi, cum = hist_arrays(merged.hist)
    rw = RunWindows(
        np.concatenate(ns) if ns else np.zeros(0, dtype=np.int64),
        np.concatenate(mx) if mx else np.zeros(0, dtype=np.int64),
        samples=merged.samples, sum_ns=merged.sum_ns, hist_hi=hi, hist_cum=cum)
    if sub_bits is None or sub_bits == -1 or not ns:
        return rw, None
    blocks = []
    for nwin, parts in cums:
        d_all = np.zeros((nwin, maxb), dtype=np.int64)
        for pos, d in parts:
            np.add.at(d_all, (pos[:, None], np.arange(d.shape[1])[None, :]), d)
        blocks.append(d_all)
    dense = np.concatenate(blocks)
    rw.sums = np.concatenate(sm)
    rw.cum = np.cumsum(dense, axis=1).astype(np.float64)
    return rw, sub_bits


def config_units(runs, shapes, window_ns: int | None) -> Units:  # type: ignore[no-untyped-def]
    """The units of a configuration's runs (`shapes`: their probes'): batches of windows
    of per-window histograms when every run has them, else of window maxima, else runs."""
    rws, bits = [], []
    for r, shape in zip(runs, shapes, strict=True):
        rw, b = run_windows(r, shape, window_ns)
        rws.append(rw)
        bits.append(b)
    has_windows = all(len(rw.n) for rw in rws)
    if has_windows and all(b is not None for b in bits) and len(set(bits)) == 1:
        k = max(rw.cum.shape[1] for rw in rws)
        for rw in rws:  # same number of coarse edges everywhere (pad with the total)
            if rw.cum.shape[1] < k:
                pad = np.repeat(rw.cum[:, -1:], k - rw.cum.shape[1], axis=1)
                rw.cum = np.concatenate([rw.cum, pad], axis=1)
        return Units(rws, coarse_edges(bits[0], k), "window-hist")
    for rw in rws:
        rw.cum = None
        rw.sums = None
    if has_windows:
        return Units(rws, None, "window-max")
    return Units(rws, None, "runs" if len(rws) >= 2 else "none")
