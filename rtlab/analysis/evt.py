# SPDX-License-Identifier: MIT
"""Worst-case statistics from per-window maxima (extreme-value theory).

The engine records the maximum latency of every window (e.g. 1 s). By the
Fisher-Tippett-Gnedenko theorem, maxima of many samples follow approximately a
generalised extreme-value (GEV) distribution when the windows come from one
stationary mechanism. We fit a GEV and a Gumbel (GEV with shape 0) distribution
by probability-weighted moments (Hosking, Wallis & Wood 1985; closed form,
robust) and answer:

* the probability that latency exceeds a budget within an operating time T:
  ``1 - F(budget) ** (T / window)``;
* the typical (median) worst case within T;
* how long a run must be to support a claimed maximum M at confidence c, by
  the model-free zero-failure rule (``L >= -ln(1 - c) * T``: 3 T at 95 %).

Which model is quoted: the more pessimistic of GEV and Gumbel, unless the data
show a bounded tail (GEV shape k > 0) with evidence (k / its bootstrap standard
error above BOUNDED_Z); then the GEV as fitted.

Uncertainty: a circular block bootstrap of consecutive windows (Politis &
Romano 1992; blocks long enough to hold the dependence between neighbouring
windows), m-out-of-n above BOOT_SIZE windows with the spread rescaled to n
(Bickel, Götze & van Zwet 1997). The interval level that is *stated* is LEVEL,
the nominal level of the bootstrap percentiles used (boot_level). Before the tail
model below, these percentiles covered less than their nominal level (model error
of far extrapolations, more so on lognormal-like tails) and the intervals were
stated at 90 %.

Model error: the GEV fitted to all window maxima takes the shape of its far tail
from the bulk of the maxima. A tail whose local shape grows with the level (the
slow, "penultimate" convergence of lognormal-like maxima) is then under-estimated,
by more than the bootstrap spread once runs are long. The *tail model* (GpdTail),
a generalised Pareto distribution fitted to the largest pot_size(n) maxima alone,
follows such a tail, with a larger spread. The upper end of every interval is the
higher of the quoted model's upper percentile and the tail model's, both over the
same resamples: it holds if either model describes the tail; the lower end and the
point estimates stay the quoted model's. The coverage that holds was measured by
simulation (bench/calibrate_evt.py, published in docs/report.md) and differs by
tail family and run length.

Checks (each named in the warnings):

* far tail heavier than the model: the shape of a generalised Pareto fit to the
  top of the window maxima (peaks over threshold) against the GEV's; block-size
  sensitivity: the GEV shape refitted to maxima of r consecutive windows
  (r = 10, 5 or 2) against the one of single windows. A GEV is max-stable: both
  must agree up to sampling noise, judged against the bootstrap;
* the tail model's 24-h worst case above the quoted model's by more than TAIL_Z
  bootstrap standard errors of their difference (the top of the data extrapolates
  higher than the model);
* the largest observed maximum implausible under the model (p < 0.001);
* Kolmogorov-Smirnov distance between the maxima and the fitted GEV.

A second mechanism (host stalls, SMIs) seen in the run makes the maxima bimodal
and trips these checks: the report then says the model is not to be trusted. A
mechanism that did not occur during the run cannot be seen by any fit: the
model-free zero-failure column is the only guard against it.

Pure numpy; numpy is imported by the functions that need it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rtlab.analysis.evt_models import (
    K_LIMIT,
    GevFit,
    GpdTail,
    fit_gev,
    fit_gumbel,
    gev_from_b,
    gpd_k_rows,
    gpd_rows,
    gumbel_from_b,
    pwm_rows,
    q_rows,
    t_rows,
    tail_p_rows,
    tail_q_rows,
)
from rtlab.analysis.window_maxima import merged_window_maxima

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from rtlab.results.model import Channel

MIN_WINDOWS = 30
DAY_NS = 86_400 * 1_000_000_000
LEVEL = 0.95  # the interval level the report states (its true coverage: docs/report.md)
BOOT_LEVEL = 0.95  # the central bootstrap percentiles used for a LEVEL interval (the upper
# end: the higher of the quoted model's and the tail model's percentile)
BOOT_RESAMPLES = 200
BOOT_SIZE = 20_000  # larger samples: m-out-of-n resamples, spread rescaled to n
BOOT_SEED = 20240607
BOUNDED_Z = 2.326  # k / se(k) above this (one-sided 1 %): the bounded tail is evidenced
TAIL_Z = 2.326  # a tail check's z above this (one-sided 1 %): the check fails
TAIL_P = 1e-3  # the largest maximum is implausible below this probability
# A mechanism that occurs at least ln 2 times per horizon H sets the median worst case over
# H; a run of length T misses it with probability 2 ** (-T / H). Above this probability the
# answer says, in the output itself, that the horizon is beyond what the run can show
# (H > T / 4.3: every run shorter than ~4.3 days for the 24-h numbers). Before, only
# H > 100 T was said: 15-min to 1-h runs missed a rare second mechanism (one spike window
# per 33 min) silently in most runs, quoting ~0.3x the true 24-h worst case
# (bench/calibrate_evt.py)
EXTRAPOLATION_MISS = 0.05


def reblock(maxima: np.ndarray, r: int) -> np.ndarray:
    """Maxima of r consecutive windows (a trailing incomplete group is left out)."""
    n = len(maxima) // r * r
    return maxima[:n].reshape(-1, r).max(axis=1)


def pot_size(n: int) -> int:
    """How many of the largest window maxima the peaks-over-threshold check uses
    (the smallest of them is the threshold)."""
    return max(16, min(n // 10, int(3 * math.sqrt(n))))


def reblock_factor(n: int) -> int:
    """The re-blocking factor of the block-size check: the largest of 10, 5, 2 that
    leaves at least MIN_WINDOWS blocks (1: none)."""
    return next((r for r in (10, 5, 2) if n // r >= MIN_WINDOWS), 1)


def dependence_lag(x: np.ndarray, max_lag: int = 100) -> int:
    """The largest lag h (up to max_lag) such that the rank autocorrelation of the
    series is significantly positive at every lag 1..h (0: none at lag 1)."""
    import numpy as np

    x = x[:20_000]
    n = len(x)
    if n < 20:
        return 0
    r = np.empty(n)
    r[np.argsort(x, kind="stable")] = np.arange(n)
    r = r / n - r.mean() / n
    var = float((r * r).mean())
    lim = 2 / math.sqrt(n)
    h = 0
    for lag in range(1, min(max_lag, n // 5) + 1):
        if float((r[:-lag] * r[lag:]).mean()) / var <= lim:
            break
        h = lag
    return h


def block_length(x: np.ndarray) -> int:
    """Bootstrap block length (windows): n^(1/3), and at least 4 times the dependence lag."""
    n = len(x)
    return int(min(max(math.ceil(n ** (1 / 3)), 4 * dependence_lag(x)), max(1, n // 5)))


@dataclass
class TailCheck:
    """One goodness-of-fit check: its statistic, its z against the bootstrap (how many
    standard errors the far tail is heavier than the model) and whether it failed."""

    name: str
    statistic: float
    z: float | None
    failed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "statistic": self.statistic, "z": self.z,
                "failed": self.failed}


def tail_size(n: int) -> int:
    """How many of the largest window maxima the tail model uses: those of the
    peaks-over-threshold check (pot_size)."""
    return pot_size(n)


@dataclass
class Boot:
    """Bootstrap refits: GEV (mu, sigma, k) and Gumbel (mu, sigma) arrays, one entry per
    resample, already rescaled to the full sample size; the tail model's (u, alpha, k)."""

    gev: tuple[np.ndarray, np.ndarray, np.ndarray]
    gumbel: tuple[np.ndarray, np.ndarray]
    pot_d: np.ndarray | None = None  # k(GEV) - k(GPD of the top) per resample
    reblock_d: np.ndarray | None = None  # k(GEV, single windows) - k(GEV, r windows)
    tail: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # u, alpha, k

    def __len__(self) -> int:
        return len(self.gev[2])


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
    bounded: bool = False  # bounded tail evidenced: the GEV is quoted as fitted
    k_se: float | None = None  # bootstrap standard error of the GEV shape
    block_windows: int | None = None  # bootstrap block length (consecutive windows)
    dependence_lag: int = 0  # neighbouring window maxima correlated up to this lag
    checks: list[TailCheck] = field(default_factory=list)
    level: float = LEVEL
    tail: GpdTail | None = None  # the tail model: only the upper ends of intervals use it
    # bootstrap refits: the spread of any answer over them is its uncertainty (`interval`)
    boot: Boot | None = field(default=None, repr=False)

    @property
    def usable(self) -> bool:
        return self.gev is not None

    @property
    def measured_ns(self) -> int:
        return self.n_windows * self.window_ns

    @property
    def model(self) -> str:
        """The rule behind every quoted number."""
        return ("GEV (bounded tail, evidenced)" if self.bounded
                else "the more pessimistic of GEV and Gumbel")

    @property
    def failed_checks(self) -> list[TailCheck]:
        return [c for c in self.checks if c.failed]

    def _p_rows(self, gev: tuple, gum: tuple, x_us: float, blocks: float) -> np.ndarray:
        import numpy as np

        pg = -np.expm1(-blocks * t_rows(*gev, x_us))
        if self.bounded:
            return pg
        return np.maximum(pg, -np.expm1(-blocks * t_rows(gum[0], gum[1], 0.0 * gum[0], x_us)))

    def _worst_rows(self, gev: tuple, gum: tuple, p: float) -> np.ndarray:
        import numpy as np

        qg = q_rows(*gev, p)
        if self.bounded:
            return 1000 * qg
        return 1000 * np.maximum(qg, q_rows(gum[0], gum[1], 0.0 * gum[0], p))

    def _point(self) -> tuple[tuple, tuple]:
        import numpy as np

        g, u = self.gev, self.gumbel
        assert g is not None and u is not None
        return ((np.array([g.mu]), np.array([g.sigma]), np.array([g.k])),
                (np.array([u.mu]), np.array([u.sigma])))

    def p_exceed(self, budget_ns: float, within_ns: int) -> float | None:
        """Probability that latency exceeds `budget_ns` at least once within `within_ns`."""
        if self.gev is None or self.gumbel is None:
            return None
        return float(self._p_rows(*self._point(), budget_ns / 1000,
                                  within_ns / self.window_ns)[0])

    def typical_worst_ns(self, within_ns: int) -> float | None:
        """Median of the maximum over `within_ns` (the quoted model)."""
        if self.gev is None or self.gumbel is None:
            return None
        return float(self._worst_rows(*self._point(), 0.5 ** (self.window_ns / within_ns))[0])

    def interval(self, what: str, arg: int, within_ns: int, level: float | None = None,
                 tail: bool = True) -> tuple[float, float] | None:
        """The interval (stated level `self.level`) of p_exceed(arg, within) (what="p") or of
        typical_worst_ns(within) (what="worst"): central bootstrap percentiles at
        boot_level(n) (or `level` when given) of the quoted model; its upper end raised to
        the tail model's upper percentile where that is higher (tail=False: without the
        tail model). None without resamples."""
        parts = self.interval_parts(what, arg, within_ns, level)
        if parts is None:
            return None
        lo, hi, hi_tail = parts
        return lo, (max(hi, hi_tail) if tail and hi_tail is not None else hi)

    def interval_parts(self, what: str, arg: int, within_ns: int, level: float | None = None
                       ) -> tuple[float, float, float | None] | None:
        """(lower, upper percentile of the quoted model, upper percentile of the tail
        model or None) behind `interval`."""
        import numpy as np

        if self.boot is None or not len(self.boot):
            return None
        b = self.boot
        blocks = within_ns / self.window_ns
        tail_rows = None
        if what == "p":
            vals = self._p_rows(b.gev, b.gumbel, arg / 1000, blocks)
            if b.tail is not None and self.tail is not None:
                tail_rows = tail_p_rows(b.tail, self.tail.rate, arg / 1000, blocks)
        else:
            vals = self._worst_rows(b.gev, b.gumbel, 0.5 ** (1 / blocks))
            if b.tail is not None and self.tail is not None:
                tail_rows = 1000 * tail_q_rows(*b.tail, self.tail.rate, math.log(2) / blocks)
        bl = boot_level(self.n_windows) if level is None else level
        i_lo = int((1 - bl) / 2 * (len(vals) - 1))
        i_hi = round((1 + bl) / 2 * (len(vals) - 1))
        vals = np.sort(vals)
        hi_tail = None
        if tail_rows is not None and len(tail_rows):
            tail_rows = np.sort(np.nan_to_num(tail_rows, nan=0.0))
            hi_tail = float(tail_rows[round((1 + bl) / 2 * (len(tail_rows) - 1))])
        return float(vals[i_lo]), float(vals[i_hi]), hi_tail

    def tail_worst_ns(self, within_ns: int) -> float | None:
        """Median of the maximum over `within_ns` under the tail model."""
        if self.tail is None:
            return None
        return 1000 * self.tail.quantile_within(0.5, within_ns / self.window_ns)

    def return_period_ns(self, level_ns: int) -> float | None:
        """Mean time between windows whose maximum exceeds `level_ns`."""
        p = self.p_exceed(level_ns, self.window_ns)
        if p is None:
            return None
        return math.inf if p <= 0 else self.window_ns / p

    def to_dict(self) -> dict[str, Any]:
        def fit(g):
            return (None if g is None else {"mu_us": g.mu, "sigma_us": g.sigma, "k": g.k})
        worst = self.interval("worst", 0, DAY_NS)
        parts = self.interval_parts("worst", 0, DAY_NS)
        upper = None if parts is None else (
            "tail model" if parts[2] is not None and parts[2] > parts[1] else "quoted model")
        t = self.tail
        tail = None if t is None else {"threshold_us": t.u, "scale_us": t.alpha, "k": t.k,
                                       "exceedances": t.m, "rate": t.rate}
        return {"n_windows": self.n_windows, "window_ns": self.window_ns,
                "observed_max_ns": self.observed_max_ns,
                "model": self.model if self.usable else None,
                "typical_worst_24h_ns": self.typical_worst_ns(DAY_NS),
                "typical_worst_24h_interval_ns": list(worst) if worst else None,
                "interval_level": self.level,
                "gev": fit(self.gev), "gumbel": fit(self.gumbel), "k_se": self.k_se,
                "bounded_tail": self.bounded, "bootstrap_block_windows": self.block_windows,
                "dependence_lag": self.dependence_lag,
                "ks_distance": self.ks_distance, "ks_critical": self.ks_critical,
                "tail_p": self.tail_p, "checks": [c.to_dict() for c in self.checks],
                "fit_ok": self.fit_ok, "warnings": list(self.warnings),
                "extrapolation_warning": extrapolation_warning(self.measured_ns)
                if self.n_windows and self.window_ns else None,
                "tail_model": tail,
                "typical_worst_24h_tail_ns": self.tail_worst_ns(DAY_NS),
                "typical_worst_24h_interval_upper_from": upper}


