# SPDX-License-Identifier: MIT
"""Worst-case statistics from per-window maxima (extreme-value theory).

The engine records the maximum latency of every window (e.g. 1 s). By the
Fisher-Tippett-Gnedenko theorem, maxima of many samples follow approximately a
generalised extreme-value (GEV) distribution *if* the windows are independent
and identically distributed. We fit a GEV and a Gumbel (GEV with shape 0)
distribution by probability-weighted moments (Hosking, Wallis & Wood 1985),
which is closed-form and robust, and answer:

* the probability that latency exceeds a budget within an operating time T:
  ``1 - F(budget) ** (T / window)``; we report the larger (more pessimistic)
  of the GEV and Gumbel answers, because a fitted bounded tail (GEV shape > 0)
  is a strong claim that short runs cannot support;
* the typical (median) worst case within T;
* how long a run must be to support a claimed maximum M at confidence c, by
  the model-free zero-failure rule: with no window above M in a run of length
  L, the rate of exceedances is below 1/T at confidence c when
  ``L >= -ln(1 - c) * T`` (the "rule of three": 3 T at 95 %).

Goodness of fit: the Kolmogorov-Smirnov distance between the empirical and the
fitted distribution of the window maxima, and a tail check (is the largest
observed maximum plausible under the model?). Host stalls, SMIs or a second
mechanism make the maxima bimodal; the fit then fails and the report says so
instead of printing a confident number.

Pure numpy; numpy is imported by the functions that need it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from rtlab.results.model import Channel, RunResult

EULER = 0.5772156649015329
MIN_WINDOWS = 30
DAY_NS = 86_400 * 1_000_000_000
K_LIMIT = 0.9  # PWM shape estimates are clamped to [-K_LIMIT, K_LIMIT]
BOOT_RESAMPLES = 200
BOOT_SIZE = 20_000  # larger samples are bootstrapped m-out-of-n (a wider, safe interval)
EXTRAPOLATION_WARN = 100  # operating time / measured time beyond which we say so


def window_series(ch: Channel) -> tuple[np.ndarray, np.ndarray]:
    """(window indices, window maxima in ns) of a channel: integer arrays (views; int32
    or int64, see WindowMaxima).

    The last window is left out when it holds fewer than half the typical number of
    samples (the run ended inside it), so its maximum is not comparable."""
    import numpy as np

    w = ch.windows
    n = len(w)
    idx, maxima = w.index, w.max_ns
    if n > 1:
        step = max(1, n // 1000)
        typical = float(np.median(w.samples[::step]))
        if int(w.samples[-1]) * 2 < typical:
            idx, maxima = idx[:-1], maxima[:-1]
    return idx, maxima


def merged_window_maxima(channels: Sequence[Channel]) -> tuple[np.ndarray, int | None]:
    """Per window index, the largest maximum over all channels (ns), in index order."""
    _idx, val, window_ns = merged_window_series(channels)
    return val, window_ns


def run_window_maxima(result: RunResult) -> tuple[np.ndarray, int | None]:
    """The worst-channel window maxima of every phase of a run, phase after phase (phases
    run one after the other: their windows are never merged with each other)."""
    import numpy as np

    window_ns = next((c.window_ns for _, c in result.channels() if c.window_ns), None)
    parts = []
    for phase in result.phases:
        m, w = merged_window_maxima(phase.headline(result.probe))
        if w == window_ns and len(m):
            parts.append(m)
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)), window_ns


def merged_window_series(channels: Sequence[Channel]
                         ) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(indices, maxima over all channels per index, window_ns); channels whose window
    length differs from the first one's are left out."""
    import numpy as np

    window_ns = next((c.window_ns for c in channels if c.window_ns), None)
    series = [window_series(ch) for ch in channels if ch.window_ns == window_ns and ch.windows]
    series = [(i, v) for i, v in series if len(i)]
    if not series:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, window_ns
    first = series[0][0]
    if all(len(i) == len(first) and i[0] == first[0] and i[-1] == first[-1] for i, _ in series):
        return first, np.maximum.reduce([v for _, v in series]), window_ns
    idx = np.concatenate([i for i, _ in series])
    val = np.concatenate([v for _, v in series])
    lo = int(idx.min())
    out = np.full(int(idx.max()) - lo + 1, -1, dtype=np.int64)
    np.maximum.at(out, idx - lo, val)
    keep = np.nonzero(out >= 0)[0]
    return keep + lo, out[keep], window_ns


