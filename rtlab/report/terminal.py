# SPDX-License-Identifier: MIT
"""Terminal summary: one rich table per phase and a one-line verdict."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from rtlab.analysis import DEFAULT_PERCENTILES, ChannelSummary, percentile_label
from rtlab.report.format import human, seconds, us
from rtlab.results.model import Channel, RunResult

# What a probe's value means, for the verdict line.
_MEASURES = {"timer": "wake-up latency", "switch": "wake-up latency",
             "noise": "noise gap", "udp": "round trip", "event": "event latency",
             "overhead": "cost", "interfere": "run time"}
TABLE_PERCENTILES = DEFAULT_PERCENTILES  # p50 p99 p99.9 p99.99 p99.9999


def make_console(stderr: bool = False) -> Console:
    """A console that does not squeeze the wide table when output is a pipe or a file."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=200, soft_wrap=True)
    return console


def channel_label(ch: Channel | ChannelSummary) -> str:
    if ch.cpu is not None and ch.name == f"cpu{ch.cpu}":
        return f"CPU{ch.cpu}"
    return ch.name if ch.cpu is None else f"{ch.name} (CPU{ch.cpu})"


def _row(s: ChannelSummary, label: str) -> list[str]:
    return [
        label,
        f"{s.samples:,}",
        us(s.min_ns),
        us(s.mean_ns),
        *(us(s.p(q)) for q in TABLE_PERCENTILES),
        us(s.max_ns),
        f"{s.missed:,}",
    ]


def build_tables(result: RunResult) -> list[Table]:
    tables = []
    for phase in result.phases:
        title = f"phase {phase.name}" + (f" ({seconds(phase.elapsed_ns)})"
                                         if phase.elapsed_ns is not None else "")
        table = Table(title=f"{result.probe}: {title}, latency in µs", title_justify="left")
        table.add_column("channel")
        for name in ("samples", "min", "avg",
                     *(percentile_label(q) for q in TABLE_PERCENTILES), "max", "missed"):
            table.add_column(name, justify="right")
        for ch in phase.channels:
            table.add_row(*_row(ch.summary(), channel_label(ch)))
        if (merged := phase.all_row(result.probe)) is not None:
            table.add_row(*_row(merged.summary(), "all"), style="bold")
        tables.append(table)
    return tables


def _invalid_reason(result: RunResult) -> str | None:
    from rtlab.results.validate import first_problem

    found = first_problem(result)
    if found is not None:
        return f"the numbers failed validation ({found})"
    if result.status == "invalid":
        return "the numbers failed validation when the run was stored (see the notes)"
    return None


def verdict(result: RunResult) -> str:
    """One line: the worst value, where, and what to make of it."""
    tags = []
    if result.partial:
        tags.append("PARTIAL")
    if result.rt_valid is False:
        tags.append("NOT real-time valid")
    if result.status == "threshold":
        tags.append("THRESHOLD EXCEEDED")
    if result.status == "failed":
        tags.append("FAILED")
    prefix = "".join(f"[{t}] " for t in tags)
    invalid = _invalid_reason(result)
    if invalid is not None:  # no headline from numbers that contradict each other
        return f"[INVALID] {prefix}no result: {invalid}"
    merged = result.merged()
    what = _MEASURES.get(result.probe, "latency")
    if merged.samples == 0 or merged.max_ns is None:
        return f"{prefix}no samples were measured"
    s = merged.summary((99.0, 99.99))
    phase, worst = max(((ph, ch) for ph, ch in result.headline_channels()
                        if ch.max_ns is not None),
                       key=lambda pc: pc[1].max_ns or 0)
    where = f" on {channel_label(worst)}" + (
        f" in phase {phase.name}" if len(result.phases) > 1 else "")
    at = f" at {seconds(merged.max_at_ns)}" if merged.max_at_ns is not None else ""
    text = f"{prefix}worst {what} {human(merged.max_ns)}{where}{at}; p99 {human(s.p(99.0))}"
    if s.p(99.99) is not None:
        text += f", p99.99 {human(s.p(99.99))}"
    if merged.missed:
        text += f"; {merged.missed:,} missed periods"
    p99 = s.p(99.0)
    if merged.max_ns >= 1_000_000 and p99 is not None and merged.max_ns > 20 * p99:
        text += (" (isolated spikes far above the tail: SMIs or host/VM stalls likely: "
                 "see `rtlab doctor`)")
    if result.rt_valid is False:
        text += " (measured without real-time scheduling or locked memory)"
    return text


def render(result: RunResult, console: Console) -> None:
    from rtlab.probes.extras import extra_lines

    for table in build_tables(result):
        console.print(table)
    for line in extra_lines(result):  # the probe's own verdicts and counters
        console.print(line, highlight=False, markup=False)
    for note in result.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    console.print(verdict(result), highlight=False, markup=False)
