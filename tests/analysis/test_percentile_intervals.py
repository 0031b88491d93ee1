# SPDX-License-Identifier: MIT
"""Calibration of the percentile confidence intervals (fast version of
bench/calibrate_percentiles.py): fixed seeds, known truth, coverage of the stated
95 % within 5 points on independent data; plus the ranks against the exact binomial,
the SLO decisions on them and where the intervals are shown."""

from __future__ import annotations

import json
import math
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from tests.support.synth import synthetic_result

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import calibrate_percentiles as cal

from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.analysis.stats import DEFAULT_LEVEL, channel_intervals, rank_interval, samples_to_bound
from rtlab.probes.registry import shape as probe_shape


def _binom_cdf(n: int, p: Fraction, k: int) -> float:
    """P(Binomial(n, p) <= k), summed term by term (independently of rtlab's code)."""
    if k < 0:
        return 0.0
    lp, lq = math.log(p), math.log1p(-float(p))
    return math.fsum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                              + i * lp + (n - i) * lq) for i in range(k + 1))


@pytest.mark.parametrize("n,p", [(50, 50.0), (200, 90.0), (500, 99.0), (2000, 99.0),
                                 (2000, 99.9), (300, 99.9), (1000, 50.0)])
def test_ranks_are_the_exact_binomial_ones(n: int, p: float) -> None:
    """Each end misses with probability <= 2.5 %, and no rank closer to the middle does."""
    low, up = rank_interval(n, p)
    frac = Fraction(str(p)) / 100
    alpha = (1 - DEFAULT_LEVEL) / 2
    if low is not None:  # X_(l) > x_p  <=>  K <= l - 1
        assert _binom_cdf(n, frac, low - 1) <= alpha + 1e-12
        if low < n:
            assert _binom_cdf(n, frac, low) > alpha
    else:
        assert _binom_cdf(n, frac, 0) > alpha
    if up is not None:  # X_(u) < x_p  <=>  K >= u
        assert 1 - _binom_cdf(n, frac, up - 1) <= alpha + 1e-12
        if up > 1:
            assert 1 - _binom_cdf(n, frac, up - 2) > alpha
    else:
        assert 1 - _binom_cdf(n, frac, n - 1) > alpha


def test_p999999_at_a_million_is_bounded_below_only() -> None:
    """10^6 samples cannot bound p99.9999 from above (p^N > 2.5 %): the 4th largest bounds it
    from below; about 3.7 million samples are needed for the max to bound it at all."""
    assert rank_interval(1_000_000, 99.9999) == (999_997, None)
    assert samples_to_bound(99.9999) == 3_688_878
    low, up = rank_interval(4_000_000, 99.9999)
    assert up == 4_000_000 and low is not None


def test_huge_n_uses_the_normal_branch_consistently() -> None:
    exact = rank_interval(10_000_000, 50.0)
    approx = rank_interval(10_000_000_000, 50.0)
    assert exact[0] is not None and exact[1] is not None
    assert abs((5_000_000 - exact[0]) - 1.96 * math.sqrt(2.5e6)) <= 3
    assert approx[0] is not None and approx[1] is not None
    assert abs((5_000_000_000 - approx[0]) - 1.96 * math.sqrt(2.5e9)) <= 3


# (family, n, percentiles, runs, top): top > 0 draws only the largest `top` samples
CELLS = [
    ("lognormal", 10_000, (99.0, 99.9), 300, 0),
    ("gpd0.3", 10_000, (99.0, 99.9), 300, 0),
    ("bounded", 30_000, (99.9, 99.99), 200, 0),
    ("exp", 1_000_000, (99.99, 99.9999), 1000, 300),
    ("gpd0.3", 1_000_000, (99.9999,), 1000, 50),
    ("bounded", 10_000_000, (99.9999,), 600, 100),
]


@pytest.mark.parametrize("family,n,qs,reps,top", CELLS)
def test_coverage_on_independent_data(family: str, n: int, qs: tuple[float, ...], reps: int,
                                      top: int) -> None:
    """Coverage within 5 points of 95 % (the exact method guarantees >= 95 %; the
    histogram's outward bucket edges only add), never far above either."""
    for cell in cal.run_cells(family, n, qs, reps, seed=1000 + n % 977 + reps, top=top):
        assert 0.90 <= cell.coverage <= 1.0, cell.row()
        assert cell.miss_low / reps <= 0.05, cell.row()  # the unsafe side
        if cell.p == 99.9999 and n == 1_000_000:
            assert cell.unbounded == reps  # never bounded above at 10^6


def test_clustered_samples_are_flagged_and_widened() -> None:
    """AR(1) log-latency (phi 0.999, 1000-sample windows): the per-window histograms and
    maxima show the dependence and the interval is widened; independent data are (almost)
    never flagged."""
    ar = cal.run_cells("ar0.999", 100_000, (99.9,), 30, seed=7)[0]
    assert ar.widened >= 27
    iid = cal.run_cells("lognormal", 100_000, (99.9, 99.99), 40, seed=8)
    assert all(c.widened <= 2 for c in iid)