@dataclass(frozen=True)
class GevFit:
    """GEV in Hosking's parametrisation (x in µs): F(x) = exp(-(1 - k (x-mu)/sigma)^(1/k)).

    k < 0: heavy (Fréchet) tail, k = 0: Gumbel, k > 0: bounded tail (upper end mu + sigma/k).
    """

    mu: float
    sigma: float
    k: float

    def _t(self, x: float) -> float:
        if self.sigma <= 0:
            return 0.0 if x >= self.mu else math.inf
        if abs(self.k) < 1e-9:
            return math.exp(-(x - self.mu) / self.sigma)
        y = 1 - self.k * (x - self.mu) / self.sigma
        if y <= 0:
            return 0.0 if self.k > 0 else math.inf
        return y ** (1 / self.k)

    def cdf(self, x: float) -> float:
        return math.exp(-self._t(x))

    def exceed_within(self, x: float, blocks: float) -> float:
        """P(the maximum of `blocks` windows exceeds x)."""
        return -math.expm1(-blocks * self._t(x))

    def quantile(self, p: float) -> float:
        t = -math.log(p)
        if abs(self.k) < 1e-9:
            return self.mu - self.sigma * math.log(t)
        return self.mu + self.sigma * (1 - t ** self.k) / self.k


def _pwm(sorted_x: np.ndarray) -> tuple[float, float, float]:
    import numpy as np

    n = len(sorted_x)
    i = np.arange(n, dtype=np.float64)
    b0 = float(sorted_x.mean())
    # multiply and sum, not np.dot: BLAS threads spin on a busy machine (100x slower)
    b1 = float((i / (n - 1) * sorted_x).sum() / n)
    b2 = float((i * (i - 1) / ((n - 1) * (n - 2)) * sorted_x).sum() / n)
    return b0, b1, b2


def fit_gumbel(sorted_x: np.ndarray) -> GevFit:
    b0, b1, _ = _pwm(sorted_x)
    sigma = (2 * b1 - b0) / math.log(2)
    return GevFit(b0 - EULER * sigma, sigma, 0.0)


def fit_gev(sorted_x: np.ndarray) -> GevFit:
    """PWM estimate (Hosking et al. 1985); falls back to Gumbel when the shape is ~0."""
    b0, b1, b2 = _pwm(sorted_x)
    denom = 3 * b2 - b0
    if denom == 0 or 2 * b1 - b0 <= 0:
        return fit_gumbel(sorted_x)
    c = (2 * b1 - b0) / denom - math.log(2) / math.log(3)
    k = 7.8590 * c + 2.9554 * c * c
    if abs(k) < 1e-6:
        return fit_gumbel(sorted_x)
    k = max(min(k, K_LIMIT), -K_LIMIT)  # beyond this range PWM estimates are meaningless
    g = math.gamma(1 + k)
    sigma = (2 * b1 - b0) * k / (g * (1 - 2 ** -k))
    mu = b0 + sigma * (g - 1) / k
    return GevFit(mu, sigma, k)


