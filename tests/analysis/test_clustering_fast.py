# SPDX-License-Identifier: MIT
"""The clustering of tail samples (rtlab.analysis.stats) is computed from counts (hit
windows, adjacent hit pairs, distinct samples per window) instead of a float pass per
lag and per window (issue 28: the 24-CPU week report had slowed from ~1.1 s to 3.4 s).
These tests hold it to the plain definition, written out here, on window series with
gaps, varying samples per window, clustered and independent tails, and check that a
report asks each channel's windows once for both its own row and the merged row."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rtlab.analysis import stats
from rtlab.analysis.stats import Clustering, channel_intervals, clustering
from rtlab.results.histogram import LogLinHistogram, bucket_bounds, index_array
from rtlab.results.model import Channel
from rtlab.results.windows import WindowMaxima


def _plain(hist: LogLinHistogram, w: WindowMaxima, target: float) -> Clustering | None:
    """The definition, one float pass per window and per lag."""
    idx = w.index.astype(np.int64)
    wmax = w.max_ns.astype(np.int64)
    wn = w.samples.astype(np.float64)
    nwin = len(idx)
    if nwin < stats.MIN_WINDOWS or nwin / 3 < 30:
        return None
    buckets = list(hist.buckets())
    hi = np.array([b.hi for b in buckets], dtype=np.int64)
    cum = np.cumsum([b.count for b in buckets])
    n = int(cum[-1])
    above = n - cum
    j = int(np.argmin(np.abs(above - min(max(target, 30.0), nwin / 3))))
    k = int(above[j])
    if k < 10:
        return None
    thr = int(hi[j])
    hit = wmax > thr
    adjacent = np.concatenate(([False], np.diff(idx) == 1))
    prev_hit = np.concatenate(([False], hit[:-1])) & adjacent
    runs = int(np.count_nonzero(hit & ~prev_hit))
    h = -np.expm1(-k * wn / n)
    h_prev = np.concatenate(([0.0], h[:-1])) * adjacent
    expected = float(np.sum(h * (1 - h_prev)))
    hits, hits_expected = int(np.count_nonzero(hit)), float(np.sum(h))
    x = hit.astype(np.float64) - hits / nwin
    var = float(np.dot(x, x))
    total = 0.0
    if var > 0:
        for lag in range(1, max(2, nwin // 4)):
            rho = float(np.dot(x[:-lag], x[lag:])) / var
            if rho <= 2 / math.sqrt(nwin):
                break
            total += rho
    theta = min(1.0, min(1.0, hits / hits_expected) / (1 + 2 * total))
    z_runs = (runs - expected) / math.sqrt(expected)
    z_hits = (hits - hits_expected) / math.sqrt(hits_expected)
    return Clustering(thr, k, runs, expected, theta,
                      (z_runs < -2.33 or z_hits < -2.33) and theta < 0.9)


def _series(kind: str, nwin: int, rng: np.random.Generator) -> WindowMaxima:
    index = np.arange(nwin, dtype=np.int64)
    samples = np.full(nwin, 1000, dtype=np.int64)
    wmax = rng.gumbel(60_000, 4_000, nwin)
    if kind == "gaps":  # lost windows: index jumps
        index = np.sort(rng.choice(3 * nwin, nwin, replace=False)).astype(np.int64)
    if kind == "varying":  # samples per window differ (a short last window, jitter)
        samples = rng.integers(990, 1011, nwin)
        samples[-1] = 37
    if kind == "wide":  # more distinct sample counts than the bincount path takes
        samples = rng.integers(1, 100_000, nwin)
    if kind == "clustered":  # bursts: runs of 20 consecutive high windows
        for start in rng.integers(0, nwin - 20, nwin // 200):
            wmax[start:start + 20] += 40_000
    return WindowMaxima(index, wmax.astype(np.int64), samples)


def _hist(w: WindowMaxima, rng: np.random.Generator) -> LogLinHistogram:
    """Window maxima plus body samples below them: consistent like a real channel's."""
    counts: dict[int, int] = {}
    for i, c in zip(*np.unique(index_array(w.max_ns), return_counts=True), strict=True):
        counts[int(i)] = int(c)
    body = rng.lognormal(math.log(12_000), 0.25, 200_000)
    body = body[body < int(w.max_ns.min())]
    for i, c in zip(*np.unique(index_array(body.astype(np.int64)), return_counts=True),
                    strict=True):
        counts[int(i)] = counts.get(int(i), 0) + int(c) * 50
    return LogLinHistogram(7, counts)


