# SPDX-License-Identifier: MIT
"""Summary of a `rtlab-probe overhead` run: one line per test (median and tail)."""

from __future__ import annotations

from collections.abc import Sequence

from rtlab.probes.description import Channel, Phase, ProbeInfo, RunResult
from rtlab.results.shape import ResultShape
from rtlab.textfmt import human


def lines(channels: Sequence[Channel]) -> list[str]:
    parts = []
    for ch in channels:
        s = ch.summary((50.0, 99.0))
        if not s.samples:
            continue
        parts.append(f"{ch.name} {human(s.p(50.0))} (p99 {human(s.p(99.0))})")
    return ["cost per test (median): " + "; ".join(parts)] if parts else []


def phase_lines(_result: RunResult, phase: Phase) -> list[str]:
    return lines(phase.channels)


INFO = ProbeInfo("overhead", ResultShape(measures="cost"), single_cpu=True,
                 phase_lines=phase_lines)