@dataclass
class EvtEstimate:
    """The fitted models and the checks; all latencies in ns, times in ns."""

    n_windows: int
    window_ns: int
    observed_max_ns: int
    gev: GevFit | None = None
    gumbel: GevFit | None = None
    ks_distance: float | None = None
    ks_critical: float | None = None
    tail_p: float | None = None  # P(max of n windows >= observed max) under the model
    fit_ok: bool = False
    warnings: list[str] = field(default_factory=list)
    # (GEV, Gumbel) fitted to bootstrap resamples of the window maxima: the spread of any
    # answer over them is its sampling uncertainty (`interval`)
    resamples: list[tuple[GevFit, GevFit]] = field(default_factory=list, repr=False)

    @property
    def usable(self) -> bool:
        return self.gev is not None

    @property
    def measured_ns(self) -> int:
        return self.n_windows * self.window_ns

    @staticmethod
    def _p(gev: GevFit, gumbel: GevFit, x_us: float, blocks: float) -> float:
        return max(gev.exceed_within(x_us, blocks), gumbel.exceed_within(x_us, blocks))

    @staticmethod
    def _worst(gev: GevFit, gumbel: GevFit, p: float) -> float:
        return 1000 * max(gev.quantile(p), gumbel.quantile(p))

    def p_exceed(self, budget_ns: int, within_ns: int) -> float | None:
        """Probability that latency exceeds `budget_ns` at least once within `within_ns`."""
        if self.gev is None or self.gumbel is None:
            return None
        return self._p(self.gev, self.gumbel, budget_ns / 1000, within_ns / self.window_ns)

    def typical_worst_ns(self, within_ns: int) -> float | None:
        """Median of the maximum over `within_ns` (the pessimistic model of the two)."""
        if self.gev is None or self.gumbel is None:
            return None
        return self._worst(self.gev, self.gumbel, 0.5 ** (self.window_ns / within_ns))

    def interval(self, what: str, arg: int, within_ns: int,
                 level: float = 0.90) -> tuple[float, float] | None:
        """Central `level` bootstrap interval of p_exceed(arg, within) (what="p") or of
        typical_worst_ns(within) (what="worst"); None without resamples."""
        if not self.resamples:
            return None
        if what == "p":
            blocks = within_ns / self.window_ns
            vals = [self._p(g, u, arg / 1000, blocks) for g, u in self.resamples]
        else:
            p = 0.5 ** (self.window_ns / within_ns)
            vals = [self._worst(g, u, p) for g, u in self.resamples]
        vals.sort()
        lo = vals[int((1 - level) / 2 * (len(vals) - 1))]
        hi = vals[round((1 + level) / 2 * (len(vals) - 1))]
        return lo, hi

    def return_period_ns(self, level_ns: int) -> float | None:
        """Mean time between windows whose maximum exceeds `level_ns`."""
        if self.gev is None or self.gumbel is None:
            return None
        x = level_ns / 1000
        p = max(-math.expm1(-self.gev._t(x)), -math.expm1(-self.gumbel._t(x)))
        return math.inf if p <= 0 else self.window_ns / p

    def to_dict(self) -> dict[str, Any]:
        def fit(g):
            return (None if g is None else {"mu_us": g.mu, "sigma_us": g.sigma, "k": g.k})
        worst = self.interval("worst", 0, DAY_NS)
        return {"n_windows": self.n_windows, "window_ns": self.window_ns,
                "observed_max_ns": self.observed_max_ns,
                "typical_worst_24h_ns": self.typical_worst_ns(DAY_NS),
                "typical_worst_24h_interval_ns": list(worst) if worst else None,
                "gev": fit(self.gev),
                "gumbel": fit(self.gumbel), "ks_distance": self.ks_distance,
                "ks_critical": self.ks_critical, "tail_p": self.tail_p,
                "fit_ok": self.fit_ok, "warnings": list(self.warnings)}


