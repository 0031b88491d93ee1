# SPDX-License-Identifier: MIT
"""`rtlab report RUN [RUN...] -o report.html [--cpus LIST] [--channel NAME] [--slo EXPR]
[--junit FILE]`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from rtlab.analysis.compare import ChannelSelection, select_channels
from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.fileio import STDOUT, check_output, write_outputs
from rtlab.report.html import render_html
from rtlab.report.junit import junit_xml
from rtlab.results.store import Store
from rtlab.scenario.units import parse_cpu_list

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.analysis.compare import ChannelSelection
    from rtlab.results.model import RunResult

STORE_HELP = ("result store: SQLite file or SQLAlchemy URL (default $RTLAB_STORE or "
              "~/.local/share/rtlab/rtlab.db)")
SLO_HELP = ("service-level objective, e.g. \"max < 50us and p99.99 < 20us\" (metrics min, avg, "
            "mode, max, pNN[.N], missed; units ns, us, ms, s); exit code 3 when not met: "
            "violated, or undecided (a percentile's 95 %% confidence interval contains the "
            "bound: the run is too short to decide)")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="write a self-contained HTML report of stored runs",
        description="Write one self-contained HTML file (plots inline, no network needed) for "
        "one or several stored runs; several runs are also compared. Exit codes: 0 ok, 1 error, "
        "2 usage (unknown run, bad --slo), 3 SLO not met: violated or undecided (the run too "
        "short to decide a percentile clause; the report is still written).")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id, unique id prefix, or `last`")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="HTML file to write (default report-<first run id>.html)")
    p.add_argument("--by", choices=("run", "kernel", "scenario", "variant", "host"), default="run",
                   help="group several runs into configurations for the comparison (run)")
    add_selection(p)
    p.add_argument("--slo", metavar="EXPR", help=SLO_HELP)
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML (one testcase per "
                   "channel per SLO clause; without --slo: validity checks)")
    p.add_argument("--store", metavar="PATH", help=STORE_HELP)
    p.set_defaults(func=run)


def add_selection(p: Any) -> None:
    """`--cpus` and `--channel` (docs/report.md#selecting-channels---cpus---channel)."""
    p.add_argument("--cpus", metavar="LIST", help="only the channels measured on these CPUs, "
                   "e.g. 1 or 1-3 (every row, verdict, comparison and SLO gate uses them "
                   "only; a run without one is an error)")
    p.add_argument("--channel", metavar="NAME", action="append",
                   help="only the channels named NAME: a name or shell pattern (cpu1, "
                   "'thread@cpu*'); repeatable or a comma list; with --cpus, both must match")


def selection_from_args(args: argparse.Namespace) -> ChannelSelection:
    """The ChannelSelection of --cpus/--channel (UsageError, exit 2, on a bad value)."""

    cpus = frozenset(parse_cpu_list(args.cpus)) if args.cpus is not None else None
    patterns: list[str] = []
    for value in args.channel or []:
        for name in value.split(","):
            if not name.strip():
                raise UsageError(f"--channel {value!r}: empty channel name",
                                 hint="e.g. --channel cpu1 or --channel 'thread@cpu*'")
            patterns.append(name.strip())
    return ChannelSelection(cpus, tuple(dict.fromkeys(patterns)))


def load_selected(args: argparse.Namespace, selection: ChannelSelection) -> list[RunResult]:
    """The runs given on the command line, each with the selected channels only."""

    return select_channels(load_runs(args.store, args.runs), selection)


def load_runs(store_arg: str | None, refs: list[str]) -> list[Any]:

    store = Store.open(store_arg, create=False)
    try:
        return [store.get(ref) for ref in refs]
    finally:
        store.close()


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr)


def run(args: argparse.Namespace) -> int:

    slo = parse_slo(args.slo, "--slo") if args.slo is not None else None  # before any work
    selection = selection_from_args(args)
    for path_arg, option in ((args.output, "--output"), (args.junit, "--junit")):
        if path_arg is not None:
            check_output(path_arg, option)
    results = load_selected(args, selection)
    report = evaluate_slo(slo, results) if slo is not None else None
    html_path = f"report-{results[0].run_id}.html" if args.output is None else args.output
    outputs = [(html_path, render_html(results, slo=slo, slo_report=report,
                                       compare_by=args.by), "--output")]
    if args.junit:
        outputs.append((args.junit, junit_xml(results, slo, report), "--junit"))
    written = write_outputs(outputs)
    say = print if STDOUT not in (html_path, args.junit) else _to_stderr
    say(f"report written to {written[0] or 'standard output'}")
    if args.junit:
        say(f"JUnit XML written to {written[1] or 'standard output'}")
    if report is not None:
        print(report.summary())
        if not report.passed:
            return int(ExitCode.THRESHOLD)
    return int(ExitCode.OK)