@pytest.mark.parametrize("family", ["ar0.99", "ar0.999"])
def test_dependent_samples_keep_the_stated_coverage(family: str) -> None:
    """With per-window histograms (batch means of consecutive windows) the intervals hold
    the stated 95 % within 5 points on slowly wandering AR(1) log-latency too (it was
    34-79 % with the window-maxima clustering check alone, which is what runs of older
    engines still get)."""
    for cell in cal.run_cells(family, 100_000, (99.0, 99.9), 60, seed=21):
        assert cell.coverage >= 0.90, cell.row()
        assert cell.miss_low / cell.reps <= 0.05, cell.row()
    old = cal.run_cells(family, 100_000, (99.0,), 60, seed=21, window_hist=False)[0]
    assert old.coverage < 0.85, old.row()


# --- where the intervals are used -----------------------------------------------------

def test_slo_met_violated_undecided() -> None:
    r = synthetic_result(windows=1000, median_ns=10_000, sigma=0.25)  # 10^6 per channel
    met = evaluate_slo(parse_slo("p99.99 < 100us"), r, shape_of=probe_shape)
    assert met.verdict == "met" and met.passed
    bad = evaluate_slo(parse_slo("p99 < 10us"), r, shape_of=probe_shape)
    assert bad.verdict == "violated" and not bad.passed and "VIOLATED" in bad.summary()
    short = evaluate_slo(parse_slo("p99.9999 < 100us and max < 1ms"), r, shape_of=probe_shape)
    assert short.verdict == "undecided" and not short.passed
    assert "NOT DECIDED" in short.summary() and "SLO met" not in short.summary()
    o = short.undecided[0]
    assert o.status == "undecided" and o.interval is not None and o.interval.high_ns is None
    assert o.needed_samples is not None and o.needed_samples >= 3_688_878
    assert o.needed_ns is not None and "too short to decide" in o.reason
    # a bound inside the interval is undecided too, and a violation wins over undecided
    ivs = [channel_intervals(c)[99.99] for c in r.phases[0].channels]
    bound = max(iv.value_ns or 0 for iv in ivs)
    assert all(iv.low_ns is not None and iv.high_ns is not None and
               iv.low_ns < bound < iv.high_ns for iv in ivs)
    assert evaluate_slo(parse_slo(f"p99.99 < {bound}ns"), r,
                        shape_of=probe_shape).verdict == "undecided"
    both = evaluate_slo(parse_slo("p99.9999 < 100us and p50 < 1us"), r, shape_of=probe_shape)
    assert both.verdict == "violated" and "2 undecided" in both.summary()
    assert both.to_dict()["verdict"] == "violated"


def test_slo_lower_bounds_decide_unsupported_percentiles() -> None:
    """2000 samples cannot support p99.99 (n/a), but its interval's lower end can still
    show a bound violated; never met."""
    r = synthetic_result(windows=2, per_window=1000, median_ns=10_000)
    assert evaluate_slo(parse_slo("p99.99 < 1us"), r, shape_of=probe_shape).verdict == "violated"
    rep = evaluate_slo(parse_slo("p99.99 < 1s"), r, shape_of=probe_shape)
    assert rep.verdict == "undecided" and "cannot support p99.99" in rep.outcomes[0].reason


def test_exports_carry_the_intervals() -> None:
    from rtlab.cli.cmd_results import show_json
    from rtlab.report.exporters import EXPORTERS
    from rtlab.report.terminal import build_tables
    from rtlab.results.model import load_result

    r = synthetic_result(windows=1000, median_ns=10_000, sigma=0.25)
    doc = json.loads(EXPORTERS["json"].serialize(r))
    assert load_result(doc).to_dict() == r.to_dict()  # the derived block is not read back
    pis = doc["derived"]["percentile_intervals"]
    assert pis["level"] == 0.95
    cpu0 = pis["phases"][0]["channels"][0]["percentiles"]
    assert cpu0["p99.9999"]["high_ns"] is None and cpu0["p99.9999"]["wide"]
    assert cpu0["p99"]["low_ns"] <= cpu0["p99"]["value_ns"] <= cpu0["p99"]["high_ns"]
    assert pis["phases"][0]["channels"][-1]["name"] == "all"
    shown = show_json(r)["phases"][0]["channels"][0]["statistics"]
    assert shown["percentile_intervals"]["p99.99"]["wide"] is False
    table = build_tables(r)[0]
    assert table.caption is not None and "p99.9999 [" in str(table.caption)
    md = EXPORTERS["markdown"].serialize(r).decode()
    assert "\\*" in md and "wide 95%" in md
    r.status = "invalid"
    assert json.loads(EXPORTERS["json"].serialize(r))["derived"]["percentile_intervals"] is None
