# SPDX-License-Identifier: MIT
"""`rtlab spikes RUN`: the cause of each spike of a traced run (`rtlab run --trace`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rtlab.cli.options import add_limit_arg, add_store_arg, check_limit
from rtlab.errors import RtlabError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.report.kernel_split import HEAD, culprit_line, split_rows
from rtlab.report.kernel_split import lines as ks_lines
from rtlab.report.kernel_split import notes as ks_notes
from rtlab.report.spikes import class_counts, spike_row, summary_line
from rtlab.report.terminal import make_console
from rtlab.results.store import Store
from rtlab.runner.kernel_split import phase_split
from rtlab.runner.tracing import attribute, attribute_gaps, attribute_windows
from rtlab.scenario import parse_duration
from rtlab.trace.capture import TraceCapture

DEFAULT_LIMIT = 20  # rows per phase in the terminal table


def register(sub: Any) -> None:
    p = sub.add_parser(
        "spikes",
        help="list the explained spikes of a run recorded with --trace",
        description="List the spike cause records of a stored run recorded with "
        "`rtlab run --trace`: time into the phase (s), CPU, latency, dominant cause class "
        "and a one-line summary, with the counts by cause class. --trace-threshold "
        "attributes again from the trace capture and samples saved beside the run. --json "
        "lists every stored record unless --limit is given, and says how many it shows of "
        "how many (shown, of, limit; spike_summary: spikes found, attributed, stored). A run "
        "recorded with --kernel-split also shows the kernel's own split: per CPU its IRQ and "
        "thread latency, the culprit counts and the worst activations split into IRQ and "
        "thread parts (--json: kernel_split per phase). Exit "
        "codes: 0 ok, 1 the run was not traced or its capture is gone, 2 usage (unknown run "
        "or phase).",
    )
    p.add_argument("run", metavar="RUN", help="run id, unique id prefix, or `last`")
    p.add_argument("--phase", metavar="NAME", help="only this phase (default: all traced)")
    add_limit_arg(p, "show the N worst spikes of each phase, in time order (0: all stored; "
                  "default 20, with --json all)")
    p.add_argument("--trace-threshold", "--threshold", dest="threshold", metavar="DUR",
                   help="attribute again from the saved capture with this trace threshold, "
                   "e.g. 50us (as `rtlab run --trace-threshold`; --threshold is the old "
                   "spelling)")
    p.add_argument("--json", action="store_true",
                   help="JSON: per phase its spike_summary and spikes (cause records), every "
                   "one unless --limit is given (then stated: shown, of, limit)")
    add_store_arg(p)
    p.set_defaults(func=run)


def _phases(args: argparse.Namespace, store: Any) -> tuple[str, list[dict[str, Any]]]:

    threshold = (parse_duration(args.threshold, "--trace-threshold") if args.threshold
                 else None)
    if args.limit is None:
        args.limit = 0 if args.json else DEFAULT_LIMIT  # machine output is never cut silently
    check_limit(args.limit)
    result = store.get(args.run)
    phases = list(result.phases)
    if args.phase is not None:
        phases = [p for p in phases if p.name == args.phase]
        if not phases:
            known = ", ".join(p.name for p in result.phases)
            raise UsageError(f"--phase {args.phase}: no such phase in run {result.run_id}; "
                             f"allowed: {known}")
    traced = [p for p in phases if p.trace is not None]
    if not traced:
        raise RtlabError(f"run {result.run_id} was not recorded with tracing: no spike causes",
                         hint="run it with `rtlab run --trace`")
    out = []
    for p in traced:
        spikes, summary = p.spikes or [], dict(p.spike_summary or {})
        if threshold is not None:
            spikes, summary = _again(store.runs_dir, p, threshold)
        shown = _worst(spikes, args.limit)
        out.append({"phase": p.name, "spike_summary": summary, "trace": p.trace,
                    "spikes": shown, "shown": len(shown), "of": len(spikes),
                    "kernel_split": _kernel_split(store.runs_dir, p, threshold)})
    return result.run_id, out


def _again(runs_dir: Any, phase: Any, threshold_ns: int
           ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import json


    info = phase.trace
    cap_dir = runs_dir / str(info.get("capture", ""))
    # samples of a sleeping probe, the gap list of a polling one (noise), or the windows a
    # flight recorder kept (`rtlab monitor --trace`), inside its capture
    data = (cap_dir / str(info["windows"]) if info.get("windows")
            else runs_dir / str(info.get("samples") or info.get("gaps") or ""))
    if not info.get("capture") or not cap_dir.is_dir() or not data.is_file():
        raise RtlabError(f"phase {phase.name}: the saved trace capture or samples file is "
                         f"missing in {runs_dir}", hint="without --trace-threshold the stored "
                         "records are shown")
    try:
        cap = TraceCapture.load(cap_dir)
        if info.get("windows"):
            from rtlab.trace.capture import flight_windows

            return attribute_windows(cap, flight_windows(cap_dir), info, threshold_ns,
                                     phase.name)
    except (OSError, ValueError) as exc:
        raise RtlabError(f"phase {phase.name}: the saved trace capture {cap_dir.name} cannot "
                         f"be read: {exc}") from None
    if info.get("gaps") and not info.get("samples"):
        gaps = [tuple(int(x) for x in g) for g in json.loads(data.read_text())]
        return attribute_gaps(cap, gaps, info, threshold_ns, phase.name)
    return attribute(cap, data, info, threshold_ns, phase.name)


def _kernel_split(runs_dir: Any, phase: Any, threshold_ns: int | None
                  ) -> dict[str, Any] | None:
    """The phase's kernel split (`--kernel-split`): as stored, or analysed again from the
    saved capture with another threshold."""
    stored = (phase.trace or {}).get("kernel_split")
    if stored is None or threshold_ns is None:
        return stored
    cap = TraceCapture.load(runs_dir / str(phase.trace.get("capture", "")))
    return phase_split(cap, threshold_ns, phase.trace.get("start_monotonic_ns"))


def _worst(spikes: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    if limit == 0 or len(spikes) <= limit:
        return spikes
    keep = sorted(spikes, key=lambda s: -int(s.get("latency_ns") or 0))[:limit]
    return sorted(keep, key=lambda s: int(s.get("at_ns") or 0))


def run(args: argparse.Namespace) -> int:

    store = Store.open(args.store, create=False)
    try:
        run_id, phases = _phases(args, store)
    finally:
        store.close()
    if args.json:
        json.dump({"run_id": run_id, "limit": args.limit or None, "phases": phases},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        return int(ExitCode.OK)
    from rich.table import Table

    console = make_console()
    for ph in phases:
        summary = ph["spike_summary"]
        console.print(summary_line(summary, ph["trace"], f"run {run_id} phase {ph['phase']}: "),
                      highlight=False, markup=False)
        console.print(f"dominant cause by class: {class_counts(summary)}", highlight=False,
                      markup=False)
        if not ph["spikes"]:
            _show_kernel_split(console, ph["kernel_split"], args.limit)
            continue
        shown = len(ph["spikes"])
        table = Table(title=f"{shown} worst of {summary.get('spikes', shown)} spikes, "
                      "in time order", title_justify="left")
        for name in ("at s", "CPU", "latency", "class", "cause"):
            table.add_column(name, justify="right" if name in ("at s", "CPU", "latency")
                             else "left", overflow="fold")
        for s in ph["spikes"]:
            table.add_row(*spike_row(s))
        console.print(table)
        _show_kernel_split(console, ph["kernel_split"], args.limit)
    return int(ExitCode.OK)


def _show_kernel_split(console: Any, split: dict[str, Any] | None, limit: int) -> None:
    """The kernel's own split of a phase: per CPU its line and culprit counts, then the
    worst activations split into IRQ and thread parts."""
    from rich.table import Table

    if not split:
        return
    for line in ks_lines(split):
        console.print(line, highlight=False, markup=False)
    thr = split.get("threshold_ns")
    for cpu, d in sorted((split.get("cpus") or {}).items()):
        console.print(f"{HEAD} {culprit_line(cpu, d, thr)}", highlight=False, markup=False)
    rows = split_rows(split, limit)
    if rows:
        table = Table(title=f"{HEAD}: {len(rows)} worst activations, in time order",
                      title_justify="left")
        for name in ("at s", "CPU", "latency", "culprit", "split"):
            table.add_column(name, justify="right" if name in ("at s", "CPU", "latency")
                             else "left", overflow="fold")
        for r in rows:
            table.add_row(*r)
        console.print(table)
    for note in ks_notes(split):
        console.print(note, highlight=False, markup=False)
