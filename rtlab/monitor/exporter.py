# SPDX-License-Identifier: MIT
"""The Prometheus exporter: a custom collector that turns a `LiveView` into metrics.

Names and labels are a public contract (docs/monitor.md, "Prometheus metrics"): the
`rtlab_` prefix, base unit seconds, `_total` on counters, and per measured channel the
labels `board`, `cpu` (the CPU number, or the channel name when it has none) and
`probe`.

The latency histogram re-bins the fine log-linear histogram (about 1 % wide buckets)
into fixed 1-2-5 bounds from 1 µs to 10 s plus +Inf. The re-binning is exact and
conservative: a fine bucket holding the integers lo..hi ns is counted in the first
Prometheus bucket whose bound `le` is >= hi, so every `le` bucket counts only samples
known to be <= le, and the count above any bound is never under-stated. (A fine bucket
that straddles a bound goes to the next bound: a sample of exactly 1 µs shares its fine
bucket with 1.003 µs and is therefore counted at le=2e-06.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import lru_cache
from itertools import accumulate
from typing import NamedTuple

import numpy as np
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
    Sample,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from rtlab import __version__
from rtlab.monitor.live import RECENT_S, BoardLive, ChannelLive, LiveView
from rtlab.results.histogram import bucket_bounds, bucket_count

# Prometheus bucket bounds (ns): 1-2-5 steps from 1 µs to 10 s; +Inf is added after them.
BOUNDS_NS: tuple[int, ...] = (*(m * 10**e for e in range(3, 10) for m in (1, 2, 5)), 10**10)
_LE = (*(floatToGoString(b / 1e9) for b in BOUNDS_NS), "+Inf")
CHANNEL_LABELS = ("board", "cpu", "probe")


@lru_cache(maxsize=8)
def _slot_table(sub_bits: int) -> np.ndarray:
    """For every fine bucket index: the slot (index into BOUNDS_NS; len(BOUNDS_NS) is
    +Inf) of the first bound >= the largest integer the bucket holds."""
    his = []
    for index in range(bucket_count(sub_bits)):
        lo, width = bucket_bounds(index, sub_bits)
        his.append(lo + width - 1)
    table = np.searchsorted(np.array(BOUNDS_NS, dtype=np.uint64),
                            np.array(his, dtype=np.uint64), side="left")
    table.flags.writeable = False
    return table


def rebin(buckets: dict[int, int], sub_bits: int) -> list[int]:
    """Per-slot (not cumulative) counts of a fine histogram: len(BOUNDS_NS) + 1 slots,
    the last one +Inf."""
    out = np.zeros(len(BOUNDS_NS) + 1, dtype=np.uint64)
    if buckets:
        n = len(buckets)
        index = np.fromiter(buckets.keys(), dtype=np.int64, count=n)
        counts = np.fromiter(buckets.values(), dtype=np.uint64, count=n)
        np.add.at(out, _slot_table(sub_bits)[index], counts)
    return [int(x) for x in out]


def cumulative_counts(ch: ChannelLive) -> list[int]:
    """The cumulative counts of one channel at the bounds of `_LE`, ending with +Inf: the
    histogram's total, which Prometheus takes as `_count`. (It equals `ch.samples`: the
    watchers add both from the same snapshots. Were they ever to differ, the histogram
    stays consistent with itself rather than invent samples in +Inf.)"""
    return list(accumulate(rebin(ch.buckets, ch.sub_bits)))


class _Rebinned(NamedTuple):
    sub_bits: int
    samples: int
    updated: float
    fine: dict[int, int] | None  # a copy of the fine buckets re-binned, if kept
    counts: list[int]  # their cumulative counts


class RebinCache:
    """The cumulative counts of each series at the previous scrape. A channel whose fine
    histogram has not changed since (a board that is down or no longer watched, a second
    Prometheus scraping before the next snapshot) is not re-binned again. The counts are
    reused only when the fine buckets are equal, key for key, to a copy of those they
    came from, so they are never stale. Copies are kept only of channels whose samples
    and update time did not change since the previous scrape: a channel a snapshot
    changes at every scrape (a snapshot changes both) is never copied nor compared.
    Safe for concurrent scrapes: entries are never changed, only replaced, and each
    scrape publishes a new table holding just the series it saw."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, ...], _Rebinned] = {}

    def counts(self, channels: list[ChannelLive],
               keys: list[tuple[str, ...]]) -> list[list[int]]:
        """`cumulative_counts` of each channel; `keys[i]` names channels[i]'s series."""
        last = self._last
        table = {}
        out = []
        for ch, key in zip(channels, keys, strict=True):
            entry = last.get(key)
            if entry is None or entry[:3] != (ch.sub_bits, ch.samples, ch.updated):
                entry = _Rebinned(ch.sub_bits, ch.samples, ch.updated, None,
                                  cumulative_counts(ch))
            elif entry.fine is None or entry.fine != ch.buckets:
                # unchanged in appearance: keep a copy (the caller's dict may change
                # after this scrape) to compare the next scrape's with
                entry = entry._replace(fine=dict(ch.buckets), counts=cumulative_counts(ch))
            table[key] = entry
            out.append(entry.counts)
        self._last = table
        return out


