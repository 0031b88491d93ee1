# SPDX-License-Identifier: MIT
"""`rtlab history --host H`: a board's runs over kernel versions, regressions flagged."""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from rtlab.analysis.compare import (
    Change,
    PairComparison,
    compare_configs,
    tails_and_max,
    undecided_text,
)
from rtlab.analysis.configs import Config, build_configs, host_cpu_model
from rtlab.analysis.day import DAY_S, HOUR_S, BoardDay, board_day, day_bounds
from rtlab.cli.options import add_store_arg
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.probes.registry import DEFAULT_PROBE
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.terminal import make_console
from rtlab.results.store import Store
from rtlab.scenario.units import format_duration, parse_duration
from rtlab.textfmt import bounded_us, shown, us


def register(sub: Any) -> None:
    p = sub.add_parser(
        "history", help="a board's runs over kernel versions, with regressions flagged",
        description="Groups the stored runs of one host by kernel release (oldest first) and "
        "compares each kernel with the previous one on the tail percentiles (p99, p99.9, "
        "p99.99) and the maxima (through the per-window maxima, never across runs of "
        "different length). Each kernel change is REGRESSION (one of them worse beyond "
        "significance), \"cannot tell\" (one of them could not be judged, e.g. single "
        "imported runs without windows: the change is shown with why and what would decide "
        "it), \"better\" or \"no change\" (every one within ±10 % at 99 % confidence). "
        "Exit codes: 0 ok (also with regressions or undecided changes, unless asked), "
        "1 error, 2 usage, 3 the newest kernel regressed (with --fail-on-regression) or "
        "could not be judged (with --fail-on-undecided).")
    p.add_argument("--host", required=True, metavar="H", help="host name as stored")
    p.add_argument("--probe", default=DEFAULT_PROBE,
                   help=f"only runs of this probe ({DEFAULT_PROBE})")
    p.add_argument("--scenario", metavar="NAME", help="only runs of this scenario")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit with code 3 when the newest kernel regressed against the one "
                   "before it (for CI after a kernel upgrade); a newest kernel that could not "
                   "be judged exits 0 with a line saying so, unless --fail-on-undecided")
    p.add_argument("--fail-on-undecided", action="store_true",
                   help="exit with code 3 also when the newest kernel's change could not be "
                   "judged (\"cannot tell\": the gate passes only on evidence that it did not "
                   "regress); implies --fail-on-regression")
    p.add_argument("--json", action="store_true",
                   help="print a JSON document: every kernel with its runs, statistics (ns), "
                   "verdict, regressions and the changes that could not be judged")
    p.add_argument("--day", metavar="YYYY-MM-DD",
                   help="show that day (UTC) instead, OSADL-style: the maximum of every "
                   "slot over 24 hours per CPU (gaps marked), from the runs overlapping it "
                   "(e.g. `rtlab monitor`'s segments); `today` and `yesterday` work too")
    p.add_argument("--days", type=int, default=1, metavar="N",
                   help="with --day: N whole days from that day on (default 1; up to 366), "
                   "e.g. a board's week: --day 2026-03-02 --days 7 (one table row per day, "
                   "the plot over the whole period)")
    p.add_argument("--slot", default="5m", metavar="DUR",
                   help="with --day: slot length (default 5m): one that divides an hour "
                   "(e.g. 30s, 1m, 15m; the table shows one row per hour) or whole hours "
                   "that divide a day (2h, 3h, 4h, 6h, 8h, 12h, 24h; one row per slot)")
    p.add_argument("--plot", metavar="FILE.png|svg",
                   help="with --day: write the day's plot (slot maxima over 24 h and the "
                   "day's latency histogram per CPU)")
    add_store_arg(p)
    p.set_defaults(func=run)


@dataclass(frozen=True)
class KernelStep:
    """One kernel against the one before it, over the statistics history judges."""

    pair: PairComparison

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.pair.selected(tails_and_max) if c.regression]

    @property
    def undecided(self) -> list[Change]:
        return self.pair.undecided(tails_and_max)

    @property
    def verdict(self) -> str:
        """`regression`, `cannot tell`, `better` or `no change`."""
        v = self.pair.verdict(tails_and_max)
        return "regression" if v == "worse" else v

    def cell(self) -> str:
        """The table's "vs previous kernel" cell."""
        v = self.verdict
        undecided = undecided_text(self.undecided)
        if v == "regression":
            text = "REGRESSION: " + "; ".join(c.describe() for c in self.regressions)
            return text + (f"; cannot tell: {undecided}" if undecided else "")
        if v == "cannot tell":
            return f"cannot tell: {undecided}"
        return self.pair.summary(tails_and_max)


