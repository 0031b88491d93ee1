# SPDX-License-Identifier: MIT
"""`rtlab compare RUN RUN... [--by kernel|scenario|variant|host] [--cpus LIST]
[--channel NAME] [--html FILE] [--slo EXPR]`."""

from __future__ import annotations

import argparse
from typing import Any

from rtlab.analysis.compare import compare_configs
from rtlab.analysis.configs import TABLE_LEVELS, build_configs, side_by_side
from rtlab.analysis.loadmix import mixed_load_notes
from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.cli.options import (
    SLO_HELP,
    add_selection,
    add_store_arg,
    load_selected,
    selection_from_args,
)
from rtlab.cpulist import format_cpulist
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.fileio import STDOUT, check_output, write_outputs
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.html import render_html
from rtlab.report.junit import junit_xml
from rtlab.report.side_by_side import side_by_side_table
from rtlab.report.terminal import make_console
from rtlab.results.summary import percentile, percentile_label
from rtlab.textfmt import bounded_us, seconds, us


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare", help="compare runs or configurations, with statistical significance",
        description="A table of min, avg, mode, p99, p99.9, p99.99 and max per configuration, "
        "and for each configuration the change of median, mean, p99, p99.9, p99.99 and the "
        "median window maximum against the first (baseline): a ratio with a 99 % confidence "
        "interval from batches of consecutive windows (latency samples are not independent), "
        "and a verdict: \"worse\"/\"better\" (significant), \"no change\" (not "
        "significant, and the interval lies within ±10 %), or \"cannot tell\" (no interval, "
        "or one reaching beyond ±10 %: the change is shown with why, and what would decide "
        "it, e.g. \"measure ~k× longer or k runs\"); then one line per comparison with each "
        "verdict's statistics. Maxima of runs of different length are not compared "
        "directly: their per-window maxima are. "
        "--json prints all of it as one document (values in ns). "
        "Exit codes: 0 ok, 1 error, 2 usage, 3 SLO violated or not decided (with --json "
        "too).")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run ids (the first is the baseline)")
    p.add_argument("--by", choices=("run", "kernel", "scenario", "variant", "host"),
                   default="run", help="group runs into configurations (run: each run is one; "
                   "host: each measured machine or board is one, and its CPUs are shown side "
                   "by side)")
    add_selection(p)
    p.add_argument("--html", metavar="FILE", help="also write an HTML report with overlaid "
                   "CCDFs")
    p.add_argument("--slo", metavar="EXPR", help=SLO_HELP)
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML")
    add_store_arg(p)
    p.add_argument("--json", action="store_true",
                   help="print a JSON document: per configuration its row, per comparison "
                   "each statistic's two values, ratio, verdict and p-value, the selection, "
                   "grouping, notes and SLO outcome")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table


    slo = parse_slo(args.slo, "--slo") if args.slo is not None else None
    selection = selection_from_args(args)
    for path, option in ((args.html, "--html"), (args.junit, "--junit")):
        if path == STDOUT:
            raise UsageError(f"{option} -: rtlab compare prints its comparison on standard "
                             "output; give a file")
        if path is not None:  # before the store is read
            check_output(path, option)
    results = load_selected(args, selection)
    configs = build_configs(results, args.by, shape_of=probe_shape)
    if len(configs) < 2:
        raise UsageError(f"nothing to compare: the runs form {len(configs)} configuration(s) "
                         f"by {args.by}", hint="give runs of different configurations")
    pairs = compare_configs(configs)
    if args.json:
        return _json_out(args, selection, configs, pairs, results, slo)
    console = make_console()
    chosen = "" if selection.everything else f" ({selection.describe()})"
    table = Table(title=f"latency in µs by {args.by}{chosen}", title_justify="left")
    for name in ("configuration", "runs", "samples", "duration", "min", "avg", "mode",
                 *(percentile_label(q) for q in TABLE_LEVELS), "max", "median window max"):
        table.add_column(name, justify="left" if name == "configuration" else "right")
    for c in configs:
        table.add_row(c.display, str(len(c.runs)), f"{c.channel.samples:,}",
                      seconds(c.duration_ns), us(c.value("min")), us(c.value("avg")),
                      us(c.value("mode")),
                      *(bounded_us(c.value(q), c.lower_bound(q)) for q in TABLE_LEVELS),
                      us(c.value("max")), us(c.value("window")))
    console.print(table)
    for note in mixed_load_notes(results):
        console.print(f"note: {note}", highlight=False, markup=False)
    if args.by == "host":
        console.print(side_by_side_table(configs))
    if any(c.censored for c in configs):
        console.print("≥ = beyond the peer tool's histogram range: only a lower bound is known",
                      highlight=False)
    for pc in pairs:
        console.print(f"{pc.b.display} vs {pc.a.display} (baseline):", highlight=False)
        for ch in pc.changes:
            console.print(f"  {ch.describe()}", highlight=False, markup=False)
        console.print(f"  verdict: {pc.summary()}", highlight=False, markup=False)
    report = evaluate_slo(slo, results, shape_of=probe_shape) if slo is not None else None
    html = _write_files(args, results, slo, report)
    if html is not None:
        console.print(f"report written to {html}", highlight=False)
    if report is not None:
        console.print(report.summary(), highlight=False, markup=False)
        if not report.passed:
            return int(ExitCode.THRESHOLD)
    return int(ExitCode.OK)


