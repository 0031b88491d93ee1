# SPDX-License-Identifier: MIT
"""Percentiles, mean and mode from a log-linear histogram.

Percentile rule (documented in docs/usage.md):

* rank = ceil(p/100 * N) (1-based; the smallest value with at least p % of the
  samples at or below it);
* the value is the upper edge of the bucket holding that rank, clamped to the
  exact [min, max] of the channel, so the relative error is below the bucket
  width (< 1/128 with sub_bits 7) and always on the safe (high) side;
* the percentile is "n/a" (None) when N * (1 - p/100) < 1: with fewer samples
  than that, no sample lies above the percentile and it would just be the max.

The result model summarises its channels with these; the analysis layer above builds
on them (rtlab.analysis.stats: confidence intervals).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

import numpy as np

DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 99.0, 99.9, 99.99, 99.9999)


class BucketLike(Protocol):
    @property
    def lo(self) -> int: ...
    @property
    def hi(self) -> int: ...
    @property
    def count(self) -> int: ...


class HistogramLike(Protocol):
    @property
    def total(self) -> int: ...
    def buckets(self) -> Iterator[BucketLike]: ...


def _exact(p: float) -> Fraction:
    # Fraction(str(p)) keeps 99.99 as 9999/100 rather than its binary approximation.
    frac = Fraction(str(p))
    if not 0 < frac <= 100:
        raise ValueError(f"percentile must be in (0, 100]: {p}")
    return frac


def supported(p: float, n: int) -> bool:
    """True if N samples are enough to report percentile p."""
    return n > 0 and n * (1 - _exact(p) / 100) >= 1


def percentile(
    hist: HistogramLike, p: float, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    """Percentile p (0 < p <= 100) in ns, or None when too few samples support it."""
    n = hist.total
    if not supported(p, n):
        return None
    rank = math.ceil(_exact(p) / 100 * n)
    value: int | None = None
    arrays = getattr(hist, "bucket_arrays", None)
    try:  # a LogLinHistogram: no Bucket object per bucket
        _, hi, counts = arrays() if arrays is not None else (None, None, None)
    except OverflowError:  # beyond int64: Python integers below
        hi = counts = None
    if hi is not None and counts is not None:
        value = int(hi[int(np.searchsorted(np.cumsum(counts), rank, side="left"))])
    else:
        seen = 0
        for bucket in hist.buckets():
            seen += bucket.count
            if seen >= rank:
                value = bucket.hi
                break
    if value is None:  # pragma: no cover - rank <= n always finds a bucket
        return None
    if maximum is not None:
        value = min(value, maximum)
    if minimum is not None:
        value = max(value, minimum)
    return value


def mean(sum_ns: int, n: int) -> float | None:
    """Exact mean from the exact sum."""
    return sum_ns / n if n else None


def mode(hist: HistogramLike) -> int | None:
    """Midpoint of the bucket with the most samples per *relative* width (lowest on ties).

    Raw counts would be biased: a log-linear bucket doubles in width at each power of
    two, so the first bucket above 2^k collects twice the samples of its neighbour below.
    Dividing by the relative width (width / value) removes that jump, and unlike a
    per-ns density it does not let a lone sample in a 1-ns-wide bucket win.
    """
    best = None
    best_score = (0, 1)  # count * midpoint / width, kept as a fraction
    for bucket in hist.buckets():
        width = bucket.hi - bucket.lo + 1  # hi is inclusive
        mid = max(bucket.lo + (bucket.hi - bucket.lo) // 2, 1)
        num, den = bucket.count * mid, width
        if num * best_score[1] > best_score[0] * den:
            best, best_score = bucket, (num, den)
    if best is None:
        return None
    return best.lo + (best.hi - best.lo) // 2


def percentile_label(p: float) -> str:
    """'p99.99' for 99.99, 'p50' for 50.0."""
    text = f"{p:.6f}".rstrip("0").rstrip(".")
    return f"p{text}"


@dataclass(frozen=True)
class ChannelSummary:
    """The numbers a report shows for one channel (or a merge of channels). All in ns."""

    name: str
    cpu: int | None
    samples: int
    missed: int
    min_ns: int | None
    max_ns: int | None
    max_at_ns: int | None
    mean_ns: float | None
    mode_ns: int | None
    percentiles: dict[float, int | None] = field(default_factory=dict)

    def p(self, q: float) -> int | None:
        return self.percentiles.get(q)


def summarize(
    name: str,
    cpu: int | None,
    hist: HistogramLike,
    *,
    samples: int,
    missed: int,
    min_ns: int | None,
    max_ns: int | None,
    sum_ns: int,
    max_at_ns: int | None = None,
    percentiles: Iterable[float] = DEFAULT_PERCENTILES,
) -> ChannelSummary:
    return ChannelSummary(
        name=name,
        cpu=cpu,
        samples=samples,
        missed=missed,
        min_ns=min_ns,
        max_ns=max_ns,
        max_at_ns=max_at_ns,
        mean_ns=mean(sum_ns, samples),
        mode_ns=mode(hist),
        percentiles={q: percentile(hist, q, min_ns, max_ns) for q in percentiles},
    )
