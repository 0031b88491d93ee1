# SPDX-License-Identifier: MIT
"""Calibration of `rtlab compare` by simulation: data whose truth is known.

Synthetic runs (1 kHz, 1 s windows, one channel, with the engine's histogram, window
maxima and per-window histograms) of four kinds of log-latency:

* ``independent``: log-normal samples (median 10 µs, sigma 0.25);
* ``ar1-0.99`` and ``ar1-0.999``: the same marginal, log-latency an AR(1) with that
  coefficient (correlation time 0.1 s and 1 s at 1 kHz);
* ``bursts``: independent samples plus 3-s bursts (on average one a minute, at random
  times) during which every latency is 1.65x higher.

One more kind, not in KINDS (bench/calibrate_runs.py): ``run-effect``, independent
samples whose whole run is shifted by a random factor (log-normal, sd RUN_SD: 2 %, about
the standard error of a 1-min p99.9), as boot-to-boot differences shift a run; the case
the run-to-run variance is for.

A/A pairs (two runs of the same process) give the false-positive rate of each
comparison and the coverage of its interval (true ratio 1); A/B pairs with B's tail
shifted (every sample above the process's 90th percentile 10 % higher: p99 ... max
+10 %, median unchanged) give power and the coverage at ratio 1.1. `bench/
calibrate_compare.py` runs the full table, tests/analysis/test_compare_calibration.py a
fast one; docs/report.md publishes it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rtlab.results.histogram import index_array
from rtlab.results.shape import ResultShape

# the simulated runs are of no probe the host knows: one channel, the headline, "latency"
SIMULATED_PROBE = "simulated"
KINDS = ("independent", "ar1-0.99", "ar1-0.999", "bursts")
RUN_EFFECT = "run-effect"
RUN_SD = 0.02
MEDIAN_NS = 10_000.0
SIGMA = 0.25
RATE_HZ = 1000
BURST_S = 3
BURST_PER_S = 1 / 60
BURST_FACTOR = 1.65
SHIFT = 1.10
STATS = ("median", "mean", "p99", "p99.9", "p99.99", "max (median window max)")
TAIL_STATS = ("p99", "p99.9", "p99.99", "max (median window max)")


def ar1(e: np.ndarray, phi: float) -> np.ndarray:
    """x_t = phi x_{t-1} + e_t along the last axis (x_{-1} = 0), vectorised: in chunks of
    k (phi**-k <= 1e4) the recursion is a scaled cumulative sum, and the chunks' carries
    are an AR(1) of coefficient phi**k solved the same way."""
    if phi < 1e-4:  # phi**2 below float resolution of the terms that matter
        out = e.copy()
        out[..., 1:] += phi * e[..., :-1]
        return out
    n = e.shape[-1]
    # chunks short enough that phi**-k stays moderate (no overflow, no lost digits)
    k = max(2, min(64, int(4 * math.log(10) / -math.log(phi))))
    if n <= k:
        out = np.empty_like(e)
        prev = np.zeros(e.shape[:-1])
        for t in range(n):
            prev = phi * prev + e[..., t]
            out[..., t] = prev
        return out
    m = -(-n // k)
    pad = m * k - n
    ee = np.concatenate([e, np.zeros((*e.shape[:-1], pad))], axis=-1) if pad else e
    ee = ee.reshape((*e.shape[:-1], m, k))
    j = np.arange(k)
    y = np.cumsum(ee * phi ** (-j), axis=-1) * phi ** j  # zero start within each chunk
    carry = ar1(y[..., -1], phi ** k)  # x at the end of each chunk
    prev = np.concatenate([np.zeros((*e.shape[:-1], 1)), carry[..., :-1]], axis=-1)
    x = y + prev[..., None] * phi ** (j + 1)
    return x.reshape((*e.shape[:-1], m * k))[..., :n]


def simulate(kind: str, seconds: int, rng: np.random.Generator) -> np.ndarray:
    """Latencies (ns, int64) of one run of `kind`."""
    n = seconds * RATE_HZ
    z = rng.standard_normal(n)
    if kind.startswith("ar1-"):
        phi = float(kind[4:])
        z = ar1(z * math.sqrt(1 - phi * phi), phi)
        z += rng.standard_normal() * phi ** np.arange(1, n + 1)  # stationary start
    log_lat = math.log(MEDIAN_NS) + SIGMA * z
    if kind == "bursts":
        starts = np.flatnonzero(rng.random(seconds) < BURST_PER_S)
        boost = np.zeros(n + BURST_S * RATE_HZ)
        for s in starts:
            boost[s * RATE_HZ:(s + BURST_S) * RATE_HZ] = math.log(BURST_FACTOR)
        log_lat += boost[:n]
    elif kind == RUN_EFFECT:
        log_lat += rng.normal(0.0, RUN_SD)
    elif kind != "independent" and not kind.startswith("ar1-"):
        raise ValueError(f"unknown kind {kind!r}")
    return np.exp(log_lat).astype(np.int64)


def tail_shift(x: np.ndarray) -> np.ndarray:
    """Every latency above the process's 90th percentile 10 % higher."""
    t90 = MEDIAN_NS * math.exp(SIGMA * 1.2815515655446004)
    return np.where(x > t90, (x * SHIFT).astype(np.int64), x)