def extrapolation_warning(measured_ns: int, horizon_ns: int = DAY_NS) -> str | None:
    """The line that says a horizon is beyond what a run of `measured_ns` can show (None
    when the run is long enough, EXTRAPOLATION_MISS): a mechanism frequent enough to set
    the horizon's median worst case may not have occurred in the run at all, and no fit
    sees what did not occur."""
    if horizon_ns <= 0:
        return None
    if measured_ns > 0 and 2.0 ** (-measured_ns / horizon_ns) <= EXTRAPOLATION_MISS:
        return None
    factor = horizon_ns / measured_ns if measured_ns > 0 else math.inf
    unseen = measured_ns / -math.log(EXTRAPOLATION_MISS)  # rarer: unseen with p > 5 %
    hours = horizon_ns / 3_600_000_000_000
    need = horizon_ns * math.log(1 / EXTRAPOLATION_MISS) / math.log(2)
    head = (f"{hours:g} h is {factor:,.0f} times the measured {measured_ns / 1e9:,.0f} s"
            if factor >= 1.5 else
            f"the measured {measured_ns / 1e9:,.0f} s is only {1 / factor:.1f} times {hours:g} h")
    return (f"{head}: the {hours:g}-hour numbers extrapolate beyond the data and hold only for the "
            f"mechanisms this run saw; a rarer one (a spike window less often than about "
            f"once per {_span(unseen)}) can be missing from it, and one that occurs once per "
            f"{hours:g} h goes unseen in a run this long with probability "
            f"{2.0 ** (-measured_ns / horizon_ns) * 100:.0f} %: measure {_span(need)} in all "
            "(one run or several) before quoting them as a guarantee")


