# SPDX-License-Identifier: MIT
"""Text of spike attribution results: the summary line of `rtlab run --trace` and
the rows of `rtlab spikes` (the cause records are described in docs/results.md)."""

from __future__ import annotations

from typing import Any

from rtlab.report import kernel_split
from rtlab.textfmt import human

UNEXPLAINED = {None: "host/hypervisor or SMI", True: "host/hypervisor",
               False: "SMI/firmware/hardware"}


def _label(top: str, trace: dict[str, Any] | None) -> str:
    if top == "unexplained":
        return f"unexplained: {UNEXPLAINED.get((trace or {}).get('virtualized'))}"
    return top


def summary_line(summary: dict[str, Any], trace: dict[str, Any] | None = None,
                 prefix: str = "", most: int = 3) -> str:
    """'spikes > 100 µs: 82 (48 task python[7940] rt99, 32 unexplained: host/hypervisor)'."""
    head = f"{prefix}spikes > {human(summary.get('threshold_ns'))}: {summary.get('spikes', 0)}"
    if summary.get("error"):
        return f"{head} (tracing failed: {summary['error']})"
    tops = list((summary.get("top_causes") or {}).items())
    if not tops:
        return head
    parts = [f"{n} {_label(t, trace)}" for t, n in tops[:most]]
    rest = sum(n for _, n in tops[most:])
    if rest:
        parts.append(f"{rest} other")
    return f"{head} ({', '.join(parts)})"


def spike_lines(result: Any) -> list[str]:
    """One line per traced phase of a result (none when the run was not traced)."""
    traced = [p for p in result.phases if p.spike_summary is not None]
    many = len(result.phases) > 1
    lines = []
    for p in traced:
        prefix = f"phase {p.name}: " if many else ""
        lines.append(summary_line(p.spike_summary, p.trace, prefix))
        lines += kernel_split.lines((p.trace or {}).get("kernel_split"), prefix)
    if any(p.spike_summary.get("spikes") for p in traced):
        lines.append(f"causes of each spike: rtlab spikes {result.run_id}")
    return lines


def class_counts(summary: dict[str, Any]) -> str:
    """'task 48, unexplained 32, irq 2' (dominant cause class of every spike)."""
    by = summary.get("by_class") or {}
    return ", ".join(f"{k} {v}" for k, v in by.items()) or "none"


def spike_row(s: dict[str, Any]) -> list[str]:
    """[time into the phase, CPU, latency, class, summary] of one cause record."""
    at = s.get("at_ns")
    return [f"{at / 1e9:.6f}" if at is not None else "?", str(s.get("cpu")),
            human(s.get("latency_ns")), str(s.get("class", "")), str(s.get("summary", ""))]