def _steps(configs: list[Config]) -> dict[str, KernelStep]:
    return {cur.label: KernelStep(compare_configs([prev, cur])[0])
            for prev, cur in itertools.pairwise(configs)}


def _gate(args: argparse.Namespace, configs: list[Config], steps: dict[str, KernelStep]
          ) -> tuple[bool, bool, bool]:
    """(newest regressed, newest undecided, fail): the gate on the newest kernel."""
    newest = steps.get(configs[-1].label) if len(configs) > 1 else None
    regressed = newest is not None and newest.verdict == "regression"
    undecided = newest is not None and newest.verdict == "cannot tell"
    fail = ((args.fail_on_regression or args.fail_on_undecided) and regressed) or (
        args.fail_on_undecided and undecided)
    return regressed, undecided, fail


def run(args: argparse.Namespace) -> int:
    if args.day is not None:
        return run_day(args)
    if args.plot is not None:
        raise UsageError("--plot needs --day", hint="e.g. --day yesterday --plot day.png")
    if args.days != 1:
        raise UsageError("--days needs --day", hint="e.g. --day 2026-03-02 --days 7")
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
    configs = build_configs(results, "kernel", shape_of=probe_shape)
    steps = _steps(configs)
    regressed, undecided, fail = _gate(args, configs, steps)
    if args.json:
        _print_json(args, rows, configs, steps, (regressed, undecided, fail))
        return int(ExitCode.THRESHOLD) if fail else 0
    console = make_console()
    cpu = host_cpu_model(results)
    table = Table(title=f"host {args.host}{f' ({cpu})' if cpu else ''}: {args.probe} runs by "
                  "kernel (oldest first), latency in µs", title_justify="left")
    for name in ("kernel", "runs", "first run", "samples", "p99", "p99.9", "p99.99", "max",
                 "vs previous kernel"):
        table.add_column(name, justify="left" if name in ("kernel", "first run",
                                                          "vs previous kernel") else "right")
    for i, c in enumerate(configs):
        first = min(rw.created for rw in rows if rw.id in c.run_ids)
        table.add_row(c.label, str(len(c.runs)), first.strftime("%Y-%m-%d %H:%M"),
                      f"{c.channel.samples:,}",
                      *(bounded_us(c.value(q), c.lower_bound(q)) for q in (99.0, 99.9, 99.99)),
                      us(c.value("max")), "baseline" if i == 0 else steps[c.label].cell())
    console.print(table)
    for line in _closing(configs, steps):
        console.print(line, highlight=False, markup=False)
    newest, before = configs[-1].label, configs[-2].label if len(configs) > 1 else ""
    if regressed:
        console.print(f"the newest kernel {newest} regressed", highlight=False)
    elif undecided:
        console.print(f"the newest kernel {newest} could not be judged against {before}: it is "
                      "not shown to be free of regressions"
                      + ("" if args.fail_on_undecided else
                         " (--fail-on-undecided makes this exit 3)"),
                      highlight=False, markup=False)
    return int(ExitCode.THRESHOLD) if fail else 0


def _closing(configs: list[Config], steps: dict[str, KernelStep]) -> list[str]:
    """The lines under the table: regressions, changes that could not be judged, or that
    every change was judged and none regressed."""
    if len(configs) < 2:
        return ["one kernel: nothing to compare"]
    regressed = [k for k, s in steps.items() if s.verdict == "regression"]
    undecided = [(k, s) for k, s in steps.items() if s.undecided]
    out = []
    if regressed:
        out.append(f"{len(regressed)} kernel change(s) with a significant regression: "
                   + ", ".join(regressed))
    if undecided:
        n = len(undecided)
        out.append(f"{n} kernel change{'s' if n > 1 else ''} could not be judged ("
                   + "; ".join(f"{k}: {undecided_text(s.undecided)}" for k, s in undecided)
                   + ")")
    if not out:
        out.append("no regression between consecutive kernels: every change of p99, p99.9, "
                   "p99.99 and the maxima was judged (no change or better)")
    return out


