# SPDX-License-Identifier: MIT
"""`rtlab results list|show|import|fetch|push|pull`: browse the result store, fill it, and
copy runs between two stores (the policy of push and pull: rtlab.results.sync)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from rtlab.analysis.stats import DEFAULT_LEVEL
from rtlab.cli.options import (
    add_json_arg,
    add_limit_arg,
    add_store_arg,
    add_target_args,
    check_limit,
)
from rtlab.engine.board import open_target
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.machine_text import preemption, processor
from rtlab.probes.registry import shape as probe_shape
from rtlab.report import render
from rtlab.report.exporters import INTERVAL_METHOD, intervals_json
from rtlab.report.terminal import make_console, row_intervals
from rtlab.results.importers import FORMATS, ImportContext
from rtlab.results.store import NoStoreError, Store
from rtlab.results.summary import DEFAULT_PERCENTILES
from rtlab.results.sync import Selection, parse_since, transfer
from rtlab.runner import import_jsonl
from rtlab.runner.fetch import fetch_runs
from rtlab.textfmt import NA, seconds, us


def register(sub: Any) -> None:

    p = sub.add_parser("results", help="list, show, import stored runs; push and pull them "
                       "between stores")
    rsub = p.add_subparsers(dest="results_command", metavar="ACTION", required=True)

    ls = rsub.add_parser("list", help="stored runs, newest first",
                         description="The stored runs, newest first. The table shows the "
                         "newest 20 unless --limit says otherwise and then says how many it "
                         "left out; --json lists every run unless --limit is given, and states "
                         "limit, shown and total.")
    add_limit_arg(ls, "at most N runs (0: all; default 20, with --json all)")
    add_json_arg(ls)
    add_store_arg(ls)
    ls.set_defaults(func=cmd_list)

    show = rsub.add_parser("show", help="summary of a stored run",
                           description="Provenance, status, notes and per-phase, per-channel "
                           "statistics of a stored run (the whole versioned result with its "
                           "histograms: `rtlab export RUN`).")
    show.add_argument("run", metavar="RUN", help="run id, unique id prefix, or `last`")
    add_json_arg(show)
    add_store_arg(show)
    show.set_defaults(func=cmd_show)

    imp = rsub.add_parser(
        "import", help="store a raw engine output file (JSON Lines) or a peer tool's output",
        description="The whole file (every file of a multi-phase run) is parsed before "
        "anything is stored. A raw file of a multi-phase run (ID.jsonl with "
        "ID.N-PHASE[-LABEL].jsonl beside it, or any one of them) brings the whole run: one run "
        "ID, its phases named from the file names (docs/usage.md). "
        "Exit codes: 0 ok, 1 error (e.g. the run id is already stored), 2 usage or a "
        "malformed file (one line saying what is wrong; nothing stored).")
    imp.add_argument("file", metavar="FILE", help="rtlab-probe output (e.g. a file in runs/) or "
                     "a peer tool's output (with --format)")
    imp.add_argument("--one-file", action="store_true",
                     help="import only FILE, as a run of its own, not the other phase files "
                     "of its run")
    imp.add_argument("--format", default="rtlab", metavar="FMT",
                     choices=("rtlab", *FORMATS),
                     help="rtlab (engine JSON Lines, default) or a peer tool's: "
                     f"{', '.join(FORMATS)} (every version and variant accepted: "
                     "docs/results.md)")
    ctx = imp.add_argument_group(
        "what the peer's file may not say (peer formats only; used by `rtlab history` "
        "and `compare --by kernel`)")
    ctx.add_argument("--host", metavar="NAME", help="host (board) the file was measured on")
    ctx.add_argument("--kernel", metavar="RELEASE", help="kernel release, e.g. 6.6.30-rt30")
    ctx.add_argument("--preempt", metavar="MODEL", help="preemption model, e.g. PREEMPT_RT")
    ctx.add_argument("--date", metavar="ISO", help="when it was measured (ISO 8601; default: "
                     "what the file says, else the file's modification time)")
    ctx.add_argument("--nsecs", action="store_true",
                     help="cyclictest-hist only: the file was written by `cyclictest -N/--nsecs` "
                     "(rows and trailers in ns; the text does not say so)")
    add_store_arg(imp)
    imp.set_defaults(func=cmd_import)

    fetch = rsub.add_parser(
        "fetch", help="bring home the runs a board kept (after a dropped connection or a "
        "killed host)",
        description="Every run on a board also keeps its raw output there (in the engine "
        "directory's runs/). This copies those files into the store's raw directory and "
        "imports every run that is not stored yet; stored runs are never overwritten. A "
        "traced run's trace captures and samples come with it (its spikes attributed at "
        "import) and are removed from the board once it is stored. "
        "Exit codes: 0 ok, 1 a file could not be imported or fetched, or the board not "
        "reached.")
    fetch.add_argument("--json", action="store_true",
                       help="print a JSON document (imported, already stored, failed)")
    add_target_args(fetch)
    add_store_arg(fetch)
    fetch.set_defaults(func=cmd_fetch)

    for name in ("push", "pull"):
        _transfer_parser(rsub, name)


_TRANSFER_HELP = {
    "push": ("copy runs from this store (--store) to another (--to), e.g. the lab's "
             "PostgreSQL database",
             "Copies the selected runs of --store (all of them unless runs, --host, --probe "
             "or --since narrow it down) that the store --to does not hold, each with its raw "
             "files, each in one transaction: an interrupted push leaves every run whole or "
             "absent, and running it again completes it. A run --to holds with the same "
             "content is not copied again; one it holds with other content is a conflict, "
             "reported and never overwritten; a run whose numbers fail validation without "
             "being marked invalid is refused. Exit codes: 0 ok, 1 a conflict, a refused run "
             "or a database error (one line; the runs copied so far stay), 2 usage, "
             "130 interrupted. docs/results.md#lab-store-push-and-pull"),
    "pull": ("copy runs from another store (--from), e.g. the lab's PostgreSQL database, "
             "into this one (--store)",
             "Copies the selected runs of --from (all of them unless runs, --host, --probe or "
             "--since narrow it down) that --store does not hold, each with its raw files, "
             "each in one transaction; the same rules as `rtlab results push`. Exit codes: "
             "0 ok, 1 a conflict, a refused run or a database error, 2 usage, "
             "130 interrupted. docs/results.md#lab-store-push-and-pull"),
}
LAB_ENV_VAR = "RTLAB_LAB_STORE"


def _transfer_parser(rsub: Any, name: str) -> None:
    short, description = _TRANSFER_HELP[name]
    p = rsub.add_parser(name, help=short, description=description)
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="only these runs of the source (id, unique id prefix, or `last`)")
    other = "--to" if name == "push" else "--from"
    p.add_argument(other, dest="other", metavar="STORE",
                   help=f"the {'destination' if name == 'push' else 'source'}: SQLite file or "
                   f"database URL (default ${LAB_ENV_VAR})")
    p.add_argument("--host", action="append", default=[], metavar="NAME",
                   help="only runs measured on this host (as stored; repeatable)")
    p.add_argument("--probe", action="append", default=[], metavar="NAME",
                   help="only runs of this probe (repeatable)")
    p.add_argument("--since", metavar="ISO",
                   help="only runs started at or after this date or time (ISO 8601, UTC "
                   "unless an offset is given)")
    p.add_argument("--dry-run", action="store_true",
                   help="say what would be copied; change nothing")
    p.add_argument("--json", action="store_true", help="print a JSON document (the summary)")
    add_store_arg(p)
    p.set_defaults(func=cmd_transfer, direction=name)


def cmd_list(args: argparse.Namespace) -> int:
    from rich.table import Table


    check_limit(args.limit)
    limit = args.limit if args.limit is not None else (0 if args.json else DEFAULT_LIMIT)
    try:
        store = Store.open(args.store, create=False)
    except NoStoreError as exc:  # a store that does not exist yet holds no runs
        where = exc.message.split(': ', 1)[-1]
        if args.json:
            _print_json({"schema": 1, "store": where, "limit": limit or None, "total": 0,
                         "shown": 0, "runs": []})
        else:
            print(f"no runs stored ({where} yet)")
        return 0
    try:  # the total is counted, never guessed; only the rows shown are read (a lab's
        # store holds hundreds of thousands)
        total = store.count()
        rows = store.list(limit or None)
    finally:
        store.close()
    if args.json:
        _print_json({"schema": 1, "store": store.display, "limit": limit or None,
                     "total": total, "shown": len(rows),
                     "runs": [_row_json(r) for r in rows]})
        return 0
    console = make_console()
    if not rows:
        console.print(f"no runs stored in {store.display}", highlight=False)
        return 0
    table = Table(title=f"runs in {store.display}", title_justify="left")
    for name in ("id", "created (UTC)", "host", "kernel", "preempt", "probe", "scenario",
                 "status", "rt", "duration", "samples", "p99 µs", "p99.99 µs", "max µs"):
        table.add_column(name, justify="right" if name.endswith(("µs", "samples")) else "left")
    for r in rows:
        rt = NA if r.rt_valid is None else ("yes" if r.rt_valid else "NO")
        table.add_row(r.id, r.created.strftime("%Y-%m-%d %H:%M:%S"), r.host or NA,
                      r.kernel_release or NA, r.preempt or NA, r.probe, r.scenario or NA,
                      r.status, rt, seconds(r.duration_ns), f"{r.samples:,}", us(r.p99_ns),
                      us(r.p9999_ns), us(r.worst_max_ns))
    console.print(table)
    if len(rows) < total:
        console.print(f"{len(rows)} of {total} runs shown (--limit 0: all)",
                      highlight=False)
    return 0


DEFAULT_LIMIT = 20  # rows of the `results list` table


def _print_json(doc: Any) -> None:
    import json

    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


def _row_json(r: Any) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(r)
    d["created"] = r.created.isoformat()
    return d


def show_json(result: Any) -> dict[str, Any]:
    """What `results show` prints, as data: provenance, status, notes, per-phase channel
    statistics (ns) with the confidence intervals of the tail percentiles
    (`percentile_intervals`, docs/report.md) and the probe's extras. No statistics from
    numbers that failed validation (status invalid): their channels say `statistics: null`."""

    host = result.provenance.get("host", {})
    system = result.system
    valid = result.status != "invalid"

    def channel(ch: Any) -> dict[str, Any]:
        d: dict[str, Any] = {"name": ch.name, "cpu": ch.cpu, "samples": ch.samples,
                             "missed": ch.missed}
        if not valid:
            return d | {"statistics": None}
        s = ch.summary(DEFAULT_PERCENTILES)
        return d | {"statistics": {
            "min_ns": s.min_ns, "max_ns": s.max_ns, "mean_ns": s.mean_ns, "mode_ns": s.mode_ns,
            "max_at_ns": s.max_at_ns,
            "percentiles_ns": {f"p{q:g}": v for q, v in s.percentiles.items()},
            "percentile_intervals": {"level": DEFAULT_LEVEL,
                                     **intervals_json(row_intervals(ch))}}}

    return {
        "schema": 1,
        "run_id": result.run_id,
        "status": result.status,
        "partial": result.partial,
        "rt_valid": result.rt_valid,
        "probe": result.probe,
        "scenario": result.scenario,
        "started": host.get("start_wall"),
        "host": system.get("hostname") or host.get("hostname"),
        "kernel": system.get("release"),
        "preempt": preemption(system),
        "cpu_model": system.get("cpu_model"),
        "cpu_models": system.get("cpu_models"),
        "elapsed_ns": result.elapsed_ns,
        "notes": list(result.notes),
        "percentile_intervals_method": INTERVAL_METHOD if valid else None,
        "phases": [{"name": p.name, "elapsed_ns": p.elapsed_ns,
                    "channels": [channel(c) for c in p.channels],
                    "spike_summary": p.spike_summary, "extras": p.extras}
                   for p in result.phases],
    }


def cmd_show(args: argparse.Namespace) -> int:

    store = Store.open(args.store, create=False)
    try:
        result = store.get(args.run)
    finally:
        store.close()
    if args.json:
        _print_json(show_json(result))
        return 0
    console = make_console()
    host = result.provenance.get("host", {})
    system = result.system
    console.print(
        f"run {result.run_id}: {result.status}, probe {result.probe}, "
        f"scenario {result.scenario.get('name') or 'n/a'}, started {host.get('start_wall')}, "
        f"host {system.get('hostname') or host.get('hostname')}, "
        f"kernel {system.get('release')}, preemption {preemption(system) or 'n/a'}, "
        f"CPU {processor(system) or 'n/a'}",
        highlight=False,
    )
    render(result, console)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path


    fmt = getattr(args, "format", "rtlab")
    given = [f"--{k}" for k in ("host", "kernel", "preempt", "date")
             if getattr(args, k, None) is not None]
    if getattr(args, "nsecs", False):
        given.append("--nsecs")
    one_file = getattr(args, "one_file", False)
    if fmt != "rtlab" and one_file:
        raise UsageError("--one-file only applies to rtlab engine files (--format rtlab)",
                         hint="a peer tool's file is always imported on its own")
    context = None
    if fmt != "rtlab":

        context = ImportContext.from_args(args.host, args.kernel, args.preempt, args.date)
    elif given:
        raise UsageError(f"{', '.join(given)} only apply to peer formats",
                         hint="rtlab engine files carry their own host facts")
    from rtlab.fileio import IMPORT_LIMIT, check_input

    check_input(args.file, "import file", IMPORT_LIMIT)  # before the store is opened
    store = Store.open(args.store)
    try:
        if fmt != "rtlab":
            from rtlab.results.importers import import_into_store

            result = import_into_store(Path(args.file), fmt, store,
                                       ["rtlab", *args.argv], context, nsecs=args.nsecs,
                                       shape_of=probe_shape)
        else:
            result = import_jsonl(Path(args.file), store, ["rtlab", *args.argv],
                                  one_file=one_file)
    finally:
        store.close()
    console = make_console()
    render(result, console)
    console.print(f"run {result.run_id} imported into {store.display}", highlight=False)
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:

    if args.target in (None, "local"):
        raise UsageError("rtlab results fetch needs --target [USER@]HOST[:PORT]")
    store = Store.open(args.store)  # refused before connecting; creates nothing yet
    try:
        with open_target(args.target, args.engine_dir) as target:
            rep = fetch_runs(target, store, ["rtlab", *args.argv])
    finally:
        store.close()
    if getattr(args, "json", False):
        _print_json({"schema": 1, "target": args.target, "store": store.display,
                     "imported": list(rep.imported), "already": list(rep.already),
                     "failed": [{"file": what, "error": why} for what, why in rep.failed]})
        return int(ExitCode.ERROR if rep.failed else ExitCode.OK)
    for run_id in rep.imported:
        print(f"run {run_id} fetched from {args.target} and stored in {store.display}")
    if rep.already:
        print(f"already stored: {', '.join(rep.already)}")
    for what, why in rep.failed:
        print(f"not imported: {what}: {why}", file=sys.stderr)
    if not (rep.imported or rep.already or rep.failed):
        print(f"{args.target} keeps no runs")
    return int(ExitCode.ERROR if rep.failed else ExitCode.OK)


def cmd_transfer(args: argparse.Namespace) -> int:
    """`results push` and `results pull`: the policy is rtlab.results.sync's."""
    push = args.direction == "push"
    other = args.other or os.environ.get(LAB_ENV_VAR)
    if not other:
        flag = "--to" if push else "--from"
        raise UsageError(f"rtlab results {args.direction} needs {flag} STORE",
                         hint=f"or set ${LAB_ENV_VAR} to the lab's store URL")
    selection = Selection(tuple(args.runs), tuple(args.host), tuple(args.probe),
                          parse_since(args.since) if args.since else None)
    src_loc, dst_loc = (args.store, other) if push else (other, args.store)
    other_name = ("--to" if push else "--from") if args.other else f"${LAB_ENV_VAR}"
    source = Store.open(src_loc, create=False, name=None if push else other_name)
    dest = None
    # Ctrl-C and SIGTERM ask the transfer to stop where no database call is under way
    # (a KeyboardInterrupt raised inside the driver can leave its connection unusable,
    # and the interruption would then be reported as a database error); a second Ctrl-C
    # during the transfer raises KeyboardInterrupt at once. Signals after it (closing
    # the stores, the summary) are only noted: the command is ending anyway.
    terminated, copying = threading.Event(), threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and terminated.is_set() and copying.is_set():
            raise KeyboardInterrupt
        terminated.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)
           if signal.getsignal(s) != signal.SIG_IGN}  # started with it ignored (nohup &)
    try:
        try:
            # opening creates nothing (a dry run writes nothing, so it creates nothing)
            dest = Store.open(dst_loc, name=other_name if push else None)
            copying.set()
            try:
                rep = transfer(source, dest, selection, dry_run=args.dry_run,
                               stop=terminated.is_set, shape_of=probe_shape)
            finally:
                copying.clear()
        finally:
            source.close()
            if dest is not None:
                dest.close()
        return _transfer_outcome(rep, args, selection)
    finally:
        # once stopping, a further signal could only land in the interpreter's exit
        # (a traceback, or a kill by the signal): the command is ending, it is ignored
        for s, handler in old.items():
            signal.signal(s, signal.SIG_IGN if terminated.is_set() else handler)


