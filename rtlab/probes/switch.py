# SPDX-License-Identifier: MIT
"""Summary of a `rtlab-probe switch` run: the priority-order and PI verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab.probes.description import Phase, ProbeInfo, RunResult
from rtlab.results.shape import ResultShape
from rtlab.textfmt import human


def lines(extras: Mapping[str, Any]) -> list[str]:
    checks = extras.get("checks") or {}
    out: list[str] = []
    order = checks.get("order")
    if order:
        out.append(f"priority order: {str(order.get('verdict', '?')).upper()} "
                   f"({order.get('passed_rounds', '?')}/{order.get('rounds', '?')} rounds "
                   f"finished highest priority first, {order.get('workers', '?')} workers on "
                   f"CPU{order.get('cpu', '?')})")
    pi = checks.get("pi")
    if pi:
        w, wo = pi.get("with_pi_median_ns"), pi.get("without_pi_median_ns")
        out.append(f"priority inheritance: {str(pi.get('verdict', '?')).upper()} "
                   f"(inversion with PI mutex {human(w)}, without PI {human(wo)}; "
                   f"bounded: {'yes' if pi.get('bounded') else 'no'})")
    if checks.get("error"):
        out.append(f"checks error: {checks['error']}")
    return out


def phase_lines(_result: RunResult, phase: Phase) -> list[str]:
    return lines(phase.extras or {})


INFO = ProbeInfo("switch", ResultShape(measures="wake-up latency"), single_cpu=True,
                 phase_lines=phase_lines)
