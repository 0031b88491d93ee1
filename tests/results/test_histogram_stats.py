# SPDX-License-Identifier: MIT
"""The histogram mirror and the statistics, checked against brute force."""

from __future__ import annotations

import math
import random

import pytest

from rtlab.results.histogram import (
    LogLinHistogram,
    bucket_bounds,
    bucket_count,
    index_of,
)
from rtlab.results.summary import mean, mode, percentile, supported


def test_index_math_matches_contract_examples() -> None:
    assert bucket_count() == 7424
    assert [index_of(v) for v in (0, 1, 127, 128, 129, 255, 256, 258)] == [
        0, 1, 127, 128, 129, 255, 256, 257]
    assert index_of(2**64 - 1) == 7423
    assert bucket_bounds(128) == (128, 1)
    assert bucket_bounds(256) == (256, 2)
    assert bucket_bounds(7423) == (2**64 - 2**56, 2**56)
    with pytest.raises(ValueError):
        index_of(-1)
    with pytest.raises(ValueError):
        bucket_bounds(7424)


def test_every_value_lies_in_its_bucket_and_width_is_bounded() -> None:
    rng = random.Random(7)
    values = [rng.randrange(0, 2**64) for _ in range(3000)] + list(range(0, 2000))
    for v in values:
        lo, width = bucket_bounds(index_of(v))
        assert lo <= v < lo + width
        assert width == 1 or width / lo <= 1 / 128


def test_json_roundtrip_and_exact_merge() -> None:
    rng = random.Random(3)
    a = [rng.randrange(1, 10**7) for _ in range(5000)]
    b = [rng.randrange(1, 10**9) for _ in range(5000)]
    ha, hb = LogLinHistogram.from_values(a), LogLinHistogram.from_values(b)
    assert LogLinHistogram.from_json(ha.to_json()) == ha
    assert ha.merge(hb) == LogLinHistogram.from_values(a + b)
    assert ha.merge(hb).total == 10000
    with pytest.raises(ValueError):
        LogLinHistogram.from_json({"layout": "linear", "sub_bits": 7, "buckets": []})
    with pytest.raises(ValueError):
        LogLinHistogram.from_json({"layout": "loglin", "sub_bits": 7, "buckets": [[9999, 1]]})


def brute_percentile(sorted_values: list[int], p: float) -> int:
    rank = math.ceil(p / 100 * len(sorted_values))
    return sorted_values[rank - 1]


@pytest.mark.parametrize("seed", range(5))
def test_percentiles_within_one_bucket_of_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([2_000, 20_000, 200_000])
    values = [int(rng.lognormvariate(9.5, 0.6)) for _ in range(n)]
    values += [rng.randrange(1_000_000, 50_000_000) for _ in range(n // 500)]
    values.sort()
    hist = LogLinHistogram.from_values(values)
    for p in (1.0, 50.0, 90.0, 99.0, 99.9, 99.99):
        got = percentile(hist, p, values[0], values[-1])
        if not supported(p, len(values)):
            assert got is None
            continue
        exact = brute_percentile(values, p)
        assert got is not None and got >= exact  # upper edge: never optimistic
        assert (got - exact) / exact <= 1 / 128, (p, got, exact)
    assert mean(sum(values), len(values)) == pytest.approx(sum(values) / len(values))


def test_na_rule_and_clamping() -> None:
    values = list(range(1000, 2000))  # N = 1000
    hist = LogLinHistogram.from_values(values)
    assert percentile(hist, 99.9, 1000, 1999) is not None  # N*(1-p) = 1
    assert percentile(hist, 99.99, 1000, 1999) is None  # 0.1 < 1: n/a
    assert percentile(hist, 100.0, 1000, 1999) is None
    # the top bucket's upper edge is clamped to the exact max
    one = LogLinHistogram.from_values([1_000_001, 1_000_001, 5])
    assert percentile(one, 50.0, 5, 1_000_001) == 1_000_001
    assert percentile(LogLinHistogram(), 50.0) is None
    assert supported(99.99, 10_000) and not supported(99.99, 9_999)


def test_mode_is_midpoint_of_fullest_bucket() -> None:
    hist = LogLinHistogram.from_values([13_000] * 10 + [14_100] * 3 + [5])
    lo, width = bucket_bounds(index_of(13_000))
    assert mode(hist) == lo + (width - 1) // 2
    assert mode(LogLinHistogram()) is None
    # Regression: buckets double in width at 2^14 ns; the mode is the densest bucket, not
    # the one with the most counts (which a 2x wider bucket just above 16384 ns would win).
    below = [16_000] * 10  # width-128 bucket
    above = [16_500] * 15  # width-256 bucket: more counts, lower density
    lo, width = bucket_bounds(index_of(16_000))
    assert mode(LogLinHistogram.from_values(below + above)) == lo + (width - 1) // 2
    assert mean(0, 0) is None


def test_index_array_is_index_of_for_every_value() -> None:
    import numpy as np

    from rtlab.results.histogram import index_array, index_of

    v = np.concatenate([np.arange(0, 4096),
                        np.random.default_rng(3).integers(0, 2**51, 20_000),
                        2 ** np.arange(0, 51), 2 ** np.arange(1, 51) - 1])
    for sub_bits in (2, 7):
        assert index_array(v, sub_bits).tolist() == [index_of(int(x), sub_bits) for x in v]
