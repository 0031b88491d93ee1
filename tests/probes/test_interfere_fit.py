# SPDX-License-Identifier: MIT
"""The Amdahl fit and the summaries of rtlab.probes on synthetic data (exact)."""

from __future__ import annotations

import pytest

from rtlab.probes.interfere import (
    amdahl_from_times,
    amdahl_speedup,
    fit_amdahl,
    summarize_amdahl,
    summarize_pairs,
)
from rtlab.probes.noise import count_at_least


@pytest.mark.parametrize("p", [0.0, 0.3, 0.7, 0.95, 1.0])
def test_fit_recovers_exact_p(p: float) -> None:
    pts = [(n, amdahl_speedup(p, n)) for n in (1, 2, 4, 8)]
    assert fit_amdahl(pts) == pytest.approx(p, abs=1e-6)


def test_fit_two_points_is_exact() -> None:
    # S(2) = 1 / (0.3 + 0.35) for p = 0.7
    assert fit_amdahl([(1, 1.0), (2, 1 / 0.65)]) == pytest.approx(0.7, abs=1e-9)


def test_fit_least_squares_with_noise() -> None:
    p = 0.8
    pts = [(n, amdahl_speedup(p, n) * f) for n, f in ((2, 1.01), (4, 0.99), (8, 1.0))]
    assert fit_amdahl(pts) == pytest.approx(p, abs=0.02)


def test_fit_needs_n_above_one() -> None:
    with pytest.raises(ValueError):
        fit_amdahl([(1, 1.0)])


def test_medians_ignore_outliers() -> None:
    t1 = [100, 100, 100, 400, 100]
    t2 = [65, 65, 900, 65, 65]
    rows, p = amdahl_from_times({1: t1, 2: t2})
    assert rows[1].speedup == pytest.approx(100 / 65)
    assert rows[1].jitter_ns == 900 - 65
    assert p == pytest.approx(0.7, abs=1e-6)


def test_summaries_from_records() -> None:
    recs = [
        {"type": "header", "probe": "interfere"},
        {"type": "result", "channels": [],
         "interfere": {"mode": "amdahl", "serial_permille": 300, "units": 1,
                       "runs": [{"n": 1, "ns": [1000, 1000]}, {"n": 2, "ns": [650, 650]}]}},
    ]
    s = summarize_amdahl(recs)
    assert s.serial_injected == pytest.approx(0.3)
    assert s.p_fit == pytest.approx(0.7, abs=1e-6)
    pairs = [
        {"type": "result", "channels": [],
         "interfere": {"mode": "pairs", "classes_missing": ["smt"], "runs": [
             {"workload": "chase", "class": "solo", "cpu_b": None, "ns": [100, 100]},
             {"workload": "chase", "class": "same_l3", "cpu_b": 1, "ns": [150, 150]}]}},
    ]
    rows, missing = summarize_pairs(pairs)
    assert missing == ["smt"]
    assert [r.ratio for r in rows] == [1.0, 1.5]


def test_hist_helpers() -> None:
    assert count_at_least([[5, 2], [300, 3]], 200) == 3
    # bucket 256 starts at 256 ns (counted), bucket 128 at 128 ns (not)
    assert count_at_least([[128, 1], [256, 4]], 256) == 4
