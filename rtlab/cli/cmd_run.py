# SPDX-License-Identifier: MIT
"""`rtlab run`: measure (the built-in `quick` scenario for now), show and store the result."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rtlab.exitcodes import ExitCode


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="measure wake-up latency (default: the quick scenario, 10 s on every CPU)",
        description="Run the timer probe on every online CPU (or --cpus), show a summary "
        "and store the result. Durations take a unit: ns, us, ms, s, m, h (e.g. 500us, 10s). "
        "Exit codes: 0 ok, 1 error, 2 usage, 3 threshold exceeded, 4 skipped (no real-time "
        "privileges), 130 interrupted (the partial result is stored).",
    )
    p.add_argument("--duration", default="10s", metavar="DUR", help="how long to measure (10s)")
    p.add_argument("--cpus", metavar="LIST", help="CPUs to measure, e.g. 0,2-3 (all online)")
    p.add_argument("--interval", default="1ms", metavar="DUR", help="wake-up period (1ms)")
    p.add_argument("--priority", type=int, metavar="N",
                   help="scheduling priority (99 for fifo/rr, 0 for other)")
    p.add_argument("--policy", default="fifo", choices=("fifo", "rr", "other"),
                   help="scheduling policy of the measuring threads (fifo)")
    p.add_argument("--store", metavar="PATH",
                   help="result store: SQLite file or SQLAlchemy URL "
                   "(default $RTLAB_STORE or ~/.local/share/rtlab/rtlab.db)")
    p.add_argument("--allow-non-rt", action="store_true",
                   help="measure even without real-time scheduling / locked memory "
                   "(result marked NOT real-time valid)")
    p.add_argument("--samples", metavar="FILE", help="also write every sample to FILE (binary)")
    p.add_argument("--threshold", metavar="DUR",
                   help="stop with exit code 3 as soon as one latency exceeds DUR")
    p.add_argument("--no-progress", action="store_true", help="no live progress display")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rtlab.report import render
    from rtlab.report.terminal import make_console
    from rtlab.results.store import Store
    from rtlab.runner import RunOptions, run_scenario
    from rtlab.scenario import online_cpus, parse_cpu_list, parse_duration, quick

    # Validate everything before anything starts.
    duration = parse_duration(args.duration, "--duration")
    interval = parse_duration(args.interval, "--interval")
    threshold = parse_duration(args.threshold, "--threshold") if args.threshold else None
    cpus = parse_cpu_list(args.cpus, online_cpus()) if args.cpus is not None else None
    samples = str(Path(args.samples).resolve()) if args.samples else None
    scenario = quick(duration_ns=duration, cpus=cpus, interval_ns=interval,
                     priority=args.priority, policy=args.policy, threshold_ns=threshold,
                     samples_file=samples, allow_non_rt=args.allow_non_rt)

    console = make_console()
    err = make_console(stderr=True)
    store = Store.open(args.store)
    show_progress = not args.no_progress and console.is_terminal
    progress = _LiveProgress(console) if show_progress else None
    opts = RunOptions(
        store=store,
        allow_non_rt=args.allow_non_rt,
        on_progress=progress.update if progress else None,
        command_line=["rtlab", *sys.argv[1:]],
    )
    try:
        outcome = run_scenario(scenario, opts)
    finally:
        if progress:
            progress.stop()
        store.close()
    render(outcome.result, console)
    console.print(f"run {outcome.result.run_id} stored in {store.display}", highlight=False)
    if outcome.exit_code == ExitCode.INTERRUPTED:
        err.print("rtlab: interrupted: partial result stored", highlight=False)
    return int(outcome.exit_code)


class _LiveProgress:
    """Per-CPU samples, current max and missed, with elapsed/remaining time."""

    def __init__(self, console: Any) -> None:
        from rich.live import Live

        self._live = Live(console=console, transient=True, auto_refresh=False)
        self._live.start()

    def update(self, p: Any) -> None:
        from rich.table import Table

        from rtlab.report.format import seconds, us
        from rtlab.report.terminal import channel_label

        remaining = ""
        if p.duration_ns:
            remaining = f", {seconds(max(0, p.duration_ns - p.elapsed_ns))} left"
        table = Table(title=f"measuring: {seconds(p.elapsed_ns)} elapsed{remaining}",
                      title_justify="left")
        for name in ("channel", "samples", "max µs", "missed"):
            table.add_column(name, justify="left" if name == "channel" else "right")
        for ch in p.channels:
            table.add_row(channel_label(ch), f"{ch.samples:,}", us(ch.max_ns), f"{ch.missed:,}")
        self._live.update(table, refresh=True)

    def stop(self) -> None:
        self._live.stop()