def channel_labels(ch: ChannelLive) -> list[str]:
    return [ch.board, ch.channel if ch.cpu is None else str(ch.cpu), ch.probe]


class ScrapeStats:
    """The exporter's own numbers: scrapes served and how long the previous one took."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.scrapes = 0
        self.last_duration_s: float | None = None

    def record(self, seconds: float) -> None:
        with self._lock:
            self.scrapes += 1
            self.last_duration_s = seconds

    def snapshot(self) -> tuple[int, float | None]:
        with self._lock:
            return self.scrapes, self.last_duration_s


def _channel_families(channels: list[ChannelLive], now: float,
                      cache: RebinCache | None = None) -> list[Metric]:
    hist = HistogramMetricFamily(
        "rtlab_latency_seconds",
        "Measured latency per board and CPU since the monitor's first start (fine "
        "histogram re-binned conservatively to these bounds)",
        labels=CHANNEL_LABELS, unit="seconds")
    samples = CounterMetricFamily(
        "rtlab_samples", "Latency samples measured since the monitor's first start",
        labels=CHANNEL_LABELS)
    missed = CounterMetricFamily(
        "rtlab_missed_periods", "Periods the probe missed (woke after the next deadline) "
        "since the monitor's first start", labels=CHANNEL_LABELS)
    run_max = GaugeMetricFamily(
        "rtlab_latency_max_seconds", "Largest latency since the monitor's first start "
        "(never lowered)", labels=CHANNEL_LABELS, unit="seconds")
    recent = GaugeMetricFamily(
        "rtlab_latency_recent_max_seconds", "Largest latency of the engine windows that "
        f"ended in the last {RECENT_S:g} s (absent when none did); max_over_time of it "
        "is the worst case of any range", labels=CHANNEL_LABELS, unit="seconds")
    updated = GaugeMetricFamily(
        "rtlab_channel_last_update_timestamp_seconds", "Unix time of the channel's last "
        "snapshot", labels=CHANNEL_LABELS, unit="seconds")
    series = [channel_labels(ch) for ch in channels]
    counts = (cache.counts(channels, [tuple(s) for s in series]) if cache is not None
              else [cumulative_counts(ch) for ch in channels])
    # The histogram's samples are made here rather than by `hist.add_metric`: exactly
    # the samples it makes (tests/monitor/test_exporter.py compares them), without its
    # per-bucket list building (64 CPUs: 2.4 ms with it, 1.1 ms this way).
    bucket, count, total = hist.name + "_bucket", hist.name + "_count", hist.name + "_sum"
    for ch, labels, cum in zip(channels, series, counts, strict=True):
        base = dict(zip(CHANNEL_LABELS, labels, strict=True))
        hist.samples += [Sample(bucket, {**base, "le": le}, n)
                         for le, n in zip(_LE, cum, strict=True)]
        hist.samples += [Sample(count, base, cum[-1]),
                         Sample(total, dict(base), ch.sum_ns / 1e9)]
        samples.add_metric(labels, ch.samples)
        missed.add_metric(labels, ch.missed)
        if ch.samples or ch.max_ns:
            run_max.add_metric(labels, ch.max_ns / 1e9)
        r = ch.recent_max(now)
        if r is not None:
            recent.add_metric(labels, r / 1e9)
        if ch.updated:
            updated.add_metric(labels, ch.updated)
    return [hist, samples, missed, run_max, recent, updated]


# The per-board metrics: (family, name, help, unit, the board's value or None for no
# sample).
_BOARD_METRICS: tuple[tuple[type[GaugeMetricFamily | CounterMetricFamily], str, str, str,
                            Callable[[BoardLive], float | None]], ...] = (
    (GaugeMetricFamily, "rtlab_board_up",
     "1 when the board is reachable and its engine runs, else 0", "",
     lambda b: 1 if b.up else 0),
    (GaugeMetricFamily, "rtlab_probe_healthy",
     "1 when the board's engine measures with real-time scheduling as asked, else 0", "",
     lambda b: 1 if b.probe_ok else 0),
    (CounterMetricFamily, "rtlab_board_gaps",
     "Times the board went away (unreachable, engine failed) since the first start", "",
     lambda b: b.gaps),
    (CounterMetricFamily, "rtlab_board_gap_seconds",
     "Time not measured because of gaps since the first start", "seconds",
     lambda b: b.gap_seconds),
    (CounterMetricFamily, "rtlab_board_reboots",
     "Times the board came back from a gap with another boot id since the first start", "",
     lambda b: b.reboots),
    (CounterMetricFamily, "rtlab_board_segments",
     "Engine segments completed and stored since the first start", "",
     lambda b: b.segments),
    (GaugeMetricFamily, "rtlab_board_store_pending_segments",
     "Completed segments waiting to be written to the store", "",
     lambda b: b.store_pending),
    (GaugeMetricFamily, "rtlab_board_last_seen_timestamp_seconds",
     "Unix time of the board's last engine record", "seconds",
     lambda b: b.last_seen or None),
)


def _board_families(boards: list[BoardLive]) -> list[Metric]:
    out: list[Metric] = []
    for family, name, documentation, unit, value_of in _BOARD_METRICS:
        fam = family(name, documentation, labels=["board"], unit=unit)
        for b in boards:
            value = value_of(b)
            if value is not None:
                fam.add_metric([b.name], value)
        out.append(fam)
    info = InfoMetricFamily("rtlab_board", "What the board's engine reported of it: "
                            "kernel release, preemption model, machine, engine version "
                            "(to follow latency across kernels)",
                            labels=["board", "kernel", "preempt", "machine",
                                    "engine_version"])
    for b in boards:
        if b.kernel:
            info.add_metric([b.name, b.kernel, b.preempt, b.machine, b.engine_version], {})
    return [*out, info]


def _process_families(stats: ScrapeStats | None) -> list[Metric]:
    info = InfoMetricFamily("rtlab_build", "The rtlab version serving these metrics",
                            value={"version": __version__})
    window = GaugeMetricFamily("rtlab_latency_recent_window_seconds", "How long an engine "
                               "window's maximum stays in rtlab_latency_recent_max_seconds",
                               RECENT_S, unit="seconds")
    out: list[Metric] = [info, window]
    if stats is not None:
        scrapes, last = stats.snapshot()
        out.append(CounterMetricFamily("rtlab_exporter_scrapes", "Scrapes of /metrics "
                                       "answered by this process before this one", scrapes))
        if last is not None:
            out.append(GaugeMetricFamily(
                "rtlab_exporter_scrape_duration_seconds", "Time the previous scrape took "
                "to build and encode its answer", last, unit="seconds"))
    return out


def families(view: LiveView, stats: ScrapeStats | None = None,
             cache: RebinCache | None = None) -> list[Metric]:
    """All metric families of one consistent view (its `now` decides the recent maxima);
    `cache` keeps the re-binned histograms from one call to the next."""
    return (_channel_families(view.channels, view.now, cache)
            + _board_families(view.boards) + _process_families(stats))


class RtlabCollector(Collector):
    """A prometheus_client collector reading a fresh view at every scrape."""

    def __init__(self, view: Callable[[], LiveView], stats: ScrapeStats | None = None):
        self._view = view
        self.stats = stats
        self._cache = RebinCache()

    def collect(self) -> Iterator[Metric]:
        yield from families(self._view(), self.stats, self._cache)


def make_registry(view: Callable[[], LiveView],
                  stats: ScrapeStats | None = None) -> CollectorRegistry:
    """A registry of its own (not the library's global one) holding the rtlab collector
    and the library's process collector (CPU time, memory, open files of the monitor)."""
    from prometheus_client import ProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(RtlabCollector(view, stats))
    ProcessCollector(registry=registry)
    return registry
