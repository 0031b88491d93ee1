# SPDX-License-Identifier: MIT
"""Was a measured CPU shared with work nobody asked for?

The engine records per channel (`cpu_use`, docs/engine-output.md) the CPU's busy time
and the measuring thread's own run time over the same span. What the CPU spent beyond
the measuring threads' own time went to other tasks, interrupts or the hypervisor
(steal): their effect is in the latencies measured there. That is expected where the
scenario put a load; anywhere else the user must know, so the result says so
(docs/results.md, "Shared CPUs").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from rtlab.results.shape import ResultShape

SHARE_NOTE = 0.10  # a note from this share of the span on
MIN_OTHER_NS = 20_000_000  # ... and at least this much time (two ticks at 100 Hz)


class _Channel(Protocol):
    cpu: int | None
    tid: int | None
    cpu_use: dict[str, Any] | None


@dataclass(frozen=True)
class CpuShare:
    """Other work on one measured CPU over `span_ns`."""

    cpu: int
    span_ns: int
    other_ns: int
    wait_ns: int  # the measuring threads' time runnable but waiting for the CPU

    @property
    def share(self) -> float:
        return self.other_ns / self.span_ns if self.span_ns else 0.0


def cpu_shares(channels: Iterable[_Channel]) -> list[CpuShare]:
    """Per measured CPU: busy time minus its measuring threads' run time (each thread
    counted once, however many channels it feeds)."""
    busy: dict[int, tuple[int, int]] = {}  # cpu -> (span, busy)
    own: dict[int, dict[int, tuple[int, int]]] = {}  # cpu -> tid -> (run, wait)
    for ch in channels:
        use = ch.cpu_use
        if ch.cpu is None or not isinstance(use, dict):
            continue
        span, cpu_busy = use.get("span_ns"), use.get("cpu_busy_ns")
        if not isinstance(span, int) or not isinstance(cpu_busy, int) or span <= 0:
            continue
        busy[ch.cpu] = max(busy.get(ch.cpu, (0, 0)), (span, cpu_busy))
        run, wait = use.get("thread_run_ns"), use.get("thread_wait_ns")
        if ch.tid is not None and isinstance(run, int):
            own.setdefault(ch.cpu, {})[ch.tid] = (run, wait if isinstance(wait, int) else 0)
    out = []
    for cpu, (span, cpu_busy) in sorted(busy.items()):
        threads = own.get(cpu, {}).values()
        mine = sum(run for run, _ in threads)
        out.append(CpuShare(cpu, span, max(0, cpu_busy - mine), sum(w for _, w in threads)))
    return out


def shared_cpu_notes(shape: ResultShape, channels: Iterable[_Channel],
                     expected: set[int] | None) -> list[str]:
    """Notes for measured CPUs where other work took a noticeable share of the time, for
    a probe whose channels own their CPUs (`shape`: its result shape). `expected`: CPUs
    where the phase's loads may run (None: every CPU), not noted."""
    if not shape.owns_its_cpus or expected is None:
        return []
    notes = []
    for s in cpu_shares(channels):
        if s.cpu in expected or s.share < SHARE_NOTE or s.other_ns < MIN_OTHER_NS:
            continue
        notes.append(
            f"CPU{s.cpu} was shared: other work (tasks, interrupts or the hypervisor) used "
            f"{s.share:.0%} of it during the measurement ({s.other_ns / 1e9:.2f} s of "
            f"{s.span_ns / 1e9:.2f} s); the latencies measured there include its effect"
            + (f"; the measuring thread waited {s.wait_ns / 1e9:.2f} s for the CPU"
               if s.wait_ns >= MIN_OTHER_NS else ""))
    return notes


__all__ = ["CpuShare", "cpu_shares", "shared_cpu_notes"]