def _transfer_outcome(rep: Any, args: argparse.Namespace, selection: Selection) -> int:
    """Print the summary and the errors of a transfer; its exit code."""
    if args.json:
        _print_json(rep.to_json(args.direction, selection))
    else:
        _print_transfer(rep, args.direction)
    if rep.interrupted:
        print("rtlab: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    if rep.stopped is not None:
        print(f"rtlab: error: {args.direction} stopped: {rep.stopped.one_line()}; "
              f"{len(rep.copied)} runs copied, {rep.left} left (run it again to copy them)",
              file=sys.stderr)
        return int(rep.stopped.code)
    for _, why in rep.conflicts + rep.refused:
        print(f"rtlab: error: {why}", file=sys.stderr)
    return int(ExitCode.ERROR if rep.conflicts or rep.refused else ExitCode.OK)


def _print_transfer(rep: Any, direction: str) -> None:
    verb = {"push": ("pushed", "would push"), "pull": ("pulled", "would pull")}[direction]
    done = verb[1] if rep.dry_run else verb[0]
    where = f"to {rep.dest}" if direction == "push" else f"from {rep.source}"
    line = (f"{done} {len(rep.copied)} of {rep.selected} runs {where} ({rep.files} raw "
            f"files, {_size(rep.bytes)}) in {rep.seconds:.1f} s")
    if rep.already:
        line += f"; {len(rep.already)} already there"
    if rep.conflicts or rep.refused:
        line += f"; {len(rep.conflicts)} conflicts, {len(rep.refused)} refused"
    print(line)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
