# SPDX-License-Identifier: MIT
"""`rtlab plot RUN --kind hist|ccdf|timeline -o FILE.png|svg`."""

from __future__ import annotations

import argparse
from typing import Any

from rtlab.cli.options import add_store_arg, load_runs
from rtlab.errors import UsageError
from rtlab.textfmt import shown


def register(sub: Any) -> None:
    p = sub.add_parser(
        "plot", help="plot a stored run (histogram, CCDF, maxima over time) to PNG or SVG",
        description="hist: per-CPU histograms, log y, mode and max marked; ccdf: P(latency > x) "
        "log-log; timeline: window maxima and running maximum over run time. "
        "Exit codes: 0 ok, 1 error, 2 usage.")
    p.add_argument("run", metavar="RUN", help="run id, unique id prefix, or `last`")
    p.add_argument("--kind", choices=("hist", "ccdf", "timeline"), default="hist",
                   help="what to plot (hist)")
    p.add_argument("--phase", metavar="NAME", help="phase to plot (default: every phase; "
                   "channels are then labelled with their phase and the timeline shows the "
                   "phases one after the other)")
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="FILE.png or FILE.svg")
    add_store_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rtlab.fileio import check_output
    from rtlab.report.plots import figure_for, save_figure

    if Path(args.output).suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"--output {shown(args.output)}: a plot file must end in .png or .svg")
    check_output(args.output, "--output")  # before any work
    result = load_runs(args.store, [args.run])[0]
    phases = result.phases
    if args.phase is not None:
        phases = [p for p in phases if p.name == args.phase]
        if not phases:
            names = ", ".join(p.name for p in result.phases)
            raise UsageError(f"run {result.run_id} has no phase {args.phase!r}",
                             hint=f"phases: {names}")
    title = f"run {result.run_id} ({result.system.get('release') or 'kernel n/a'})" + (
        f", phase {args.phase}" if args.phase else "")
    path = save_figure(figure_for(args.kind, phases, title, result), args.output)
    print(f"{args.kind} plot written to {path}")
    return 0
