# SPDX-License-Identifier: MIT
"""Calibration of the percentile confidence intervals (issue 13, items 3 and 4).

Simulations with known truth: for each family, sample size and percentile, R runs
with fixed seeds are drawn, each is put into rtlab's log-linear histogram (with
per-window maxima of 1000 samples, "1 s at 1 kHz"), and the interval rtlab reports
(`rtlab.analysis.stats.percentile_intervals`, level 95 %) is checked against the
true percentile of the family. Printed: coverage (with its simulation standard
error), how often the interval is unbounded above, its median relative width and
how often it was flagged as dependent (widened for dependent samples or a clustered
tail). Runs carry per-window coarse histograms, as the engine records them.

Families (latency in ns, all with a closed-form or exactly computable quantile):

* ``lognormal``   median 10 µs, sigma 0.25 (log-latency normal)
* ``exp``         8 µs + exponential (mean 1 µs): a light tail
* ``gpd0.3``      10 µs + 1 µs x generalised Pareto (shape 0.3): a heavy tail
* ``bounded``     10 µs + 5 µs x (1 - V^(1/3)): a tail that ends (at 15 µs)
* ``ar0.99``, ``ar0.999``  log-latency a stationary Gaussian AR(1) (phi 0.99, 0.999)
  with the lognormal's marginal: dependent samples (each 1 000 a window)

Independent families at n up to 10^6 draw every sample; the "top" mode (used for
p99.9999 at 10^6 and 10^7) draws only the largest K order statistics exactly (uniform
spacings) and puts the other n - K samples into one bucket below them: the interval
of a tail percentile depends only on those ranks, so it is computed exactly as for
the full sample, at a fraction of the cost.

Usage (from the repository root; about 5 minutes on 2 vCPUs)::

    .venv/bin/python bench/calibrate_percentiles.py [--reps 400] [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rtlab.analysis.stats import DEFAULT_LEVEL, percentile_intervals
from rtlab.results.histogram import LogLinHistogram, index_array
from rtlab.results.windows import WindowHist, WindowMaxima

PER_WINDOW = 1000
MEDIAN_NS = 10_000.0
SIGMA = 0.25


# --- the families: samples and true quantiles --------------------------------------

def _isf(family: str, v: np.ndarray) -> np.ndarray:
    """Inverse survival function (x with P(X > x) = v), ns, for the closed-form families."""
    if family == "exp":
        return 8_000.0 - 1_000.0 * np.log(v)
    if family == "gpd0.3":
        return 10_000.0 + 1_000.0 / 0.3 * (v ** -0.3 - 1.0)
    if family == "bounded":
        return 10_000.0 + 5_000.0 * (1.0 - v ** (1.0 / 3.0))
    raise ValueError(family)


def true_quantile(family: str, p: float) -> int:
    """The true p-quantile (p in percent) of the integer (floored) latency, ns."""
    q = 1.0 - p / 100.0
    if family == "lognormal" or family.startswith("ar"):
        x = MEDIAN_NS * math.exp(SIGMA * NormalDist().inv_cdf(p / 100.0))
    else:
        x = float(_isf(family, np.array([q]))[0])
    return math.floor(x)


def ar1(rng: np.random.Generator, n: int, phi: float, block: int = 256) -> np.ndarray:
    """A stationary Gaussian AR(1) with unit variance, vectorised by blocks."""
    nb = -(-n // block)
    e = rng.standard_normal((nb, block)) * math.sqrt(1.0 - phi * phi)
    k = np.arange(block)
    # within a block: y_k = phi^(k+1) y_prev + sum_j<=k phi^(k-j) e_j
    inner = np.cumsum(e * phi ** (-k), axis=1) * phi ** k
    y = np.empty((nb, block))
    prev = rng.standard_normal()
    carry = phi ** (k + 1)
    for b in range(nb):
        y[b] = inner[b] + carry * prev
        prev = y[b, -1]
    return y.reshape(-1)[:n]


def draw(family: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """n latencies (integer ns) of `family`, in time order."""
    if family == "lognormal":
        x = MEDIAN_NS * np.exp(SIGMA * rng.standard_normal(n))
    elif family.startswith("ar"):
        x = MEDIAN_NS * np.exp(SIGMA * ar1(rng, n, float(family[2:])))
    else:
        x = _isf(family, 1.0 - rng.random(n))
    return np.floor(x).astype(np.int64)


def draw_top(family: str, rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """The k largest of n independent samples, exactly (largest first), integer ns."""
    gam = np.cumsum(rng.exponential(size=k))
    total = gam[-1] + rng.gamma(n + 1 - k)
    v = gam / total  # the k smallest of n uniforms = upper-tail probabilities
    return np.floor(_isf(family, v)).astype(np.int64)


# --- rtlab's histogram from samples -------------------------------------------------

def histogram(values: np.ndarray, weights: np.ndarray | None = None) -> LogLinHistogram:
    counts = np.bincount(index_array(values), weights=weights)
    nz = np.nonzero(counts)[0]
    return LogLinHistogram(7, {int(i): int(counts[i]) for i in nz})


@dataclass
class SimChannel:
    """What percentile_intervals reads of a channel."""

    hist: LogLinHistogram
    windows: WindowMaxima | None
    min_ns: int
    max_ns: int
    window_hist: WindowHist | None = None


def channel(x: np.ndarray, window_hist: bool = True) -> SimChannel:
    nw = len(x) // PER_WINDOW
    windows = wh = None
    if nw:
        body = x[: nw * PER_WINDOW].reshape(nw, PER_WINDOW)
        windows = WindowMaxima(np.arange(nw), body.max(axis=1), np.full(nw, PER_WINDOW))
        if window_hist:
            wh = WindowHist.from_samples(2, body)
    return SimChannel(histogram(x), windows, int(x.min()), int(x.max()), wh)


def top_channel(top: np.ndarray, n: int) -> SimChannel:
    """A histogram whose k largest samples are `top` and whose n - k others sit in one
    bucket well below them (no windows: independent data)."""
    low = int(top.min()) // 2
    values = np.concatenate((top, [low]))
    weights = np.concatenate((np.ones(len(top)), [n - len(top)]))
    return SimChannel(histogram(values, weights), None, low, int(top.max()))


# --- one cell of the table ----------------------------------------------------------

@dataclass
class Cell:
    family: str
    n: int
    p: float
    reps: int
    covered: int = 0
    unbounded: int = 0
    widened: int = 0
    miss_low: int = 0  # the truth above the interval (the unsafe side)
    widths: list[float] | None = None

    @property
    def coverage(self) -> float:
        return self.covered / self.reps

    @property
    def se(self) -> float:
        c = self.coverage
        return math.sqrt(max(c * (1 - c), 1e-12) / self.reps)

    def row(self) -> str:
        w = [x for x in (self.widths or []) if math.isfinite(x)]
        width = f"{100 * float(np.median(w)):.1f} %" if w else "-"
        return (f"| {self.family} | {self.n:.0e} | p{self.p:g} | {self.reps} | "
                f"{100 * self.coverage:.1f} ± {100 * self.se:.1f} | "
                f"{100 * self.miss_low / self.reps:.1f} | "
                f"{100 * self.unbounded / self.reps:.0f} % | {width} | "
                f"{100 * self.widened / self.reps:.0f} % |")


def run_cells(family: str, n: int, qs: tuple[float, ...], reps: int, seed: int,
              top: int = 0, window_hist: bool = True) -> list[Cell]:
    """One Cell per percentile in `qs`, from the same `reps` simulated runs (with
    per-window histograms unless `window_hist` is False: runs of older engines)."""
    truths = {q: true_quantile(family, q) for q in qs}
    cells = {q: Cell(family, n, q, reps, widths=[]) for q in qs}
    rng = np.random.default_rng(seed)
    for _ in range(reps):
        ch = (top_channel(draw_top(family, rng, n, top), n) if top
              else channel(draw(family, rng, n), window_hist))
        ivs = percentile_intervals(ch.hist, qs, min_ns=ch.min_ns, max_ns=ch.max_ns,
                                   parts=[ch] if ch.windows is not None else ())
        for q, iv in ivs.items():
            cell, truth = cells[q], truths[q]
            if top and iv.low_rank is not None and iv.low_rank <= n - top:
                raise AssertionError(f"top={top} too small for p{q:g} at n={n}")
            low_ok = iv.low_ns is None or iv.low_ns <= truth
            high_ok = iv.high_ns is None or truth <= iv.high_ns
            cell.covered += low_ok and high_ok
            cell.miss_low += not high_ok
            cell.unbounded += iv.high_ns is None
            cell.widened += iv.widened is not None
            if iv.low_ns and iv.high_ns:
                assert cell.widths is not None
                cell.widths.append(iv.high_ns / iv.low_ns - 1)
    return list(cells.values())


# The published table: (family, n, percentiles, mode)
INDEPENDENT: list[tuple[str, int, tuple[float, ...], int]] = [
    (fam, n, qs, 0)
    for fam in ("lognormal", "exp", "gpd0.3", "bounded")
    for n, qs in ((10_000, (99.0, 99.9)), (100_000, (99.0, 99.9, 99.99)),
                  (1_000_000, (99.9, 99.99)))
] + [(fam, n, (99.9999,), 400) for fam in ("exp", "gpd0.3", "bounded")
     for n in (1_000_000, 10_000_000)]
DEPENDENT: list[tuple[str, int, tuple[float, ...], int]] = [
    (fam, n, (99.0, 99.9, 99.99), 0) for fam in ("ar0.99", "ar0.999")
    for n in (100_000, 1_000_000)
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=400, help="runs per cell (400)")
    ap.add_argument("--quick", action="store_true", help="100 runs per cell, no n = 10^6 "
                    "full samples")
    args = ap.parse_args(argv)
    reps = 100 if args.quick else args.reps
    print(f"level {DEFAULT_LEVEL:.0%}, {reps} runs per cell (fewer for n = 10^6 full "
          "samples: reps/4), fixed seeds\n")
    print("| family | n | percentile | runs | coverage % | truth above % | unbounded above "
          "| median width | widened |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    seed = 1
    for group in (INDEPENDENT, DEPENDENT):
        for fam, n, qs, top in group:
            if args.quick and n >= 1_000_000 and not top:
                continue
            r = reps if (top or n < 1_000_000) else max(reps // 4, 25)
            t0 = time.monotonic()
            cells = run_cells(fam, n, qs, r, seed, top)
            seed += 1
            for cell in cells:
                print(cell.row(), flush=True)
            print(f"<!-- {fam} n={n}: {time.monotonic() - t0:.0f} s -->", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
