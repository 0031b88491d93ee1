# SPDX-License-Identifier: MIT
"""Which channels of a run count (`--cpus`, `--channel`) in comparisons and reports.

**Channel selection** (`--cpus`, `--channel`): `select_channels` gives each run as a copy
holding only the selected channels (phases without one are left out), so every row,
verdict, headline, window maximum and SLO gate computed from it sees the same channels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from rtlab.cpulist import format_cpulist
from rtlab.errors import UsageError
from rtlab.results.validate import first_problem

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.results.model import Channel, Phase, RunResult

_CPU_NAME = re.compile(r"(?P<prefix>(?:.*[.@])?cpu)(?P<cpu>[0-9]+)")


def channel_cpu(ch: Channel) -> int | None:
    """The CPU a channel measured on: its `cpu`, else the N of a name ending in `cpuN`
    (`cpu1`, `timer.cpu1`, `thread@cpu1`); None for channels of no CPU (udp's `rtt`)."""
    if ch.cpu is not None:
        return ch.cpu
    m = _CPU_NAME.fullmatch(ch.name)
    return int(m["cpu"]) if m else None


@dataclass(frozen=True)
class ChannelSelection:
    """Which channels of every run count (`--cpus LIST`, `--channel PATTERN`): a channel
    is selected when it measured on one of `cpus` (when given) and its name matches one
    of the shell patterns `patterns` (when given)."""

    cpus: frozenset[int] | None = None
    patterns: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        return self.cpus is None and not self.patterns

    def matches(self, ch: Channel) -> bool:
        if self.cpus is not None and channel_cpu(ch) not in self.cpus:
            return False
        return not self.patterns or any(fnmatchcase(ch.name, p) for p in self.patterns)

    def describe(self) -> str:
        """The selection as it was given: `--cpus 1 --channel thread@*`."""
        parts = []
        if self.cpus is not None:
            parts.append(f"--cpus {format_cpulist(self.cpus)}")
        if self.patterns:
            parts.append(f"--channel {','.join(self.patterns)}")
        return " ".join(parts) or "all channels"


def channel_names(names: Iterable[str]) -> str:
    """Channel names for one line, each once, three or more `cpuN` in a row folded into
    a range: cpu0, cpu1, cpu2, cpu3, cpu5, thread@cpu0, rtt -> "cpu0-3, cpu5, thread@cpu0,
    rtt" (a 64-CPU run's error message stays short)."""
    groups: dict[tuple[str, bool], set[int]] = {}  # (prefix, numbered) -> CPUs
    for name in names:
        m = _CPU_NAME.fullmatch(name)
        cpus = groups.setdefault((m["prefix"], True) if m else (name, False), set())
        if m:
            cpus.add(int(m["cpu"]))
    out: list[str] = []
    for (key, numbered), cpus in groups.items():
        if not numbered:
            out.append(key)
            continue
        for part in format_cpulist(cpus).split(","):
            lo, _, hi = part.partition("-")
            if hi and int(hi) - int(lo) >= 2:
                out.append(f"{key}{part}")
            else:
                out += [f"{key}{c}" for c in range(int(lo), int(hi or lo) + 1)]
    return ", ".join(out)


def select_channels(results: Sequence[RunResult], selection: ChannelSelection
                    ) -> list[RunResult]:
    """Each run as a copy with the selected channels only (a note in the copy says what
    was left out). UsageError (exit 2) naming the run and its channels when a run has
    no selected channel; the results themselves are not changed."""
    if selection.everything:
        return list(results)
    return [_select_run(r, selection) for r in results]


def _select_phase(phase: Phase, selection: ChannelSelection) -> Phase:
    """The phase with the selected channels, and the spike records of their CPUs."""
    chans = [c for c in phase.channels if selection.matches(c)]
    spikes = phase.spikes
    if spikes is not None:
        cpus = {channel_cpu(c) for c in chans}
        spikes = [s for s in spikes if s.get("cpu") is None or s.get("cpu") in cpus]
    return replace(phase, channels=chans, spikes=spikes)


def _select_run(result: RunResult, selection: ChannelSelection) -> RunResult:
    names = list(dict.fromkeys(ch.name for _, ch in result.channels()))
    phases = [_select_phase(ph, selection) for ph in result.phases]
    kept = [ph for ph in phases if ph.channels]
    if not kept:
        raise UsageError(f"run {result.run_id}: no channel matches {selection.describe()}; "
                         f"its channels: {channel_names(names) or 'none'}")
    chosen = list(dict.fromkeys(ch.name for ph in kept for ch in ph.channels))
    left = [n for n in names if n not in chosen]
    note = (f"channels selected with {selection.describe()}: {channel_names(chosen)}"
            + (f" (not shown: {channel_names(left)})" if left else ""))
    skipped = [ph.name for ph in phases if not ph.channels]
    if skipped:
        note += f"; phase{'s' if len(skipped) > 1 else ''} without them: {', '.join(skipped)}"
    status, notes = result.status, [*result.notes, note]
    problem = first_problem(result)  # a problem in a channel left out still counts
    if problem is not None and status != "invalid":
        status = "invalid"
        notes.append(f"the numbers failed validation ({problem})")
    return replace(result, phases=kept, notes=notes, status=status)
