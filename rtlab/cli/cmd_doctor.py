# SPDX-License-Identifier: MIT
"""`rtlab doctor`: check this system (or a copied tree) for causes of RT latency.

Exit codes: 0 normally; with --strict, 0 when nothing is worse than info/unknown and
3 (THRESHOLD) when a warning or critical finding exists. 2 on bad arguments, 1 on errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rtlab.cli.options import add_json_arg, add_target_args
from rtlab.engine.board import open_target
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.system.doctor import Severity, run_checks, summarize, validate_cpus, worst
from rtlab.system.sysroot import SysRoot
from rtlab.system.target_snapshot import doctor_tree

_STYLE = {
    "ok": "green",
    "info": "cyan",
    "unknown": "magenta",
    "warning": "yellow",
    "critical": "bold red",
}


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "doctor",
        help="check the system for causes of real-time latency",
        description="Check the kernel, CPUs, scheduler, memory and interrupts for causes of "
        "real-time latency and say exactly what to change.",
        epilog="exit codes: 0 ok (with --strict: nothing worse than info/unknown), "
        "2 usage, 3 with --strict when a warning or critical finding exists",
    )
    p.add_argument(
        "--cpus",
        metavar="LIST",
        help="CPUs to judge per-CPU checks for (e.g. 2,3 or 1-3; default: all online)",
    )
    add_json_arg(p)
    p.add_argument(
        "--strict", action="store_true", help="exit 3 if any finding is a warning or critical"
    )
    p.add_argument(
        "--root",
        metavar="DIR",
        default="/",
        help="system tree to inspect (a copy of a board's /proc and /sys)",
    )
    add_target_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.target is None:
        return _report(args, args.root, None)
    if args.root != "/":
        raise UsageError("give either --root DIR (a copied tree) or --target (a board), "
                         "not both")
    import tempfile
    from pathlib import Path


    with open_target(args.target, args.engine_dir) as target, \
            tempfile.TemporaryDirectory(prefix="rtlab-board-") as tree:
        if target.is_local:
            return _report(args, "/", None)
        doctor_tree(target, Path(tree))
        return _report(args, tree, target)


def _report(args: argparse.Namespace, root: str, target: Any) -> int:

    sysroot = SysRoot(root)
    cpus = validate_cpus(sysroot, args.cpus)
    findings = run_checks(root, cpus, engine=target)
    if args.json:
        doc = {
            "schema": 1,
            "root": args.root,
            "target": target.target if target is not None else "local",
            "cpus": cpus,
            "summary": summarize(findings),
            "findings": [f.to_dict() for f in findings],
        }
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _table(findings, None if target is None else target.target)
    if args.strict and worst(findings).rank >= Severity.WARNING.rank:
        return int(ExitCode.THRESHOLD)
    return int(ExitCode.OK)


def _table(findings: list, target: str | None) -> None:  # type: ignore[type-arg]
    from rich.console import Console
    from rich.table import Table


    console = Console()
    title = "rtlab doctor" + (f" (board {target})" if target else "")
    table = Table(title=title, show_lines=False, expand=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("finding", overflow="fold")
    table.add_column("advice", overflow="fold")
    for f in sorted(findings, key=lambda f: -f.severity.rank):
        sev = f.severity.value
        table.add_row(f"[{_STYLE[sev]}]{sev}[/]", f.check, f.summary, f.advice or "")
    console.print(table)
    counts = summarize(findings)["counts"]
    console.print(", ".join(f"{n} {k}" for k, n in counts.items() if n))