def simulated_shape(_probe: str) -> ResultShape:
    """The result shape of every simulated run (`run_from_samples`): its one channel is the
    headline (what `build_configs` is handed as `shape_of`)."""
    return ResultShape()


def run_from_samples(run_id: str, x: np.ndarray, label: str, *, window_hist: bool = True,  # type: ignore[no-untyped-def]
                     probe: str = SIMULATED_PROBE):
    """A RunResult of one channel as the engine would record `x` at 1 kHz (of `probe`:
    by default none the host knows)."""
    from rtlab.results.histogram import LogLinHistogram
    from rtlab.results.model import Channel, Phase, RunResult
    from rtlab.results.windows import WindowHist, WindowMaxima

    idx = index_array(x, 7)
    u, c = np.unique(idx, return_counts=True)
    hist = LogLinHistogram(7, dict(zip(u.tolist(), c.tolist(), strict=True)))
    nw = len(x) // RATE_HZ
    body = x[: nw * RATE_HZ].reshape(nw, RATE_HZ)
    windows = WindowMaxima(np.arange(nw), body.max(axis=1), np.full(nw, RATE_HZ))
    wh = None
    if window_hist:
        ci = np.minimum(index_array(body, 2), 155)
        k = int(ci.max()) + 1
        flat = np.bincount((np.arange(nw)[:, None] * k + ci).reshape(-1), minlength=nw * k)
        wh = WindowHist.from_dense(2, np.arange(nw), body.sum(axis=1), flat.reshape(nw, k))
    ch = Channel(name="cpu1", cpu=1, samples=len(x), min_ns=int(x.min()),
                 max_ns=int(x.max()), sum_ns=int(x.sum()),
                 max_at_ns=int(np.argmax(x)) * 1_000_000, hist=hist, windows=windows,
                 window_ns=1_000_000_000, window_hist=wh)
    system = {"hostname": "sim", "release": label, "preempt": "rt"}
    return RunResult(
        run_id=run_id, status="completed", probe=probe,
        phases=[Phase("main", [ch], nw * 1_000_000_000)], rt_valid=True,
        scenario={"name": "sim", "hash": "ab" * 32},
        provenance={"engine": {"engine_version": "sim", "system": system,
                               "config": {"interval_ns": 1_000_000},
                               "effective": {"rt_valid": True}},
                    "host": {"hostname": "sim"}})


@dataclass
class Tally:
    """Counts of one (kind, statistic) cell over repetitions."""

    reps: int = 0
    significant: int = 0
    covered: int = 0
    with_ci: int = 0
    inconclusive: int = 0

    def add(self, sig: bool, covered: bool | None, inconclusive: bool) -> None:
        self.reps += 1
        self.significant += sig
        self.inconclusive += inconclusive
        if covered is not None:
            self.with_ci += 1
            self.covered += covered

    @property
    def rate(self) -> float:
        return self.significant / self.reps if self.reps else math.nan

    @property
    def coverage(self) -> float:
        return self.covered / self.with_ci if self.with_ci else math.nan


@dataclass
class Cell:
    kind: str
    seconds: int
    runs: int
    shifted: bool
    tallies: dict[str, Tally] = field(default_factory=dict)


