# SPDX-License-Identifier: MIT
"""Comparisons a tune can rest on (issue 27): k runs per configuration keep the power of
one run of the same total length; the interval of a short correlated run is not too narrow
where it is shown; a worst case far beyond the run says so in its own output. Small
simulations with fixed seeds and bounds far from the measured values (the full
calibration: bench/calibrate_runs.py, docs/report.md "Calibration")."""

from __future__ import annotations

import math

from rtlab.analysis.calibrate import run_cell
from rtlab.analysis.compare_stats import RUNS_TEST_LEVEL, f_sf, with_runs
from rtlab.analysis.evt import DAY_NS, extrapolation_warning
from rtlab.analysis.evt_calibration import RARE
from rtlab.analysis.evt_calibration import run_cell as evt_cell


def test_f_distribution_tail() -> None:
    # F(1, inf) is chi-square(1): P(F > 3.841) = 0.05; F(4, 20) upper 5 % point 2.866
    assert abs(f_sf(3.841459, 1, math.inf) - 0.05) < 1e-4
    assert abs(f_sf(2.866081, 4, 20) - 0.05) < 1e-4
    assert f_sf(0.0, 3, 10) == 1.0


def test_runs_variance_replaces_only_when_significantly_larger() -> None:
    # one degree of freedom: 3x the batches' variance is no evidence of a run effect
    assert with_runs(1.0, 20, (3.0, 1)) == (1.0, 20, False)
    # seven runs at 5x the batches' (F(7, 20) far beyond its 1 % point): the runs decide
    assert with_runs(1.0, 20, (5.0, 7)) == (5.0, 7, True)
    assert f_sf(5.0, 7, 20) < RUNS_TEST_LEVEL
    # smaller: never; no batches: the runs; one run: the batches
    assert with_runs(1.0, 20, (0.5, 7)) == (1.0, 20, False)
    assert with_runs(None, math.inf, (2.0, 3)) == (2.0, 3, True)
    assert with_runs(1.0, 20, None) == (1.0, 20, False)


def test_two_runs_have_the_power_of_one_twice_as_long() -> None:
    # independent data, +10 % tail, p99.9: before, two 1-min runs had less power than one
    # (72 % against 100 %: one degree of freedom decided half of them); now as one 2-min run
    two = run_cell("independent", 60, 30, shifted=True, runs=2, seed=2701)
    one = run_cell("independent", 60, 30, shifted=True, runs=1, seed=2702)
    assert one.tallies["p99.9"].significant >= 26
    assert two.tallies["p99.9"].significant >= 28
    assert two.tallies["p99"].significant == 30


def test_many_short_runs_keep_power_and_false_positive_rate() -> None:
    # rtlab tune's case: 8 runs of 10 s per side
    ab = run_cell("independent", 10, 20, shifted=True, runs=8, seed=2703)
    aa = run_cell("independent", 10, 40, runs=8, seed=2704)
    assert ab.tallies["p99"].significant >= 18
    assert ab.tallies["p99.9"].significant >= 12
    assert sum(t.significant for t in aa.tallies.values()) <= 2
    assert all(t.covered >= t.with_ci - 1 for t in aa.tallies.values())


def test_short_correlated_run_intervals_cover_where_shown() -> None:
    # AR(1) phi 0.99, 1-min runs, B's tail +10 %: the p99 interval was shown only when the
    # batches underrated the VIF, and then covered the truth in ~95 % (stated 99 %)
    c = run_cell("ar1-0.99", 60, 120, shifted=True, seed=2705)
    t = c.tallies["p99"]
    assert t.with_ci >= 3 and t.covered == t.with_ci


def test_worst_case_far_beyond_the_run_says_so() -> None:
    for seconds in (60, 900, 3600, 86_400):
        w = extrapolation_warning(seconds * 10**9)
        assert w is not None and "24-hour numbers" in w and "unseen" in w
    assert extrapolation_warning(5 * DAY_NS) is None
    # a second mechanism once per ~33 min: 15-min runs miss it on the unsafe side most of
    # the time; none of those misses may be silent
    c = evt_cell(RARE, 900, 40, seed=2706)
    assert c.worst_low >= 15
    assert c.silent_low == 0 and c.extrapolated == c.reps


def test_the_html_report_shows_the_extrapolation_line() -> None:
    import numpy as np

    from rtlab.analysis.calibrate import run_from_samples, simulate
    from rtlab.report.html import _evt_section

    run = run_from_samples("r", simulate("independent", 120, np.random.default_rng(27)), "k")
    html = _evt_section(run.phases[0].channels, [], "cpu1")
    assert "the 24-hour numbers extrapolate beyond the data" in html
    assert "720 times the measured 120 s" in html
