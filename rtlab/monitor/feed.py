# SPDX-License-Identifier: MIT
"""From one engine run's records to what each snapshot added (docs/engine-output.md).

The engine's snapshots are cumulative since its start; the monitor wants increments,
so that a board's totals go on across engine runs (segments), restarts of the monitor
and of the board. `SegmentFeed` remembers the last cumulative state per channel and
turns each `snapshot`/`result` record into one `Increment` per channel: the counts
added since the previous record and the maxima of the engine windows it completed,
with their end times on the wall clock. Feeding the records of a segment's raw file
in order after a crash gives exactly the increments a live monitor would have seen,
from any record on (`skip_through`): nothing is counted twice or lost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rtlab.probes.registry import DEFAULT_PROBE
from rtlab.results.histogram import SUB_BITS


class FeedError(ValueError):
    """A record that contradicts the ones before it (counts going backwards)."""


@dataclass
class Increment:
    channel: str
    cpu: int | None
    samples: int
    missed: int
    sum_ns: int
    buckets: dict[int, int]
    windows: list[tuple[float, int]]  # (end, unix s; max ns) of completed engine windows
    min_ns: int | None
    max_ns: int | None
    sub_bits: int = SUB_BITS

    def as_update(self, now: float) -> dict[str, Any]:
        """Keyword arguments of `LiveState.update` / `ChannelLive.add`."""
        return {"samples": self.samples, "missed": self.missed, "sum_ns": self.sum_ns,
                "buckets": self.buckets, "windows": self.windows, "min_ns": self.min_ns,
                "max_ns": self.max_ns, "now": now}


@dataclass
class _Seen:
    samples: int = 0
    missed: int = 0
    sum_ns: int = 0
    buckets: dict[int, int] = field(default_factory=dict)
    windows_done: int = -1  # highest engine window index already taken


@dataclass
class SegmentFeed:
    """The increments of one engine run, record by record.

    Window maxima carry the time their window ended (for `ChannelLive.recent`). Fed
    live (`live=True`), that time is on the monitor's clock: the board's own clock may be
    anywhere (a board without RTC or NTP boots in 1970), so the board's start is moved to
    when its header arrived. Replayed from a raw file, it stays on the board's clock."""

    live: bool = False
    start_unix: float = 0.0  # the run's start on the wall clock (its header)
    window_s: float = 1.0
    probe: str = DEFAULT_PROBE
    seq: int = 0  # the last snapshot seq fed (the result counts as seq + 1)
    ended: bool = False  # the result record was fed
    status: str | None = None
    _seen: dict[str, _Seen] = field(default_factory=dict)

    def header(self, rec: dict[str, Any]) -> None:
        self.start_unix = int(rec.get("start_realtime_ns") or 0) / 1e9
        if self.live:  # the engine starts a few ms after its header: close enough
            self.start_unix = time.time()
        cfg = rec.get("config") or {}
        self.window_s = int(cfg.get("window_ns") or 1_000_000_000) / 1e9
        self.probe = str(rec.get("probe") or DEFAULT_PROBE)

    def feed(self, rec: dict[str, Any]) -> list[Increment]:
        """The increments of one record ([] for records that add nothing)."""
        kind = rec.get("type")
        if kind == "header":
            self.header(rec)
            return []
        if kind not in ("snapshot", "result"):
            return []
        if kind == "snapshot":
            self.seq = int(rec.get("seq") or self.seq + 1)
        else:
            self.ended = True
            self.status = str(rec.get("status") or "")
        return list(self._channels(rec.get("channels") or []))

    def _channels(self, channels: list[dict[str, Any]]) -> Iterator[Increment]:
        for ch in channels:
            name = str(ch.get("name"))
            seen = self._seen.setdefault(name, _Seen())
            hist = ch.get("hist") or {}
            sub_bits = int(hist.get("sub_bits", SUB_BITS))
            now_b = {int(i): int(c) for i, c in hist.get("buckets") or []}
            d_b = {}
            for i, c in now_b.items():
                d = c - seen.buckets.get(i, 0)
                if d < 0:
                    raise FeedError(f"channel {name}: bucket {i} went from "
                                    f"{seen.buckets.get(i, 0)} to {c}")
                if d:
                    d_b[i] = d
            samples = int(ch.get("samples") or 0)
            missed = int(ch.get("missed") or 0)
            sum_ns = int(ch.get("sum_ns") or 0)
            if samples < seen.samples or missed < seen.missed or sum_ns < seen.sum_ns:
                raise FeedError(f"channel {name}: counts went backwards")
            if sum(d_b.values()) != samples - seen.samples:
                raise FeedError(f"channel {name}: {samples - seen.samples} new samples but "
                                f"{sum(d_b.values())} new histogram counts")
            wins = []
            for w in ch.get("windows") or []:
                k, m = int(w[0]), int(w[1])
                if k > seen.windows_done:
                    wins.append((self.start_unix + (k + 1) * self.window_s, m))
            if wins:
                seen.windows_done = max(seen.windows_done,
                                        max(int(w[0]) for w in ch.get("windows") or []))
            inc = Increment(name, _opt_int(ch.get("cpu")), samples - seen.samples,
                            missed - seen.missed, sum_ns - seen.sum_ns, d_b, wins,
                            _opt_int(ch.get("min_ns")) if samples > seen.samples else None,
                            _opt_int(ch.get("max_ns")) if samples > seen.samples else None,
                            sub_bits)
            seen.samples, seen.missed, seen.sum_ns, seen.buckets = samples, missed, sum_ns, now_b
            yield inc


def _opt_int(v: object) -> int | None:
    return None if v is None or isinstance(v, bool) else int(v)  # type: ignore[call-overload]
