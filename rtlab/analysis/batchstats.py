# SPDX-License-Identifier: MIT
"""Batch-means primitives shared by percentile intervals (rtlab.analysis.stats) and
comparisons (rtlab.analysis.compare_stats): Student's t distribution, the variance of a
ratio estimated from units (batches of consecutive windows, or runs), and the coarse
per-window histogram layout those batches are read from."""

from __future__ import annotations

import math

import numpy as np

from rtlab.results.histogram import LogLinHistogram, bucket_bounds

MIN_BATCHES = 4  # fewer batches than this: no lag-1 correction of their variance


# Student t -------------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-12:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
           + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) of Student's t with df degrees of freedom (df = inf: normal)."""
    if not math.isfinite(df) or df > 1e6:
        return 0.5 * math.erfc(t / math.sqrt(2))
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_ppf(p: float, df: float) -> float:
    """The p-quantile of Student's t (bisection on t_sf)."""
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1.0 - p:
        hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if t_sf(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10 * hi:
            break
    return 0.5 * (lo + hi)


def ratio_var(y: np.ndarray, x: np.ndarray, series: bool = False) -> tuple[float, int]:
    """Variance and degrees of freedom of sum(y)/sum(x) from units (batches or runs):
    the ratio estimator's linearisation, (B / (B - 1)) sum (y - R x)^2 / (sum x)^2.
    `y` may have a second axis (several statistics at once). `series`: the units are
    consecutive batches; what still correlates neighbouring batches (dependence longer
    than a batch) is added back as (1 + 2 rho1), rho1 their lag-1 autocorrelation
    (corrected for its -1/B bias, at least 0)."""
    b = len(x)
    if b < 2:
        return math.inf, 0
    tot = float(x.sum())
    r = y.sum(axis=0) / tot
    resid = y - (r * x[:, None] if y.ndim == 2 else r * x)
    ss = (resid ** 2).sum(axis=0)
    v = b / (b - 1) * ss / tot ** 2
    if series and b >= MIN_BATCHES:
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = (resid[1:] * resid[:-1]).sum(axis=0) / ss + 1.0 / b
        rho = np.clip(np.nan_to_num(rho, nan=0.0), 0.0, 0.9)
        v = v * (1 + 2 * rho)
    return v, b - 1



def coarse_edges(sub_bits: int, nbuckets: int) -> np.ndarray:
    """Inclusive upper edges of the first `nbuckets` coarse buckets (loglin layout)."""
    out = []
    for i in range(nbuckets):
        lo, w = bucket_bounds(i, sub_bits)
        out.append(lo + w - 1)
    return np.asarray(out, dtype=np.float64)


def hist_arrays(hist: LogLinHistogram) -> tuple[np.ndarray, np.ndarray]:
    """(inclusive upper edges, cumulative counts) of a histogram's non-empty buckets."""
    his, counts = [], []
    for b in hist.buckets():
        his.append(b.hi)
        counts.append(b.count)
    return (np.asarray(his, dtype=np.float64), np.cumsum(np.asarray(counts, dtype=np.int64)))
