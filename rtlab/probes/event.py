# SPDX-License-Identifier: MIT
"""Summary of a `rtlab-probe event` run: source, clock domain and offset uncertainty."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab.probes.description import Phase, ProbeInfo, RunResult
from rtlab.results.shape import ResultShape
from rtlab.textfmt import human


def lines(extras: Mapping[str, Any]) -> list[str]:
    ev = extras.get("event") or {}
    if not ev:
        return []
    out = [f"event source {ev.get('source', '?')}: {ev.get('events', 0):,} events, "
           f"{ev.get('source_lost', 0):,} lost by the source"]
    clk = ev.get("clock") or {}
    if clk:
        out.append(f"clock: captured on {clk.get('source_domain', '?')}, handled on "
                   f"{clk.get('handling_clock', '?')}; conversion {clk.get('method', '?')}; "
                   f"offset {human(clk.get('offset_ns'))} ± "
                   f"{human(clk.get('uncertainty_ns'))} (uncertainty of every latency)")
    return out


def phase_lines(_result: RunResult, phase: Phase) -> list[str]:
    return lines(phase.extras or {})


INFO = ProbeInfo("event", ResultShape(measures="event latency", owns_its_cpus=True),
                 single_cpu=True, phase_lines=phase_lines)