@pytest.mark.parametrize("kind", ["plain", "gaps", "varying", "wide", "clustered"])
def test_clustering_matches_its_definition(kind: str) -> None:
    rng = np.random.default_rng(abs(hash(kind)) % 2**32)
    w = _series(kind, 20_000, rng)
    hist = _hist(w, rng)
    n = hist.total
    seen_significant = False
    for q in (99.0, 99.9, 99.99, 99.999, 99.9999):
        target = n * (1 - q / 100)
        fast, plain = clustering(hist, w, target), _plain(hist, w, target)
        assert (fast is None) == (plain is None)
        if fast is None or plain is None:
            continue
        assert (fast.threshold_ns, fast.exceedances, fast.clusters, fast.significant) == (
            plain.threshold_ns, plain.exceedances, plain.clusters, plain.significant)
        assert fast.expected == pytest.approx(plain.expected, rel=1e-9)
        assert fast.theta == pytest.approx(plain.theta, rel=1e-9)
        seen_significant |= fast.significant
    if kind == "clustered":  # the widening path is exercised too
        assert seen_significant


def test_too_few_windows_or_exceedances_give_none() -> None:
    rng = np.random.default_rng(3)
    w = _series("plain", 80, rng)  # 80 / 3 < 30
    assert clustering(_hist(w, rng), w, 30.0) is None
    assert clustering(_hist(w, rng), None, 30.0) is None


def test_a_report_prepares_each_channels_windows_once(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    rng = np.random.default_rng(5)
    chans = []
    for cpu in range(3):
        w = _series("clustered", 5_000, rng)
        hist = _hist(w, rng)
        lo = bucket_bounds(min(hist._counts))[0]
        chans.append(Channel(name=f"cpu{cpu}", cpu=cpu, samples=hist.total, min_ns=lo,
                             max_ns=int(w.max_ns.max()), sum_ns=hist.total * 12_000,
                             hist=hist, windows=w, window_ns=1_000_000_000))
    prepared: list[int] = []
    real = stats._WindowSeries

    def counting(windows: WindowMaxima) -> stats._WindowSeries:
        prepared.append(id(windows))
        return real(windows)

    monkeypatch.setattr(stats, "_WindowSeries", counting)
    own = [channel_intervals(ch) for ch in chans]
    merged_hist = chans[0].hist.merge(chans[1].hist).merge(chans[2].hist)
    merged = Channel(name="all", cpu=None, samples=merged_hist.total, min_ns=None,
                     max_ns=None, sum_ns=0, hist=merged_hist)
    again = channel_intervals(merged, parts=chans)
    assert sorted(prepared) == sorted(id(ch.windows) for ch in chans)
    for q, iv in again.items():  # the merged row takes the most clustered part's
        parts = [o[q].clustering for o in own if o[q].clustering is not None]
        if iv.theta is not None:
            assert iv.clustering in parts
    # another window series (another run) with the same histogram is not served from
    # the first one's results
    w0 = chans[0].windows
    fresh = WindowMaxima(w0.index, w0.max_ns // 2 + 30_000, w0.samples)
    other = Channel(name="cpu0", cpu=0, hist=chans[0].hist, windows=fresh)
    got = stats.part_clusterings(other, [99.9])[99.9]
    want = _plain(chans[0].hist, fresh, chans[0].hist.total * (1 - 99.9 / 100))
    assert got is not None and want is not None
    assert got.clusters == want.clusters != own[0][99.9].clustering.clusters
