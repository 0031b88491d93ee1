# SPDX-License-Identifier: MIT
"""`rtlab report RUN [RUN...] -o report.html [--slo EXPR] [--junit FILE]`."""

from __future__ import annotations

import argparse
from typing import Any

from rtlab.exitcodes import ExitCode

STORE_HELP = ("result store: SQLite file or SQLAlchemy URL (default $RTLAB_STORE or "
              "~/.local/share/rtlab/rtlab.db)")
SLO_HELP = ("service-level objective, e.g. \"max < 50us and p99.99 < 20us\" (metrics min, avg, "
            "mode, max, pNN[.N], missed; units ns, us, ms, s); exit code 3 when violated")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="write a self-contained HTML report of stored runs",
        description="Write one self-contained HTML file (plots inline, no network needed) for "
        "one or several stored runs; several runs are also compared. Exit codes: 0 ok, 1 error, "
        "2 usage (unknown run, bad --slo), 3 SLO violated (the report is still written).")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id, unique id prefix, or `last`")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="HTML file to write (default report-<first run id>.html)")
    p.add_argument("--by", choices=("run", "kernel", "scenario", "variant", "host"), default="run",
                   help="group several runs into configurations for the comparison (run)")
    p.add_argument("--slo", metavar="EXPR", help=SLO_HELP)
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML (one testcase per "
                   "channel per SLO clause; without --slo: validity checks)")
    p.add_argument("--store", metavar="PATH", help=STORE_HELP)
    p.set_defaults(func=run)


def load_runs(store_arg: str | None, refs: list[str]) -> list[Any]:
    from rtlab.results.store import Store

    store = Store.open(store_arg, create=False)
    try:
        return [store.get(ref) for ref in refs]
    finally:
        store.close()


def write_junit(path: str, results: list[Any], slo: Any, report: Any) -> None:
    from rtlab.errors import RtlabError
    from rtlab.report.junit import junit_xml

    try:
        with open(path, "wb") as f:
            f.write(junit_xml(results, slo, report))
    except OSError as exc:
        raise RtlabError(f"cannot write {path}: {exc.strerror or exc}") from exc


def run(args: argparse.Namespace) -> int:
    from rtlab.analysis.slo import evaluate_slo, parse_slo
    from rtlab.report.html import write_run_report

    slo = parse_slo(args.slo) if args.slo is not None else None  # before any work
    results = load_runs(args.store, args.runs)
    report = evaluate_slo(slo, results) if slo is not None else None
    path = write_run_report(results, args.output or f"report-{results[0].run_id}.html",
                            slo=slo, slo_report=report, compare_by=args.by)
    print(f"report written to {path}")
    if args.junit:
        write_junit(args.junit, results, slo, report)
        print(f"JUnit XML written to {args.junit}")
    if report is not None:
        print(report.summary())
        if not report.passed:
            return int(ExitCode.THRESHOLD)
    return int(ExitCode.OK)