def _span(ns: float) -> str:
    s = ns / 1e9
    return (f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200
            else f"{s / 3600:.0f} h" if s < 172_800 else f"{s / 86400:.1f} days")


def boot_level(n: int) -> float:
    """The central bootstrap percentiles that give a LEVEL interval with n windows: their
    nominal level, for every n, since the upper end also follows the tail model (measured
    by simulation, docs/report.md; before, 0.95 for a stated 0.90, and 0.98 below 300
    windows)."""
    return BOOT_LEVEL


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


def _bootstrap(x_time: np.ndarray, r: int, block: int, seed: int = BOOT_SEED,
               resamples: int = BOOT_RESAMPLES, tail: GpdTail | None = None
               ) -> tuple[Boot, int]:
    """Circular block bootstrap of the time-ordered window maxima `x_time` (µs): each
    resample is made of blocks of `block` consecutive windows (rounded up to a multiple
    of the re-blocking factor r, blocks starting at multiples of r, so that the maxima of
    r consecutive windows of a resample are such maxima of the data). Returns the refits,
    rescaled to the full sample size when the resamples are smaller (m-out-of-n), and
    the block length used. With `tail`, the tail model is refitted to the maxima of each
    resample above the same fraction of its windows (tail.rate)."""
    import numpy as np

    n = len(x_time)
    q = max(r, 1)
    n_u = n // q * q
    src = x_time[:n_u]
    L = q * math.ceil(block / q)
    m = min(n_u, BOOT_SIZE)
    nb = math.ceil(m / L)
    mm = nb * L
    units = n_u // q
    rng = np.random.default_rng(seed)
    npot = pot_size(mm) if n >= 100 else 0
    mt = 0 if tail is None else min(mm - 2, max(5, round(tail.rate * mm)))
    parts: list[list[np.ndarray]] = [[], [], [], [], [], [], [], [], [], []]
    offs = np.arange(L)
    done = 0
    while done < resamples:
        c = min(50, resamples - done)
        done += c
        starts = rng.integers(0, units, (c, nb)) * q
        xs = src[(starts[:, :, None] + offs).reshape(c, mm) % n_u]
        if r > 1:
            xr = np.sort(xs.reshape(c, -1, r).max(axis=2), axis=1)
            parts[6].append(gev_from_b(*pwm_rows(xr))[2])
        xs.sort(axis=1)
        b0, b1, b2 = pwm_rows(xs)
        mu, sigma, k = gev_from_b(b0, b1, b2)
        gm, gs = gumbel_from_b(b0, b1)
        for i, v in enumerate((mu, sigma, k, gm, gs)):
            parts[i].append(v)
        if npot:
            parts[5].append(k - gpd_k_rows(xs[:, mm - npot - 1:]))
        if mt:
            for i, v in enumerate(gpd_rows(xs[:, mm - mt - 1:])):
                parts[7 + i].append(v)
    arr = [np.concatenate(p) if p else None for p in parts]
    mu, sigma, k, gm, gs, pot, rb, tu, ta, tk = arr
    ok = (sigma > 0) & (gs > 0) & np.isfinite(mu) & np.isfinite(gm)
    f = min(1.0, math.sqrt(mm / n))
    if f < 1:  # m-out-of-n: shrink the spread around the full-sample fit by sqrt(m/n)
        b = pwm_rows(np.sort(x_time))
        hat = (*gev_from_b(*b), *gumbel_from_b(b[0], b[1]))
        mu, sigma, k, gm, gs = (h + f * (v - h) for h, v in zip(hat, (mu, sigma, k, gm, gs),
                                                                  strict=True))
        if pot is not None:
            pot = pot * math.sqrt(npot / pot_size(n))
        if rb is not None:
            rb = rb * f
        if tail is not None:
            tu, ta, tk = (h + f * (v - h) for h, v in zip((tail.u, tail.alpha, tail.k),
                                                          (tu, ta, tk), strict=True))
    tails = None if tail is None else (tu[ok], ta[ok], tk[ok])
    return Boot((mu[ok], sigma[ok], k[ok]), (gm[ok], gs[ok]),
                None if pot is None else pot[ok],
                None if rb is None else (k - rb)[ok], tails), L


