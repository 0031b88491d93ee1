# SPDX-License-Identifier: MIT
"""Terminal summary: one rich table per phase and a one-line verdict."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from rtlab.analysis.stats import TAIL_PERCENTILES, PercentileInterval, channel_intervals
from rtlab.probes.extras import extra_lines
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import Channel, RunResult
from rtlab.results.summary import DEFAULT_PERCENTILES, ChannelSummary, percentile_label
from rtlab.results.validate import failed_validation
from rtlab.textfmt import human, seconds, us

TABLE_PERCENTILES = DEFAULT_PERCENTILES  # p50 p99 p99.9 p99.99 p99.9999
WIDE_MARK = "*"  # after a tail percentile whose confidence interval is wide


def interval_us(iv: PercentileInterval) -> str:
    """'[37.1, 41.0]' or '[37.1, ∞)' (µs): the percentile's confidence interval."""
    lo = "0" if iv.low_ns is None else us(iv.low_ns)
    return f"[{lo}, {'∞)' if iv.high_ns is None else us(iv.high_ns) + ']'}"


def row_intervals(ch: Channel, parts: list[Channel] | None = None
                  ) -> dict[float, PercentileInterval]:
    """Confidence intervals of the table's tail percentiles for a channel (or a merge of
    `parts`); none when the channel has no samples."""
    if not ch.hist.total:
        return {}
    return channel_intervals(ch, TAIL_PERCENTILES, parts)


def pct_cell(s: ChannelSummary, q: float, ivs: dict[float, PercentileInterval]) -> str:
    """A percentile cell: the value, marked when its interval is wide."""
    return us(s.p(q)) + (WIDE_MARK if is_wide(ivs.get(q)) else "")


def is_wide(iv: PercentileInterval | None) -> bool:
    """Marked in tables: a shown percentile (not n/a) whose interval is wide."""
    return iv is not None and iv.value_ns is not None and iv.wide


def wide_note(rows: list[tuple[str, dict[float, PercentileInterval]]]) -> str | None:
    """One line naming the wide intervals of the given (label, intervals) rows."""
    items = []
    for label, ivs in rows:
        for q, iv in ivs.items():
            if is_wide(iv):
                items.append(f"{label} {percentile_label(q)} {interval_us(iv)}"
                             + (f" widened: {iv.widened}" if iv.widened else ""))
    if not items:
        return None
    level = next(iv.level for _, ivs in rows for iv in ivs.values())
    return (f"{WIDE_MARK} wide {level:.0%} interval (distribution-free; the run is short for "
            f"this percentile, docs/report.md): " + "; ".join(items))


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


def _row(s: ChannelSummary, label: str, ivs: dict[float, PercentileInterval]) -> list[str]:
    return [
        label,
        f"{s.samples:,}",
        us(s.min_ns),
        us(s.mean_ns),
        *(pct_cell(s, q, ivs) for q in TABLE_PERCENTILES),
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
        headline: list[tuple[str, dict[float, PercentileInterval]]] = []
        heads = phase.headline(probe_shape(result.probe))
        marked = False
        for ch in phase.channels:
            ivs = row_intervals(ch)
            marked = marked or any(is_wide(iv) for iv in ivs.values())
            table.add_row(*_row(ch.summary(), channel_label(ch), ivs))
            if len(heads) == 1 and ch is heads[0]:
                headline.append((channel_label(ch), ivs))
        if (merged := phase.all_row(probe_shape(result.probe))) is not None:
            ivs = row_intervals(merged, heads)
            table.add_row(*_row(merged.summary(), "all", ivs), style="bold")
            headline.append(("all", ivs))
        note = wide_note(headline)
        if note is None and marked:
            note = (f"{WIDE_MARK} wide confidence interval (per channel: `rtlab results show "
                    "--json`)")
        if note is not None:
            table.caption, table.caption_justify = note, "left"
        tables.append(table)
    return tables


def _invalid_reason(result: RunResult) -> str | None:
    return failed_validation(result, "the numbers", "when the run was stored (see the notes)")


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
    merged = result.merged(probe_shape(result.probe))
    what = probe_shape(result.probe).measures
    if merged.samples == 0 or merged.max_ns is None:
        return f"{prefix}no samples were measured"
    s = merged.summary((99.0, 99.99))
    phase, worst = max(((ph, ch) for ph, ch in result.headline_channels(probe_shape(result.probe))
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

    for table in build_tables(result):
        console.print(table)
    for line in extra_lines(result):  # the probe's own verdicts and counters
        console.print(line, highlight=False, markup=False)
    for note in result.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    console.print(verdict(result), highlight=False, markup=False)