def _write_files(args: argparse.Namespace, results: list[Any], slo: Any, report: Any
                 ) -> str | None:
    """The --html report and --junit file, both or neither (rtlab.fileio); the report's
    path, if one was asked for."""
    outputs: list[tuple[str, Any, str]] = []
    if args.html:
        outputs.append((args.html, render_html(results, slo=slo, slo_report=report,
                                               compare_by=args.by), "--html"))
    if args.junit:
        outputs.append((args.junit, junit_xml(results, slo, report), "--junit"))
    written = write_outputs(outputs)
    return str(written[0] or "standard output") if args.html else None


def _json_out(args: argparse.Namespace, selection: Any, configs: list[Any], pairs: list[Any],
              results: list[Any], slo: Any) -> int:
    """`rtlab compare --json`: everything the text shows, as one document on stdout; the
    HTML report and JUnit file are still written (their paths are in it)."""
    import json
    import sys


    report = evaluate_slo(slo, results, shape_of=probe_shape) if slo is not None else None
    html = _write_files(args, results, slo, report)
    sbs = None
    if args.by == "host":
        levels = [(percentile_label(q), q) for q in TABLE_LEVELS]
        sbs = [{"channel": name, "configurations": [
            None if ch is None else {
                "label": c.label, "samples": ch.samples,
                "percentiles_ns": {n: percentile(ch.hist, q, ch.min_ns, ch.max_ns)
                                   for n, q in levels},
                "max_ns": ch.max_ns if ch.samples else None}
            for c, ch in zip(configs, chans, strict=True)]}
            for name, chans in side_by_side(configs)]
    notes = mixed_load_notes(results)
    if any(c.censored for c in configs):
        notes.append("lower_bounds_ns: beyond the peer tool's histogram range, a percentile "
                     "is only known to lie in [lower bound, value]")
    doc = {
        "schema": 1,
        "by": args.by,
        "selection": {"everything": selection.everything,
                      "cpus": (format_cpulist(selection.cpus)
                               if selection.cpus is not None else None),
                      "channels": list(selection.patterns),
                      "text": selection.describe()},
        "baseline": configs[0].label,
        "configurations": [c.to_dict() for c in configs],
        "comparisons": [pc.to_dict() for pc in pairs],
        "side_by_side": sbs,
        "notes": notes,
        "slo": None if report is None else {
            "expression": str(report.slo), "passed": report.passed,
            "verdict": report.verdict, "checks": len(report.outcomes),
            "undecided": len(report.undecided), "summary": report.summary(),
            "failures": [{"run_id": o.run_id, "phase": o.phase, "channel": o.channel,
                          "clause": o.clause.text, "status": o.status, "value": o.value,
                          "reason": o.reason}
                         for o in report.failures]},
        "html": html,
        "junit": args.junit,
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return int(ExitCode.THRESHOLD if report is not None and not report.passed
               else ExitCode.OK)