def required_run_ns(within_ns: int, confidence: float = 0.95) -> float:
    """Model-free: run length without any exceedance of M that supports "M is exceeded
    less than once per `within_ns`" at `confidence` (zero-failure Poisson bound)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1): {confidence}")
    return -math.log(1 - confidence) * within_ns


def exceedances(maxima_ns: Iterable[int], level_ns: int) -> int:
    """Windows whose maximum is above `level_ns`."""
    import numpy as np

    arr = maxima_ns if isinstance(maxima_ns, np.ndarray) else np.array(list(maxima_ns))
    return int((arr > level_ns).sum())


def fit_window_maxima(maxima_ns: np.ndarray, window_ns: int | None) -> EvtEstimate:
    """Fit GEV and Gumbel to window maxima (ns) and check the fit."""
    import numpy as np

    n = len(maxima_ns)
    est = EvtEstimate(n, int(window_ns or 0), int(maxima_ns.max()) if n else 0)
    if not window_ns:
        est.warnings.append("no window maxima recorded: no extreme-value estimate")
        return est
    if n < MIN_WINDOWS:
        est.warnings.append(f"only {n} window maxima (need at least {MIN_WINDOWS}): "
                            "run longer for an extreme-value estimate")
        return est
    x = np.sort(maxima_ns.astype(np.float64) / 1000.0)
    if x[-1] == x[0]:
        est.warnings.append("all window maxima are equal: no spread to fit")
        return est
    est.gev = fit_gev(x)
    est.gumbel = fit_gumbel(x)
    # Kolmogorov-Smirnov distance to the fitted GEV, on at most 20000 order statistics.
    step = max(1, n // 20000)
    xs = x[::step]
    m = len(xs)
    ranks = np.arange(step, step * m + 1, step, dtype=np.float64)[:m]
    cdf = np.array([est.gev.cdf(float(v)) for v in xs])
    d = float(max(np.max(np.abs(ranks / n - cdf)), np.max(np.abs((ranks - step) / n - cdf))))
    est.ks_distance = d
    # 1.36/sqrt(n) is the 5 % critical value with known parameters; with estimated
    # parameters the true one is smaller, so this is lenient. Long runs make any tiny
    # deviation "significant", hence the floor of 0.05 (a visible misfit).
    est.ks_critical = max(1.36 / math.sqrt(n), 0.05)
    # Tail check: how plausible is the observed largest maximum under the model?
    est.tail_p = est.gev.exceed_within(float(x[-1]) - 1e-9, n)
    est.fit_ok = True
    if d > est.ks_critical:
        est.fit_ok = False
        est.warnings.append(
            f"the window maxima do not follow an extreme-value distribution (KS distance "
            f"{d:.3f} > {est.ks_critical:.3f}): the maxima probably come from more than one "
            "mechanism (e.g. host/VM stalls or SMIs on top of the normal tail); do not trust "
            "the estimates below, find and remove the second mechanism first")
    if est.tail_p < 1e-3:
        est.fit_ok = False
        est.warnings.append(
            f"the largest observed maximum ({x[-1]:.1f} µs) is implausible under the fitted "
            f"model (p = {est.tail_p:.1e}): rare events beyond the bulk of the maxima; the "
            "model underestimates the risk of such spikes")
    if est.gev.k > 0:
        est.warnings.append(
            f"the GEV fit has a bounded tail (shape k = {est.gev.k:.2f}); the estimates use the "
            "more pessimistic of GEV and Gumbel")
    elif est.gev.k <= -0.5:
        est.warnings.append(
            f"the window maxima have a very heavy tail (GEV shape k = {est.gev.k:.2f}"
            + (", at the limit of the fit" if est.gev.k <= -K_LIMIT + 1e-9 else "")
            + "): rare huge maxima dominate, every extrapolated number grows steeply with "
            "the operating time and is very uncertain (see the intervals)")
    factor = DAY_NS / est.measured_ns
    if factor > EXTRAPOLATION_WARN:
        est.warnings.append(
            f"24 h is {factor:,.0f} times the measured {est.measured_ns / 1e9:,.0f} s: the "
            "24-hour numbers extrapolate far beyond the data; measure longer before quoting "
            "them")
    _bootstrap(est, x)
    return est


def _bootstrap(est: EvtEstimate, sorted_x: np.ndarray, seed: int = 20240607) -> None:
    """Refit GEV and Gumbel to resamples (with replacement) of the window maxima. Sorted
    input and sorted indices give sorted resamples without sorting values. Above
    BOOT_SIZE windows, resamples of BOOT_SIZE (m-out-of-n): the interval is wider than
    the true one, never narrower."""
    import numpy as np

    n = len(sorted_x)
    m = min(n, BOOT_SIZE)
    rng = np.random.default_rng(seed)
    fits = []
    for _ in range(BOOT_RESAMPLES):
        xs = sorted_x[np.sort(rng.integers(0, n, m))]
        if xs[-1] == xs[0]:
            continue
        fits.append((fit_gev(xs), fit_gumbel(xs)))
    est.resamples = fits


def estimate(channels: Sequence[Channel]) -> EvtEstimate:
    """Extreme-value estimate of the worst channel per window (all channels merged)."""
    maxima, window_ns = merged_window_maxima(channels)
    return fit_window_maxima(maxima, window_ns)
