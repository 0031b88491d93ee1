# SPDX-License-Identifier: MIT
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from rtlab.analysis.evt import DAY_NS, fit_window_maxima, required_run_ns

W = 1_000_000_000


def test_gumbel_data_fits_and_answers() -> None:
    rng = np.random.default_rng(3)
    maxima = (rng.gumbel(30_000, 2_000, 3600)).astype(np.int64)  # 1 h of 1 s windows
    est = fit_window_maxima(maxima, W)
    assert est.fit_ok and not [w for w in est.warnings if "do not follow" in w]
    assert abs(est.gumbel.mu - 30) < 0.5 and abs(est.gumbel.sigma - 2) < 0.2
    assert abs(est.gev.k) < 0.1
    p_lo, p_hi = est.p_exceed(50_000, DAY_NS), est.p_exceed(80_000, DAY_NS)
    assert 0 < p_hi < p_lo <= 1
    # Gumbel: P(max of 86400 windows > mu + sigma*(ln 86400 + 3)) ~ 1 - exp(-e^-3)
    level = int((30 + 2 * (math.log(86400) + 3)) * 1000)
    truth = 1 - math.exp(-math.exp(-3))
    assert abs(est.gumbel.exceed_within(level / 1000, 86400) - truth) < 0.05
    # the quoted answer is the more pessimistic model's: never below the Gumbel one
    assert est.gumbel.exceed_within(level / 1000, 86400) <= est.p_exceed(level, DAY_NS) < 0.5
    assert est.typical_worst_ns(DAY_NS) > maxima.max()


def test_bimodal_maxima_are_flagged() -> None:
    rng = np.random.default_rng(4)
    maxima = rng.gumbel(30_000, 2_000, 3000)
    maxima[rng.random(3000) < 0.05] = rng.uniform(2e6, 4e6, 1).item()
    est = fit_window_maxima(maxima.astype(np.int64), W)
    assert not est.fit_ok
    assert any("more than one mechanism" in w or "implausible" in w for w in est.warnings)


def test_too_few_windows() -> None:
    est = fit_window_maxima(np.array([1, 2, 3], dtype=np.int64), W)
    assert not est.usable and "only 3" in est.warnings[0]


def test_rule_of_three() -> None:
    assert abs(required_run_ns(DAY_NS, 0.95) / DAY_NS - 2.9957) < 1e-3


def test_interval_covers_the_truth_and_narrows_with_more_windows() -> None:
    # Gumbel(30 µs, 2 µs) window maxima: the true median worst case in 24 h is known
    truth = 30_000 + 2_000 * (math.log(86_400) - math.log(math.log(2)))
    widths = []
    for n in (120, 3600):
        rng = np.random.default_rng(7)
        est = fit_window_maxima(rng.gumbel(30_000, 2_000, n).astype(np.int64), W)
        lo, hi = est.interval("worst", 0, DAY_NS)
        assert lo <= truth <= hi
        assert lo <= est.typical_worst_ns(DAY_NS) <= hi
        p_lo, p_hi = est.interval("p", int(truth), DAY_NS)
        assert p_lo <= 0.5 <= p_hi  # P(max of a day > its median) is 1/2
        widths.append(hi - lo)
    assert widths[1] < widths[0] / 2


def test_short_heavy_tailed_runs_are_flagged() -> None:
    # 60 s of maxima with VM-stall-like outliers: a very heavy tail, extrapolated 1440x
    rng = np.random.default_rng(8)
    maxima = rng.gumbel(200_000, 60_000, 60)
    maxima[[6, 11, 13, 41]] = [1.2e6, 4.5e6, 16e6, 8e6]
    est = fit_window_maxima(maxima.astype(np.int64), W)
    assert est.gev.k < -0.5
    assert any("very heavy tail" in w for w in est.warnings)
    assert any("1,440 times the measured" in w for w in est.warnings)
    lo, hi = est.interval("worst", 0, DAY_NS)
    assert hi > 10 * lo  # the interval says how little a minute tells about a day



def test_bounded_tail_only_on_evidence() -> None:
    rng = np.random.default_rng(11)
    # exactly Gumbel: the fitted shape is positive about half of the time, never evidence
    gum = fit_window_maxima(rng.gumbel(30_000, 2_000, 900).astype(np.int64), W)
    assert not gum.bounded and not any("bounded tail" in w for w in gum.warnings)
    assert gum.model == "the more pessimistic of GEV and Gumbel"
    # a GEV with k = 0.2 (xi = -0.2): bounded with evidence, the GEV is quoted as fitted
    t = -np.log(rng.random(900))
    x = 30_000 + 2_000 * (1 - t ** 0.2) / 0.2
    est = fit_window_maxima(x.astype(np.int64), W)
    assert est.bounded and est.k_se and est.gev.k / est.k_se > 2.326
    assert any("bounded tail" in w for w in est.warnings)
    truth = 30_000 + 2_000 * (1 - (math.log(2) / 86_400) ** 0.2) / 0.2
    assert abs(est.typical_worst_ns(DAY_NS) / truth - 1) < 0.03  # not 1.36x any more
    d = est.to_dict()
    # stated 95 % since the tail model (90 % before: the same percentiles covered less)
    assert d["bounded_tail"] is True and d["interval_level"] == 0.95
    assert {c["name"] for c in d["checks"]} == {"peaks over threshold", "block size x10",
                                                "tail model"}


