# SPDX-License-Identifier: MIT
"""`rtlab history --host H`: a board's runs over kernel versions, regressions flagged."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from rtlab.analysis.compare import build_configs, compare_configs
from rtlab.cli.cmd_report import STORE_HELP
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.report.terminal import make_console
from rtlab.results.store import Store
from rtlab.textfmt import bounded_us, us


def register(sub: Any) -> None:
    p = sub.add_parser(
        "history", help="a board's runs over kernel versions, with regressions flagged",
        description="Groups the stored runs of one host by kernel release (oldest first) and "
        "compares each kernel with the previous one; a tail percentile (p99, p99.9, p99.99) or "
        "the window maxima worse beyond significance is flagged REGRESSION. "
        "Maxima are compared through the per-window maxima, never across runs of different "
        "length. Exit codes: 0 ok (also with regressions, unless --fail-on-regression), "
        "1 error, 2 usage, 3 the newest kernel regressed (with --fail-on-regression).")
    p.add_argument("--host", required=True, metavar="H", help="host name as stored")
    p.add_argument("--probe", default="timer", help="only runs of this probe (timer)")
    p.add_argument("--scenario", metavar="NAME", help="only runs of this scenario")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit with code 3 when the newest kernel regressed against the one "
                   "before it (for CI after a kernel upgrade)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON document: every kernel with its runs, statistics (ns) and "
                   "regressions")
    p.add_argument("--store", metavar="PATH", help=STORE_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table


    store = Store.open(args.store, create=False)
    try:
        rows = [r for r in store.list(None) if r.host == args.host and r.probe == args.probe
                and (args.scenario is None or r.scenario == args.scenario)]
        if not rows:
            raise UsageError(f"no stored {args.probe} runs of host {args.host!r}",
                             hint="see `rtlab results list`")
        rows.sort(key=lambda r: r.created)
        results = [store.get(r.id) for r in rows]
    finally:
        store.close()
    configs = build_configs(results, "kernel")
    regress: dict[str, list[str]] = {}
    for prev, cur in itertools.pairwise(configs):
        pc = compare_configs([prev, cur])[0]
        regress[cur.label] = [ch.describe() for ch in pc.regressions]
    fail = bool(args.fail_on_regression and len(configs) > 1 and regress[configs[-1].label])
    if args.json:
        _print_json(args, rows, configs, regress, fail)
        return int(ExitCode.THRESHOLD) if fail else 0
    console = make_console()
    table = Table(title=f"host {args.host}: {args.probe} runs by kernel (oldest first), "
                  "latency in µs", title_justify="left")
    for name in ("kernel", "runs", "first run", "samples", "p99", "p99.9", "p99.99", "max",
                 "vs previous kernel"):
        table.add_column(name, justify="left" if name in ("kernel", "first run",
                                                          "vs previous kernel") else "right")
    for i, c in enumerate(configs):
        first = min(rw.created for rw in rows if rw.id in c.run_ids)
        flag = "baseline" if i == 0 else (
            "REGRESSION: " + "; ".join(regress[c.label]) if regress[c.label]
            else "no significant regression")
        table.add_row(c.label, str(len(c.runs)), first.strftime("%Y-%m-%d %H:%M"),
                      f"{c.channel.samples:,}",
                      *(bounded_us(c.value(q), c.lower_bound(q)) for q in (99.0, 99.9, 99.99)),
                      us(c.value("max")), flag)
    console.print(table)
    n = sum(1 for v in regress.values() if v)
    console.print(f"{n} kernel change(s) with a significant regression" if n
                  else "no significant regression between consecutive kernels", highlight=False)
    if fail:
        console.print(f"the newest kernel {configs[-1].label} regressed", highlight=False)
        return int(ExitCode.THRESHOLD)
    return 0


def _print_json(args: argparse.Namespace, rows: list[Any], configs: list[Any],
                regress: dict[str, list[str]], fail: bool) -> None:
    import json
    import sys

    kernels = []
    for i, c in enumerate(configs):
        first = min(rw.created for rw in rows if rw.id in c.run_ids)
        kernels.append({
            "kernel": c.label, "runs": list(c.run_ids), "first_run": first.isoformat(),
            "samples": c.channel.samples,
            "percentiles_ns": {f"p{q:g}": c.value(q) for q in (99.0, 99.9, 99.99)},
            "lower_bounds_ns": {f"p{q:g}": c.lower_bound(q) for q in (99.0, 99.9, 99.99)},
            "max_ns": c.value("max"),
            "baseline": i == 0,
            "regressions": [] if i == 0 else regress[c.label],
        })
    json.dump({"schema": 1, "host": args.host, "probe": args.probe,
               "scenario": args.scenario, "kernels": kernels,
               "newest_regressed": bool(len(configs) > 1 and regress[configs[-1].label]),
               "fail_on_regression": bool(args.fail_on_regression), "failed": fail},
              sys.stdout, indent=1)
    sys.stdout.write("\n")
