# SPDX-License-Identifier: MIT
"""`rtlab export RUN --format FMT [-o FILE]`: write a stored run in another format."""

from __future__ import annotations

import argparse
from typing import Any

from rtlab.cli.options import add_store_arg
from rtlab.fileio import STDOUT, check_output, write_output
from rtlab.report.exporters import EXPORTERS, get_exporter
from rtlab.results.store import Store


def register(sub: Any) -> None:

    p = sub.add_parser(
        "export", help=f"export a stored run ({', '.join(EXPORTERS)})",
        description="json: the versioned result; csv: statistics per channel; csv-hist: the "
        "histogram buckets; markdown: the summary table; junit: JUnit XML (validity checks; "
        "SLO checks with `rtlab report --slo ... --junit FILE`); cyclictest-hist: the text "
        "histogram of `cyclictest -h` (1-µs rows) for OSADL-style scripts; cyclictest-json: "
        "the JSON of `cyclictest --json` (rt-tests 2.x keys) for pipelines that parse it. See "
        "docs/report.md. Exit codes: 0 ok, 1 error, 2 usage.")
    p.add_argument("run", metavar="RUN", help="run id, unique id prefix, or `last`")
    p.add_argument("--format", "-f", default="json", choices=tuple(EXPORTERS),
                   help="output format (json)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    add_store_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    exporter = get_exporter(args.format)
    if args.output is not None:
        check_output(args.output, "--output")  # before reading the store ("" is refused)
    store = Store.open(args.store, create=False)
    try:
        result = store.get(args.run)
    finally:
        store.close()
    data = exporter.serialize(result)
    write_output(STDOUT if args.output is None else args.output, data, "--output")
    return 0
