# SPDX-License-Identifier: MIT
"""`rtlab report RUN [RUN...] -o report.html [--cpus LIST] [--channel NAME] [--slo EXPR]
[--junit FILE]`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.cli.options import (
    SLO_HELP,
    add_selection,
    add_store_arg,
    load_selected,
    selection_from_args,
)
from rtlab.exitcodes import ExitCode
from rtlab.fileio import STDOUT, check_output, write_outputs
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.html import render_html
from rtlab.report.junit import junit_xml

if TYPE_CHECKING:  # pragma: no cover
    pass

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
    add_store_arg(p)
    p.set_defaults(func=run)


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr)


def run(args: argparse.Namespace) -> int:

    slo = parse_slo(args.slo, "--slo") if args.slo is not None else None  # before any work
    selection = selection_from_args(args)
    for path_arg, option in ((args.output, "--output"), (args.junit, "--junit")):
        if path_arg is not None:
            check_output(path_arg, option)
    results = load_selected(args, selection)
    report = evaluate_slo(slo, results, shape_of=probe_shape) if slo is not None else None
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
