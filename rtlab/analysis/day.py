# SPDX-License-Identifier: MIT
"""One day of a board, OSADL-style: the maximum of every slot (5 minutes by default) over
24 hours per CPU, and the day's latency histogram per CPU (docs/monitor.md, "A past day").
A period of several whole days (a board's week) is the same view over `days` days.

Built from stored runs (a monitor's segments, or any runs) by their per-window maxima:
window k of a run covers [start + k·w, start + (k+1)·w) on the wall clock (the run's
`start_realtime_ns`), and goes to the slot holding its start. A slot no run covers is a
gap (shown as such, never as zero latency). Histograms of the runs that overlap the day
are merged whole (a run across midnight counts in both days; the slot maxima do not).

A run of several phases (a scenario's `[[phase]]`s) keeps the engine header of its first
phase only (rtlab.runner.outcome.merge_phases): each later phase's windows count from that
phase's own engine start, which is not stored (`provenance.host.phases[].start_wall` is
the controller's clock before the phase's loads started, not the engine's start, and an
imported run has none). So only the first phase is placed (its span decides whether the
run overlaps the day); the later phases are left out, slots and histogram alike, and
listed in `BoardDay.phases_not_shown`. A monitor's segments have one phase.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np

from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import RunResult
from rtlab.results.shape import ShapeOf

DAY_S = 86_400
HOUR_S = 3_600


@dataclass
class CpuDay:
    channel: str
    slot_max: np.ndarray  # ns per slot; -1 where no window of the day fell into the slot
    slot_samples: np.ndarray  # samples per slot
    hist: LogLinHistogram
    missed: int = 0

    @property
    def max_ns(self) -> int | None:
        m = int(self.slot_max.max()) if len(self.slot_max) else -1
        return m if m >= 0 else None

    def covered_slots(self) -> int:
        return int((self.slot_max >= 0).sum())


@dataclass
class BoardDay:
    host: str
    day: date  # the first day (UTC) of the period
    slot_s: int
    cpus: list[CpuDay] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    # run id -> its later phases, left out: their start on the wall clock is not stored
    phases_not_shown: dict[str, list[str]] = field(default_factory=dict)
    days: int = 1  # whole days from `day` on

    @property
    def slots(self) -> int:
        return self.days * DAY_S // self.slot_s

    @property
    def last_day(self) -> date:
        return self.day + timedelta(days=self.days - 1)

    def period(self) -> str:
        """'2026-03-02', or '2026-03-02 to 2026-03-08' for several days."""
        first = self.day.isoformat()
        return first if self.days == 1 else f"{first} to {self.last_day.isoformat()}"

    def slot_start(self, k: int) -> datetime:
        return datetime(self.day.year, self.day.month, self.day.day, tzinfo=UTC) + \
            timedelta(seconds=k * self.slot_s)


def day_bounds(day: date, days: int = 1) -> tuple[float, float]:
    t0 = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
    return t0, t0 + days * DAY_S


def run_span(result: RunResult) -> tuple[float, float] | None:
    """(start, end) on the wall clock (unix s) of the run's first phase, the one whose
    engine header the run keeps (the start of a later phase is not stored)."""
    eng = result.provenance.get("engine") or {}
    start = eng.get("start_realtime_ns")
    if not isinstance(start, int):
        return None
    elapsed = (result.phases[0].elapsed_ns or 0) if result.phases else 0
    return start / 1e9, start / 1e9 + elapsed / 1e9


def board_day(host: str, day: date, results: Iterable[RunResult], slot_s: int = 300, *,
              shape_of: ShapeOf, days: int = 1) -> BoardDay:
    """The board's `days` days from `day` on (one by default)."""
    if slot_s <= 0 or DAY_S % slot_s:
        raise ValueError(f"slot length {slot_s} s does not divide a day")
    if days < 1:
        raise ValueError(f"a period of {days} days")
    t0, t1 = day_bounds(day, days)
    out = BoardDay(host, day, slot_s, days=days)
    n = out.slots
    by_ch: dict[str, CpuDay] = {}
    for res in results:
        span = run_span(res)
        if span is None or span[1] < t0 or span[0] >= t1:
            continue
        out.runs.append(res.run_id)
        if len(res.phases) > 1:
            out.phases_not_shown[res.run_id] = [ph.name for ph in res.phases[1:]]
        start = span[0]
        for phase in res.phases[:1]:
            for ch in phase.headline(shape_of(res.probe)):
                cd = by_ch.setdefault(ch.name, CpuDay(ch.name, np.full(n, -1, np.int64),
                                                      np.zeros(n, np.int64),
                                                      LogLinHistogram(ch.hist.sub_bits)))
                cd.hist = cd.hist.merge(ch.hist)
                cd.missed += int(ch.missed or 0)
                if not ch.windows or not ch.window_ns:
                    continue
                w = ch.windows
                t = start + np.asarray(w.index, dtype=np.float64) * (ch.window_ns / 1e9)
                k = np.floor((t - t0) / slot_s).astype(np.int64)
                inside = (k >= 0) & (k < n)
                k = k[inside]
                np.maximum.at(cd.slot_max, k, np.asarray(w.max_ns, dtype=np.int64)[inside])
                np.add.at(cd.slot_samples, k, np.asarray(w.samples, dtype=np.int64)[inside])
    out.cpus = sorted(by_ch.values(), key=lambda c: _natural(c.channel))
    return out


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1