def test_bootstrap_blocks_follow_the_dependence_between_windows() -> None:
    rng = np.random.default_rng(12)
    iid = rng.gumbel(30_000, 2_000, 3600)
    est = fit_window_maxima(iid.astype(np.int64), W)
    # ceil(3600^(1/3)) = 16, rounded up to whole groups of the block-size check (x10)
    assert est.dependence_lag <= 1 and est.block_windows == 20
    # each value lasts 8 windows (moving maximum): correlated neighbours
    y = rng.gumbel(30_000 - 2_000 * math.log(8), 2_000, 3600 + 7)
    burst = np.lib.stride_tricks.sliding_window_view(y, 8).max(axis=1)
    dep = fit_window_maxima(burst.astype(np.int64), W)
    assert dep.dependence_lag >= 5 and dep.block_windows >= 4 * dep.dependence_lag
    # the quoted model's percentiles (the tail model's upper end has a spread of its own)
    lo_i, hi_i = est.interval("worst", 0, DAY_NS, tail=False)
    lo_d, hi_d = dep.interval("worst", 0, DAY_NS, tail=False)
    assert hi_d - lo_d > 1.3 * (hi_i - lo_i)  # fewer independent windows: wider


def test_rare_spikes_seen_in_the_run_fail_the_tail_checks() -> None:
    rng = np.random.default_rng(13)
    x = rng.gumbel(30_000, 2_000, 900)
    spikes = rng.random(900) < 0.005
    x[spikes] = rng.gumbel(150_000, 20_000, int(spikes.sum()))
    assert spikes.sum() >= 2
    est = fit_window_maxima(x.astype(np.int64), W)
    assert not est.fit_ok and est.failed_checks
    assert any("heavier tail" in w for w in est.warnings)


def test_long_runs_bootstrap_m_out_of_n_with_the_spread_rescaled() -> None:
    rng = np.random.default_rng(14)
    truth = 30_000 + 2_000 * (math.log(86_400) - math.log(math.log(2)))
    est = fit_window_maxima(rng.gumbel(30_000, 2_000, 86_400).astype(np.int64), W)
    lo, hi = est.interval("worst", 0, DAY_NS, tail=False)
    assert lo <= truth <= hi
    assert (hi - lo) / truth < 0.03  # rescaled to 86 400 windows, not 20 000
    # the tail model's refits are rescaled too; its upper end is the price of not taking
    # the far tail's shape from the bulk (median 1.05x the truth over 150 such runs)
    lo_t, hi_t = est.interval("worst", 0, DAY_NS)
    assert lo_t == lo and hi <= hi_t < 1.10 * truth


def test_the_upper_end_follows_a_tail_that_gets_heavier_beyond_the_bulk() -> None:
    # 8 h of lognormal window maxima (log-sd 0.35): the GEV fitted to all of them sees a
    # shape ~0, but the local shape of the tail grows with the level; the model's 24-h
    # worst case is ~2.4 % low, more than its bootstrap spread: its interval misses in a
    # third of such runs, as in this one
    rng = np.random.default_rng(19)
    x = np.exp(rng.normal(math.log(30_000), 0.35, 28_800))
    truth = 30_000 * math.exp(0.35 * NormalDist().inv_cdf(0.5 ** (1 / 86_400)))
    est = fit_window_maxima(x.astype(np.int64), W)
    assert est.tail is not None and est.tail.m == 509 and est.tail.rate == 509 / 28_800
    lo_m, hi_m = est.interval("worst", 0, DAY_NS, tail=False)
    lo, hi = est.interval("worst", 0, DAY_NS)
    assert hi_m < truth <= hi and lo == lo_m  # the model alone misses, the tail model holds
    assert est.typical_worst_ns(DAY_NS) < truth < est.tail_worst_ns(DAY_NS) < hi
    budget = 2 * int(x.max())
    p_truth = -math.expm1(86_400 * math.log1p(-0.5 * math.erfc(
        math.log(budget / 30_000) / 0.35 / math.sqrt(2))))
    assert est.interval("p", budget, DAY_NS, tail=False)[1] < p_truth
    assert est.interval("p", budget, DAY_NS)[1] > p_truth
    d = est.to_dict()
    assert d["typical_worst_24h_interval_upper_from"] == "tail model"
    assert d["tail_model"]["exceedances"] == 509 and d["typical_worst_24h_tail_ns"] > truth
    assert d["typical_worst_24h_interval_ns"] == [lo, hi]
    # the tail model only says something above its threshold: below, P is the model's
    below = int(est.tail.u * 1000) - 1
    assert est.interval("p", below, DAY_NS) == est.interval("p", below, DAY_NS, tail=False)


def test_the_tail_model_check_fires_when_the_top_extrapolates_higher() -> None:
    # lognormal maxima with log-sd 0.25: the bulk looks bounded (k ~ 0.08), the far tail is
    # not; 24 h of windows: the model's 24-h worst case is ~10 % low
    rng = np.random.default_rng(16)
    x = np.exp(rng.normal(math.log(30_000), 0.25, 86_400))
    est = fit_window_maxima(x.astype(np.int64), W)
    c = next(c for c in est.checks if c.name == "tail model")
    assert c.failed and c.statistic > 1.05 and not est.fit_ok
    assert any("largest 881 window maxima alone" in w for w in est.warnings)
    gum = fit_window_maxima(rng.gumbel(30_000, 2_000, 86_400).astype(np.int64), W)
    assert not next(c for c in gum.checks if c.name == "tail model").failed