def _z(d: float, spread: np.ndarray | None) -> float | None:
    """How many bootstrap standard errors `d` is above 0."""
    import numpy as np

    if spread is None or len(spread) < 10:
        return None
    sd = float(np.std(spread))
    return math.inf if sd == 0 and d > 0 else (0.0 if sd == 0 else d / sd)


def fit_window_maxima(maxima_ns: np.ndarray, window_ns: int | None, *,
                      resamples: int = BOOT_RESAMPLES, seed: int = BOOT_SEED) -> EvtEstimate:
    """Fit GEV and Gumbel to window maxima (ns, in time order) and check the fit."""
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
    x_time = np.asarray(maxima_ns, dtype=np.float64) / 1000.0
    x = np.sort(x_time)
    if x[-1] == x[0]:
        est.warnings.append("all window maxima are equal: no spread to fit")
        return est
    est.gev = fit_gev(x)
    est.gumbel = fit_gumbel(x)
    r = reblock_factor(n)
    est.dependence_lag = dependence_lag(x_time)
    m = tail_size(n)
    tu, ta, tk = (float(v) for v in gpd_rows(x[n - m - 1:]))
    if ta > 0:
        est.tail = GpdTail(tu, ta, tk, m, m / n)
    boot, est.block_windows = _bootstrap(x_time, r, block_length(x_time), seed, resamples,
                                         est.tail)
    est.boot = boot
    k = est.gev.k
    est.k_se = float(np.std(boot.gev[2])) if len(boot) > 1 else None
    est.bounded = bool(k > 0 and est.k_se is not None
                       and (est.k_se == 0 or k / est.k_se > BOUNDED_Z))
    # Kolmogorov-Smirnov distance to the fitted GEV, on at most 20000 order statistics.
    step = max(1, n // 20000)
    xs = x[::step]
    ranks = np.arange(step, step * len(xs) + 1, step, dtype=np.float64)[:len(xs)]
    g = est.gev
    cdf = np.exp(-t_rows(np.array(g.mu), np.array(g.sigma), np.array(g.k), xs))
    d = float(max(np.max(np.abs(ranks / n - cdf)), np.max(np.abs((ranks - step) / n - cdf))))
    est.ks_distance = d
    # 1.36/sqrt(n) is the 5 % critical value with known parameters; with estimated
    # parameters the true one is smaller (lenient); dependent windows count as fewer.
    est.ks_critical = 1.36 / math.sqrt(n / (1 + 2 * est.dependence_lag))
    # Tail check: how plausible is the observed largest maximum under the quoted model?
    est.tail_p = est.p_exceed(float(x[-1]) * 1000 - 1e-3, n * est.window_ns)
    if n >= 100 and boot.pot_d is not None:
        top = x[n - pot_size(n) - 1:]
        kp = float(gpd_k_rows(top))
        dp = k - kp
        zp = _z(dp, boot.pot_d)
        est.checks.append(TailCheck("peaks over threshold", kp, zp,
                                    zp is not None and zp > TAIL_Z))
    if r > 1 and boot.reblock_d is not None:
        kr = fit_gev(np.sort(reblock(x_time, r))).k
        k1 = fit_gev(np.sort(x_time[:n // r * r])).k
        zr = _z(k1 - kr, boot.reblock_d)
        est.checks.append(TailCheck(f"block size x{r}", kr, zr,
                                    zr is not None and zr > TAIL_Z))
    if est.tail is not None and boot.tail is not None:
        # the tail model's 24-h worst case against the quoted model's, in standard errors
        # of their difference over the resamples
        blocks = DAY_NS / est.window_ns
        diff = (1000 * tail_q_rows(*boot.tail, est.tail.rate, math.log(2) / blocks)
                - est._worst_rows(boot.gev, boot.gumbel, 0.5 ** (1 / blocks)))
        tw = est.tail_worst_ns(DAY_NS)
        mw = est.typical_worst_ns(DAY_NS)
        assert tw is not None and mw is not None
        zt = _z(tw - mw, diff[np.isfinite(diff)])
        est.checks.append(TailCheck("tail model", tw / mw, zt, zt is not None and zt > TAIL_Z))
    est.fit_ok = True
    if d > est.ks_critical:
        est.fit_ok = False
        est.warnings.append(
            f"the window maxima do not follow an extreme-value distribution (KS distance "
            f"{d:.3f} > {est.ks_critical:.3f}): the maxima probably come from more than one "
            "mechanism (e.g. host/VM stalls or SMIs on top of the normal tail); do not trust "
            "the estimates below, find and remove the second mechanism first")
    if est.tail_p is not None and est.tail_p < TAIL_P:
        est.fit_ok = False
        est.warnings.append(
            f"the largest observed maximum ({x[-1]:.1f} µs) is implausible under the fitted "
            f"model (p = {est.tail_p:.1e}): rare events beyond the bulk of the maxima; the "
            "model underestimates the risk of such spikes")
    for c in est.failed_checks:
        est.fit_ok = False
        if c.name == "tail model":
            est.warnings.append(
                f"the largest {est.tail.m if est.tail else 0} window maxima alone (tail "
                f"model) extrapolate to a 24-h worst case {c.statistic:.2f}x the fitted "
                f"model's ({c.z:.1f} standard errors): the tail gets heavier beyond the bulk "
                "of the maxima and the model underestimates the risk; do not trust its "
                "estimates below (the upper ends of the intervals follow the tail model)")
        elif c.name.startswith("peaks"):
            est.warnings.append(
                f"the top {pot_size(n)} window maxima have a heavier tail than the fitted "
                f"model (peaks-over-threshold shape k = {c.statistic:.2f} against the GEV's "
                f"{k:.2f}, {c.z:.1f} standard errors): the model underestimates the risk "
                "beyond the observed maximum (a second, rarer mechanism or a tail that "
                "gets heavier further out); do not trust the estimates below")
        else:
            est.warnings.append(
                f"maxima of {r} consecutive windows have a heavier tail than single windows "
                f"(GEV shape k = {c.statistic:.2f} against {k:.2f}, {c.z:.1f} standard "
                "errors): the maxima are not one extreme-value distribution (a second, "
                "rarer mechanism, or a tail that gets heavier further out); do not trust "
                "the estimates below")
    if est.bounded:
        est.warnings.append(
            f"the window maxima have a bounded tail (GEV shape k = {k:.2f}, "
            f"{k / est.k_se if est.k_se else math.inf:.1f} standard errors above 0): the "
            "GEV is quoted as fitted; an upper bound seen in this run holds only while "
            "nothing new happens on the system, and a tail that gets heavier beyond the bulk "
            "of the maxima (lognormal-like) looks bounded too: the upper ends of the "
            "intervals follow the tail model, fitted to the largest maxima alone")
    elif k <= -0.5:
        est.warnings.append(
            f"the window maxima have a very heavy tail (GEV shape k = {k:.2f}"
            + (", at the limit of the fit" if k <= -K_LIMIT + 1e-9 else "")
            + "): rare huge maxima dominate, every extrapolated number grows steeply with "
            "the operating time and is very uncertain (see the intervals)")
    warn = extrapolation_warning(est.measured_ns)
    if warn:
        est.warnings.append(warn)
    return est


def estimate(channels: Sequence[Channel]) -> EvtEstimate:
    """Extreme-value estimate of the worst channel per window (all channels merged)."""
    maxima, window_ns = merged_window_maxima(channels)
    return fit_window_maxima(maxima, window_ns)
