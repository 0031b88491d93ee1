# SPDX-License-Identifier: MIT
"""What `rtlab run` shows: the live progress (one target, or one table of every
board's channels), each stored run with its spikes and the doctor's top findings,
and several boards' runs side by side."""

from __future__ import annotations

import threading
from typing import Any

from rtlab.report import render
from rtlab.report.side_by_side import boards_side_by_side
from rtlab.report.spikes import spike_lines
from rtlab.report.terminal import channel_label
from rtlab.textfmt import seconds, us


class _Live:
    """A transient rich Live display, started at its first update (nothing is drawn
    for a run that fails before it measures)."""

    def __init__(self, console: Any) -> None:
        self._console = console
        self._live: Any = None

    def draw(self, renderable: Any) -> None:
        if self._live is None:
            from rich.live import Live

            self._live = Live(console=self._console, transient=True, auto_refresh=False)
            self._live.start()
        self._live.update(renderable, refresh=True)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()


class LiveProgress(_Live):
    """Per-CPU samples, current max and missed, with elapsed/remaining time."""

    def update(self, _board: str | None, p: Any) -> None:
        from rich.table import Table

        remaining = ""
        if p.duration_ns:
            remaining = f", {seconds(max(0, p.duration_ns - p.elapsed_ns))} left"
        phase = f"phase {p.phase} ({p.phase_index + 1}/{p.phases}) " if p.phases > 1 else ""
        table = Table(title=f"{phase}measuring: {seconds(p.elapsed_ns)} elapsed{remaining}",
                      title_justify="left")
        for name in ("channel", "samples", "max µs", "missed"):
            table.add_column(name, justify="left" if name == "channel" else "right")
        for ch in p.channels:
            table.add_row(channel_label(ch), f"{ch.samples:,}", us(ch.max_ns), f"{ch.missed:,}")
        self.draw(table)

    def clear(self) -> None:
        if self._live is not None:
            from rich.text import Text

            self.draw(Text(""))


class BoardsProgress(_Live):
    """One live table of every board's channels (updated from the boards' threads)."""

    def __init__(self, console: Any) -> None:
        super().__init__(console)
        self._latest: dict[str, Any] = {}
        self._lock = threading.Lock()

    def update(self, board: str | None, p: Any) -> None:
        from rich.table import Table

        with self._lock:
            self._latest[str(board)] = p
            table = Table(title="measuring on " + ", ".join(self._latest),
                          title_justify="left")
            for col in ("board", "phase", "elapsed", "channel", "samples", "max µs", "missed"):
                table.add_column(col, justify="left" if col in ("board", "phase", "channel")
                                 else "right")
            for name, q in self._latest.items():
                for ch in q.channels:
                    table.add_row(name, q.phase, seconds(q.elapsed_ns), channel_label(ch),
                                  f"{ch.samples:,}", us(ch.max_ns), f"{ch.missed:,}")
            self.draw(table)


def doctor_lines(result: Any) -> list[str]:
    """The doctor's top findings that may explain what was measured."""
    doctor = result.provenance.get("doctor") or {}
    top = doctor.get("top") or []
    lines = []
    for f in top:
        advice = f" -> {f['advice']}" if f.get("advice") else ""
        lines.append(f"doctor [{f.get('severity')}] {f.get('title')}: {f.get('summary')}"
                     f"{advice}")
    if lines:
        lines.insert(0, "what may explain these numbers (rtlab doctor):")
    return lines


def _variant_line(result: Any, console: Any) -> None:
    if result.scenario.get("variant"):
        console.print(f"variant {result.scenario['variant']}", style="bold", highlight=False)


def show_stored(result: Any, store_display: str, console: Any) -> None:
    """One run of one target, as it is stored: its tables, spikes and doctor lines."""
    _variant_line(result, console)
    render(result, console)
    for line in spike_lines(result):
        console.print(line, highlight=False, markup=False)
    for line in doctor_lines(result):
        console.print(line, highlight=False, markup=False)
    console.print(f"run {result.run_id} stored in {store_display}", highlight=False)


def show_boards(done: Any, console: Any, err: Any) -> None:
    """Several boards' runs once all ended: each board's runs (or its error), then the
    boards side by side and the comparison that ties them."""
    for board in done.boards:
        console.print(f"board {board.target}", style="bold", highlight=False)
        if board.error is not None:
            err.print(f"rtlab: error: {board.target}: {board.error.one_line()}",
                      highlight=False, markup=False)
            continue
        for o in board.outcomes:
            _variant_line(o.result, console)
            render(o.result, console)
            console.print(f"run {o.result.run_id} stored", highlight=False)
    results = done.results
    if len(results) > 1:
        boards_side_by_side(results, console)
        console.print(f"comparison {done.comparison}: runs "
                      + ", ".join(r.run_id for r in results), highlight=False)