def _print_json(args: argparse.Namespace, rows: list[Any], configs: list[Config],
                steps: dict[str, KernelStep], gate: tuple[bool, bool, bool]) -> None:
    import json
    import sys

    regressed, undecided, fail = gate
    kernels = []
    for i, c in enumerate(configs):
        first = min(rw.created for rw in rows if rw.id in c.run_ids)
        step = None if i == 0 else steps[c.label]
        kernels.append({
            "kernel": c.label, "runs": list(c.run_ids), "first_run": first.isoformat(),
            "cpu_model": host_cpu_model(c.runs),
            "samples": c.channel.samples,
            "percentiles_ns": {f"p{q:g}": c.value(q) for q in (99.0, 99.9, 99.99)},
            "lower_bounds_ns": {f"p{q:g}": c.lower_bound(q) for q in (99.0, 99.9, 99.99)},
            "max_ns": c.value("max"),
            "baseline": i == 0,
            "verdict": "baseline" if step is None else step.verdict,
            "summary": None if step is None else step.cell(),
            "regressions": [] if step is None else [ch.describe() for ch in step.regressions],
            "undecided": [] if step is None else [ch.to_dict() for ch in step.undecided],
            "changes": [] if step is None else [ch.to_dict()
                                                for ch in step.pair.selected(tails_and_max)],
        })
    json.dump({"schema": 1, "host": args.host,
               "cpu_model": host_cpu_model(r for c in configs for r in c.runs),
               "probe": args.probe,
               "scenario": args.scenario, "kernels": kernels,
               "summary": _closing(configs, steps),
               "newest_regressed": regressed, "newest_undecided": undecided,
               "fail_on_regression": bool(args.fail_on_regression or args.fail_on_undecided),
               "fail_on_undecided": bool(args.fail_on_undecided), "failed": fail},
              sys.stdout, indent=1)
    sys.stdout.write("\n")


def _parse_day(text: str) -> date:
    today = datetime.now(UTC).date()
    if text == "today":
        return today
    if text == "yesterday":
        return today - timedelta(days=1)
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--day {text!r} is not a date",
                         hint="use YYYY-MM-DD (UTC), today or yesterday") from None


def _parse_slot(text: str) -> int:
    """--slot in whole seconds: one that divides an hour (the table's rows are hours) or
    whole hours that divide a day (the rows are the slots), else a UsageError."""
    ns = parse_duration(text, "--slot")
    if ns % 1_000_000_000:
        raise UsageError(f"--slot {text} is not a whole number of seconds",
                         hint="e.g. 30s, 1m, 5m, 15m, 1h, 2h")
    slot_s = ns // 1_000_000_000
    if HOUR_S % slot_s and (slot_s % HOUR_S or DAY_S % slot_s):
        raise UsageError(f"--slot {text} neither divides an hour nor is whole hours that "
                         "divide a day", hint="e.g. 30s, 1m, 5m, 15m, 1h, 2h, 6h")
    return slot_s


MAX_DAYS = 366


def _parse_days(days: int) -> int:
    if not 1 <= days <= MAX_DAYS:
        raise UsageError(f"--days {days}: expected a whole number of days from 1 to "
                         f"{MAX_DAYS}", hint="e.g. --days 7 for a week")
    return days


def run_day(args: argparse.Namespace) -> int:
    day = _parse_day(args.day)
    days = _parse_days(args.days)
    slot_s = _parse_slot(args.slot)
    if args.plot is not None and Path(args.plot).suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"--plot {shown(args.plot)}: the file name must end in .png or .svg")
    if args.plot is not None:
        from rtlab.fileio import check_output

        check_output(args.plot, "--plot")  # before the store is read
    t0, t1 = day_bounds(day, days)
    store = Store.open(args.store, create=False)
    try:
        # the host's runs of the probe, selected in the store, and of them only those
        # whose span may overlap the day are read (board_day decides exactly)
        rows = [r for r in store.select(hosts=[args.host], probes=[args.probe],
                                        **_start_bounds(store, args, t0, t1))
                if (args.scenario is None or r.scenario == args.scenario)
                and _may_overlap(r.created.timestamp(), r.duration_ns, t0, t1)]
        results = [store.get(r.id) for r in rows]
    finally:
        store.close()
    bd = board_day(args.host, day, results, slot_s, shape_of=probe_shape, days=days)
    if not bd.runs:
        raise UsageError(f"no stored {args.probe} runs of host {args.host!r} on "
                         f"{bd.period()}", hint="see `rtlab results list`")
    if args.plot is not None:
        from rtlab.report.plots import day_figure, save_figure

        save_figure(day_figure(bd), args.plot, "--plot")
    cpu = host_cpu_model(results)
    if args.json:
        _print_day_json(bd, cpu)
        return 0
    _print_day(bd, args.plot, cpu)
    return 0


# the engine starts measuring after the run was created (loads settling, the start
# lead), and a board's clock may differ a little from the controller's
_SPAN_SLACK_S = 3600


