# SPDX-License-Identifier: MIT
"""What the monitor knows right now, for the exporter: one thread-safe, in-memory view.

The watchers (one per board) write into it at every engine snapshot; a scrape reads a
consistent copy (`LiveState.view()`) and never waits for a board. Counters are
cumulative since the monitor's *first* start: a restarted monitor seeds them from its
checkpoint, so they only go down when the state directory is thrown away (Prometheus
then sees an ordinary counter reset).

Maxima keep two meanings apart (docs/monitor.md, "Maxima"):
* `max_ns`: the running maximum since the first start — never lost, never lowered;
* `recent`: the maxima of the engine's windows (1 s by default) that ended within the
  last `recent_s` seconds. Whatever the scrape interval (up to `recent_s`), every spike
  is in at least one scrape of `recent_max()`, so `max_over_time()` of it over any range
  is the true worst case of that range (to within one engine window at its edges),
  without per-scraper state (two Prometheus servers scraping one monitor both see it).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from rtlab.probes.registry import DEFAULT_PROBE
from rtlab.results.histogram import SUB_BITS

RECENT_S = 60.0  # how long a window maximum stays in `recent` (>= the scrape interval)


@dataclass
class ChannelLive:
    """One measured CPU (or other channel) of one board."""

    board: str
    channel: str  # the engine's channel name, e.g. "cpu1"
    cpu: int | None
    probe: str = DEFAULT_PROBE
    samples: int = 0
    missed: int = 0
    sum_ns: int = 0
    max_ns: int = 0  # running maximum since the first start
    min_ns: int | None = None
    sub_bits: int = SUB_BITS
    buckets: dict[int, int] = field(default_factory=dict)  # fine histogram: index -> count
    # (end time, unix s; max ns) of each engine window that ended in the last RECENT_S
    recent: deque[tuple[float, int]] = field(default_factory=deque)
    updated: float = 0.0  # unix time of the last update

    def add(self, *, samples: int, missed: int, sum_ns: int, buckets: dict[int, int],
            windows: Iterable[tuple[float, int]], min_ns: int | None, max_ns: int | None,
            now: float) -> None:
        """Add the increments of one snapshot (counts since the previous one) and the
        maxima of the engine windows it completed."""
        self.samples += samples
        self.missed += missed
        self.sum_ns += sum_ns
        for k, v in buckets.items():
            if v:
                self.buckets[k] = self.buckets.get(k, 0) + v
        if max_ns is not None and max_ns > self.max_ns:
            self.max_ns = max_ns
        if min_ns is not None and (self.min_ns is None or min_ns < self.min_ns):
            self.min_ns = min_ns
        for end, m in windows:
            self.recent.append((end, m))
            if m > self.max_ns:
                self.max_ns = m
        self.updated = now
        self.trim(now)

    def trim(self, now: float, keep_s: float = RECENT_S) -> None:
        while self.recent and self.recent[0][0] < now - keep_s:
            self.recent.popleft()

    def recent_max(self, now: float | None = None, span_s: float = RECENT_S) -> int | None:
        """The largest window maximum that ended within the last `span_s` seconds (None:
        no window ended then)."""
        t = time.time() if now is None else now
        vals = [m for end, m in self.recent if end >= t - span_s]
        return max(vals) if vals else None


@dataclass
class BoardLive:
    """One watched board (or this machine)."""

    name: str
    up: bool = False  # reachable and its engine running
    probe_ok: bool = False  # the engine measures with real-time scheduling as asked
    reason: str = ""  # why not up / not ok, one line
    last_seen: float = 0.0  # unix time of its last record
    segments: int = 0  # engine runs completed and stored since the first start
    gaps: int = 0  # times it went away (unreachable, engine failed) since the first start
    gap_seconds: float = 0.0  # time not measured because of them
    reboots: int = 0  # times it came back with another boot id (gaps of their own)
    store_pending: int = 0  # completed segments waiting for the store
    # what its engine said of it (header): kernel release, preemption model, machine,
    # engine version ("" until known)
    kernel: str = ""
    preempt: str = ""
    machine: str = ""
    engine_version: str = ""


@dataclass
class LiveView:
    """A consistent copy for one scrape."""

    boards: list[BoardLive]
    channels: list[ChannelLive]
    now: float
    started: float  # unix time this monitor process started


class LiveState:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._boards: dict[str, BoardLive] = {}
        # (board, channel, probe): a state directory restarted with another probe keeps
        # the old probe's totals apart, never adds one quantity to another
        self._channels: dict[tuple[str, str, str], ChannelLive] = {}
        self.started = time.time()

    def board(self, name: str) -> BoardLive:
        with self._lock:
            return self._boards.setdefault(name, BoardLive(name))

    def set_board(self, name: str, **fields: object) -> None:
        with self._lock:
            b = self._boards.setdefault(name, BoardLive(name))
            for k, v in fields.items():
                setattr(b, k, v)

    def add_board(self, name: str, **increments: float) -> None:
        """Add to a board's counters (gaps, gap_seconds, reboots, segments) under the
        lock."""
        with self._lock:
            b = self._boards.setdefault(name, BoardLive(name))
            for k, v in increments.items():
                setattr(b, k, getattr(b, k) + v)

    def channel(self, board: str, channel: str, cpu: int | None,
                probe: str = DEFAULT_PROBE) -> ChannelLive:
        """The channel's live record (created empty at first use). Change it only through
        `update`."""
        with self._lock:
            return self._channels.setdefault((board, channel, probe),
                                             ChannelLive(board, channel, cpu, probe))

    def update(self, board: str, channel: str, cpu: int | None, probe: str = DEFAULT_PROBE,
               **increments: object) -> None:
        """`ChannelLive.add` under the lock (keyword arguments as there)."""
        with self._lock:
            ch = self._channels.setdefault((board, channel, probe),
                                           ChannelLive(board, channel, cpu, probe))
            ch.add(**increments)  # type: ignore[arg-type]

    def seed(self, channels: Iterable[ChannelLive], boards: Iterable[BoardLive]) -> None:
        """Restore totals from a checkpoint (before any watcher starts)."""
        with self._lock:
            for ch in channels:
                self._channels[(ch.board, ch.channel, ch.probe)] = ch
            for b in boards:
                self._boards[b.name] = b

    def view(self) -> LiveView:
        now = time.time()
        with self._lock:
            for ch in self._channels.values():
                ch.trim(now)
            # copies of the mutable parts only: a scrape of 64 CPUs stays cheap
            return LiveView(boards=[replace(b) for b in self._boards.values()],
                            channels=[replace(ch, buckets=dict(ch.buckets),
                                              recent=deque(ch.recent))
                                      for ch in self._channels.values()],
                            now=now, started=self.started)