_MEDIAN_WINDOW_MAX: dict[str, float] = {}


def median_window_max(kind: str) -> float:
    """The process's median 1-s window maximum, from 4 simulated hours (cached)."""
    if kind not in _MEDIAN_WINDOW_MAX:
        x = simulate(kind, 4 * 3600, np.random.default_rng(12345))
        _MEDIAN_WINDOW_MAX[kind] = float(np.median(x.reshape(-1, RATE_HZ).max(axis=1)))
    return _MEDIAN_WINDOW_MAX[kind]


def true_ratio(stat: str, shifted: bool, kind: str = "independent") -> float | None:
    """The true B/A of a statistic (None: not a simple number, the mean under a shift).
    The shift is monotone, so it moves every quantile and the median window maximum by
    10 % when that lies above the process's p90, else not at all: with slowly wandering
    latency (AR(1) phi 0.999) a whole window can stay below p90, and the median window
    maximum then does (None when too close to p90 to say)."""
    if not shifted:
        return 1.0
    if stat == "median":
        return 1.0
    if stat == "mean":
        return None
    if stat.startswith("max"):
        m = median_window_max(kind) / (MEDIAN_NS * math.exp(SIGMA * 1.2815515655446004))
        return SHIFT if m > 1.02 else 1.0 if m < 0.98 else None
    return SHIFT


def run_cell(kind: str, seconds: int, reps: int, *, shifted: bool = False, runs: int = 1,
             seed: int = 1, window_hist: bool = True,
             stats: Sequence[str] = STATS) -> Cell:
    """`reps` comparisons of A (runs x `seconds` of `kind`) against B (the same, tail
    shifted when `shifted`), through rtlab.analysis.compare."""
    from rtlab.analysis.compare import compare_configs
    from rtlab.analysis.configs import build_configs

    rng = np.random.default_rng(seed)
    cell = Cell(kind, seconds, runs, shifted, {s: Tally() for s in stats})
    for rep in range(reps):
        results = []
        for side in ("A", "B"):
            for k in range(runs):
                x = simulate(kind, seconds, rng)
                if side == "B" and shifted:
                    x = tail_shift(x)
                results.append(run_from_samples(f"{side}{rep:04d}{k}", x, side,
                                                window_hist=window_hist))
        (pc,) = compare_configs(build_configs(results, "kernel", shape_of=simulated_shape))
        for ch in pc.changes:
            if ch.what not in cell.tallies:
                continue
            truth = true_ratio(ch.what, shifted, kind)
            covered = (None if truth is None or ch.ci_lo is None or ch.ci_hi is None
                       else ch.ci_lo <= truth <= ch.ci_hi)
            cell.tallies[ch.what].add(ch.significant, covered, ch.needs is not None)
    return cell


def binomial_upper(k: int, n: int, z: float = 2.326) -> float:
    """Wilson upper bound of a proportion (z 2.326: one-sided 99 %)."""
    if n == 0:
        return 1.0
    p = k / n
    den = 1 + z * z / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre + half) / den


def table(cells: Sequence[Cell]) -> str:
    """A Markdown table: per cell and statistic the rate of "significant" (false
    positives for A/A, power for shifted), the coverage of the 99 % interval and how often
    the answer was "needs longer or repeated runs"."""
    lines = ["| data | run | runs/config | pair | statistic | significant | 99 % CI "
             "coverage | inconclusive |", "|---|---|---|---|---|---|---|---|"]
    for c in cells:
        dur = f"{c.seconds // 3600} h" if c.seconds >= 3600 else (
            f"{c.seconds // 60} min" if c.seconds >= 60 else f"{c.seconds} s")
        for stat, t in c.tallies.items():
            cov = "–" if math.isnan(t.coverage) else f"{t.coverage * 100:.1f} %"
            pair = "A/B +10 % tail" if c.shifted else "A/A"
            lines.append(f"| {c.kind} | {dur} | {c.runs} | {pair} "
                         f"| {stat} | {t.significant}/{t.reps} ({t.rate * 100:.1f} %) | {cov} | "
                         f"{t.inconclusive / t.reps * 100:.0f} % |")
    return "\n".join(lines)