def _start_bounds(store: Store, args: argparse.Namespace, t0: float, t1: float
                  ) -> dict[str, datetime]:
    """Bounds on the start of the runs that may overlap [t0, t1), for the store's index
    (a lab's store holds a year of every board's segments): none started after the day
    (with slack), none before the day minus the longest run of the host's (unless a
    run's duration is unknown)."""
    bounds = {"until": datetime.fromtimestamp(t1 + _SPAN_SLACK_S, UTC)}
    which = {"hosts": [args.host], "probes": [args.probe]}
    longest = store.longest_ns(**which)
    if longest is not None and not store.unknown_durations(**which):
        bounds["since"] = datetime.fromtimestamp(t0 - _SPAN_SLACK_S - longest / 1e9 - 1, UTC)
    return bounds


def _may_overlap(created: float, duration_ns: int | None, t0: float, t1: float) -> bool:
    """Whether a run created at `created` (unix s), measuring `duration_ns` (all phases;
    None: unknown, as for an invalid run), may overlap [t0, t1): its span, whatever its
    length (a monitor's segment may be 1000 h long), not only runs started the day
    before."""
    if created >= t1 + _SPAN_SLACK_S:
        return False
    return duration_ns is None or created + duration_ns / 1e9 >= t0 - _SPAN_SLACK_S


def _print_day(bd: BoardDay, plot: str | None, cpu: str | None) -> None:
    from rich.table import Table

    console = make_console()
    # a row per hour (slots that divide an hour), else per slot (whole hours); a row per
    # day for a period of several days
    row_s = DAY_S if bd.days > 1 else max(HOUR_S, bd.slot_s)
    per_row = row_s // bd.slot_s
    label = "%H:%M"
    if bd.days > 1:
        per, first, label = "day", "day", "%Y-%m-%d"
    elif row_s == HOUR_S:
        per, first = "hour", "hour"
    else:
        per = format_duration(row_s * 1_000_000_000)
        per, first = f"{per} slot", "slot from"
    table = Table(title=f"host {bd.host}{f' ({cpu})' if cpu else ''} on {bd.period()} "
                  "(UTC): maximum latency per "
                  f"{per} in µs ({len(bd.runs)} runs; '-' not measured, '*' partly)",
                  title_justify="left")
    table.add_column(first, justify="left")
    for cd in bd.cpus:
        table.add_column(cd.channel, justify="right")
    for r in range(bd.days * DAY_S // row_s):
        cells = []
        for cd in bd.cpus:
            part = cd.slot_max[r * per_row:(r + 1) * per_row]
            covered = part[part >= 0]
            if not len(covered):
                cells.append("-")
                continue
            mark = "*" if len(covered) < len(part) else ""
            cells.append(us(int(covered.max())) + mark)
        table.add_row(bd.slot_start(r * per_row).strftime(label), *cells)
    console.print(table)
    clock = "%H:%M" if bd.slot_s % 60 == 0 else "%H:%M:%S"
    if bd.days > 1:
        clock = f"%Y-%m-%d {clock}"
    what = "day" if bd.days == 1 else f"{bd.days}-day"
    for cd in bd.cpus:
        m = cd.max_ns
        where = ""
        if m is not None:
            k = int(cd.slot_max.argmax())
            where = f" in the slot from {bd.slot_start(k).strftime(clock)}"
        console.print(f"{cd.channel}: {what} max {us(m)} µs{where}; {cd.hist.total:,} samples, "
                      f"{cd.missed:,} missed; measured in {cd.covered_slots()} of {bd.slots} "
                      f"slots", highlight=False)
    for run_id, names in bd.phases_not_shown.items():
        console.print(f"not shown: run {run_id}'s phase{'s' if len(names) > 1 else ''} "
                      f"{', '.join(names)} (only a run's first phase has its start on the "
                      "wall clock stored)", highlight=False)
    if plot:
        console.print(f"plot: {plot}", highlight=False)


def _print_day_json(bd: BoardDay, cpu: str | None) -> None:
    import json
    import sys

    json.dump({"schema": 1, "host": bd.host, "cpu_model": cpu, "day": bd.day.isoformat(),
               "days": bd.days, "last_day": bd.last_day.isoformat(),
               "slot_s": bd.slot_s, "runs": bd.runs,
               "phases_not_shown": bd.phases_not_shown,
               "cpus": [{"channel": cd.channel, "max_ns": cd.max_ns,
                         "samples": cd.hist.total, "missed": cd.missed,
                         "slots_covered": cd.covered_slots(),
                         "slot_max_ns": [int(v) if v >= 0 else None for v in cd.slot_max],
                         "slot_samples": [int(v) for v in cd.slot_samples]}
                        for cd in bd.cpus]},
              sys.stdout, indent=1)
    sys.stdout.write("\n")
