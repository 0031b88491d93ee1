# SPDX-License-Identifier: MIT
"""The short per-probe section under the latency table (`rtlab run`, `results show`) and
the notes a probe's own numbers call for, from each probe's INFO (rtlab.probes.registry).

Built from what a stored result keeps: its channels and each phase's `extras`
(the probe's own objects of the engine's final record).
"""

from __future__ import annotations

from rtlab.probes.description import Phase, RunResult
from rtlab.probes.registry import info


def phase_lines(result: RunResult, phase: Phase) -> list[str]:
    fn = info(result.probe).phase_lines
    return fn(result, phase) if fn is not None else []


def extra_lines(result: RunResult) -> list[str]:
    """Lines per phase (prefixed with the phase name when there are several)."""
    out: list[str] = []
    many = len(result.phases) > 1
    for phase in result.phases:
        for line in phase_lines(result, phase):
            out.append(f"phase {phase.name}: {line}" if many else line)
    return out


def probe_notes(result: RunResult) -> list[str]:
    """Notes the probe's own numbers call for, to keep in the result's notes (the runner
    and the importer add them when a result is made): e.g. an interfere amdahl phase
    whose Amdahl fit is outside its physical bounds says why no fit is given."""
    fn = info(result.probe).notes
    return fn(result) if fn is not None else []
