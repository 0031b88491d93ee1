# SPDX-License-Identifier: MIT
"""Calibration of `rtlab compare` on data whose truth is known (the fast version of
bench/calibrate_compare.py; docs/report.md publishes the full table). Fixed seeds, so
the counts are the same on every run; the bounds are the targets plus simulation error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rtlab.analysis.batchstats import t_ppf, t_sf
from rtlab.analysis.calibrate import (
    KINDS,
    TAIL_STATS,
    ar1,
    binomial_upper,
    run_cell,
    simulate,
)


def test_student_t() -> None:
    assert t_ppf(0.995, 1) == pytest.approx(63.657, rel=1e-4)
    assert t_ppf(0.995, 10) == pytest.approx(3.1693, rel=1e-4)
    assert t_ppf(0.975, math.inf) == pytest.approx(1.95996, rel=1e-5)
    assert 2 * t_sf(2.228, 10) == pytest.approx(0.05, abs=2e-4)


def test_ar1_filter_is_the_recursion() -> None:
    e = np.random.default_rng(1).standard_normal((2, 1000))
    want = np.zeros_like(e)
    for t in range(1000):
        want[:, t] = (0.99 * want[:, t - 1] if t else 0) + e[:, t]
    assert np.allclose(ar1(e, 0.99), want)
    x = simulate("ar1-0.99", 600, np.random.default_rng(2))
    z = np.log(x)
    assert np.corrcoef(z[:-1], z[1:])[0, 1] == pytest.approx(0.99, abs=0.005)


@pytest.mark.parametrize("kind", KINDS)
def test_aa_false_positive_rate(kind: str) -> None:
    """A/A pairs of 1-minute single runs: "significant" at most at the nominal 1 % (+
    simulation error) for every statistic, pooled over statistics; intervals that are
    shown cover the truth."""
    cell = run_cell(kind, 60, 60, seed=11)
    k = sum(t.significant for t in cell.tallies.values())
    n = sum(t.reps for t in cell.tallies.values())
    assert k <= 3, cell.tallies  # 360 tests at 1 %: binomial 99 % upper bound ~ 8
    assert binomial_upper(k, n) < 0.025
    covered = sum(t.covered for t in cell.tallies.values())
    shown = sum(t.with_ci for t in cell.tallies.values())
    assert shown and covered / shown >= 0.94


@pytest.mark.parametrize("kind", KINDS)
def test_aa_two_runs_per_configuration(kind: str) -> None:
    """The same with two 1-minute runs per configuration (batches never cross runs; the
    run-to-run variance is estimated too)."""
    cell = run_cell(kind, 60, 30, runs=2, seed=15)
    k = sum(t.significant for t in cell.tallies.values())
    assert k <= 2, cell.tallies  # 180 tests at 1 %: binomial 99 % upper bound ~ 5
    covered = sum(t.covered for t in cell.tallies.values())
    shown = sum(t.with_ci for t in cell.tallies.values())
    assert shown and covered / shown >= 0.94


def test_power_for_a_tail_shift_and_inconclusive_when_short() -> None:
    """A +10 % tail at 10 minutes of independent samples: found at p99 and p99.9;
    the median (unchanged) is not called; p99.99 and short data say how much more."""
    cell = run_cell("independent", 600, 12, shifted=True, seed=12)
    assert cell.tallies["p99"].significant >= 11 and cell.tallies["p99.9"].significant >= 9
    assert cell.tallies["median"].significant == 0
    assert cell.tallies["p99.99"].inconclusive + cell.tallies["p99.99"].significant == 12
    short = run_cell("ar1-0.999", 60, 10, shifted=True, seed=13, stats=TAIL_STATS)
    assert short.tallies["p99.9"].inconclusive >= 9  # "needs longer or repeated runs"


def test_power_with_bursts() -> None:
    """Power that needs the unbiased standard errors (VIF interpolated between the
    coarse edges, mean of the Woodruff half-widths, each bound from the sides it is
    about): 3-s bursts at 1 hour, +10 % at p99.9 and p99.99 is found in ~98 % of pairs
    (bench/calibrate_compare.py; the larger-of-two standard errors: 65-71 %), and
    every interval shown holds the true ratio 1.1."""
    cell = run_cell("bursts", 3600, 6, shifted=True, seed=17, stats=TAIL_STATS)
    assert cell.tallies["p99.9"].significant + cell.tallies["p99.99"].significant >= 11
    for t in cell.tallies.values():
        assert t.covered == t.with_ci, t


def test_old_runs_without_window_histograms_are_conservative() -> None:
    cell = run_cell("bursts", 60, 30, seed=14, window_hist=False)
    assert sum(t.significant for t in cell.tallies.values()) == 0
