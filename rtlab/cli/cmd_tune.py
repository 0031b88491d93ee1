# SPDX-License-Identifier: MIT
"""`rtlab tune [SCENARIO] [--target B] [--slo EXPR] [--budget DUR] [--knobs LIST] ...`:
find, by measurement, the configuration that lowers a target's latency, and show what
each change bought (docs/tune.md). Policy lives in rtlab.tune; this module parses,
shows and maps to exit codes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rtlab.cli.options import SLO_HELP, add_json_arg, add_store_arg, add_target_args
from rtlab.errors import SkippedError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.report.terminal import make_console

EPILOG = ("exit codes: 0 done (the ledger says what helped; the system is as before), "
          "1 error, 2 usage (also a budget too short for any verdict), 3 --slo not met by "
          "the confirmed configuration, 4 skipped (not root, or the target lacks what the "
          "tune needs), 130 interrupted (the state is kept: resume with --resume ID)")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "tune", help="find the configuration that lowers the latency, by measurement",
        description="Screen configuration knobs (shield, IRQ affinity, RT throttling, idle "
        "states, frequency, SMT, timers, watchdogs, ...; boot parameters with --reboot-cmd) "
        "against the baseline in interleaved blocks of the workload, decide with calibrated "
        "comparisons, combine what helps, confirm it, and print the latency ledger. The "
        "system is left exactly as before.", epilog=EPILOG)
    p.add_argument("scenario", nargs="?", metavar="SCENARIO",
                   help="the workload: a built-in scenario or FILE.toml (default: tune, the "
                   "timer on the last CPU under the seed load)")
    add_target_args(p)
    p.add_argument("--slo", metavar="EXPR", help="decide on the statistics this SLO names "
                   "and say whether the confirmed configuration meets it; " + SLO_HELP)
    p.add_argument("--budget", metavar="DUR", help="the most time the tune may measure "
                   "(default 1h), e.g. 30m, 2h")
    p.add_argument("--knobs", metavar="NAMES", help="the candidate knobs, comma-separated "
                   "(default: every default runtime knob, and the boot knobs with "
                   "--reboot-cmd); see --list-knobs")
    p.add_argument("--stats", metavar="NAMES", help="statistics that decide (lower is "
                   "better): median, mean, p99, p99.9, p99.99, max (the median of the window "
                   "maxima); default p99.99,max, or the SLO's")
    p.add_argument("--block", metavar="DUR", help="length of one block (one run of the "
                   "scenario; default 10s)")
    p.add_argument("--pairs", type=int, default=3, metavar="N",
                   help="blocks per side at the first look (default 3)")
    p.add_argument("--confirm-pairs", type=int, default=None, metavar="N",
                   help="blocks per side of the final confirmation (default 2 x --pairs)")
    p.add_argument("--reboot-cmd", metavar="CMD", help="boots the board once with another "
                   "kernel command line (docs/tune.md, 'Boot knobs')")
    p.add_argument("--reboot-timeout", metavar="DUR", help="how long a reboot may take "
                   "(default 10m)")
    add_store_arg(p)
    p.add_argument("--dir", metavar="DIR", help="where tunes keep their state (default "
                   "$XDG_STATE_HOME/rtlab/tunes)")
    p.add_argument("--export", metavar="DIR", help="write the files to deploy the result: "
                   "kernel command line, tuned profile, rtlab scenario, sysctl snippet")
    p.add_argument("--html", metavar="FILE", help="write the ledger as an HTML report")
    p.add_argument("--keep", action="store_true", help="keep the recommended runtime "
                   "configuration applied after the tune (as `rtlab shield --scenario`; "
                   "`rtlab shield --reset` undoes it); without it the system is left as before")
    p.add_argument("--plan", action="store_true", help="print the plan and its estimated "
                   "time, change nothing")
    p.add_argument("--resume", metavar="ID", help="continue an interrupted tune")
    p.add_argument("--show", metavar="ID", help="print the ledger of a tune")
    p.add_argument("--list", action="store_true", help="list the tunes kept")
    p.add_argument("--list-knobs", action="store_true", help="print the knob catalogue")
    add_json_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rtlab.tune import state as tstate

    base = _base_dir(args)
    if args.list_knobs:
        return _list_knobs(args)
    if args.list:
        return _list(args, base)
    if args.show:
        return _show(args, tstate.load(tstate.find(args.show, base, "--show")))
    if args.resume:
        return _resume(args, base)
    return _new(args, base)


def _request(args: argparse.Namespace) -> Any:
    from rtlab.tune.driver import TuneRequest

    return TuneRequest(target=args.target, scenario=args.scenario, slo=args.slo,
                       budget=args.budget, knobs=args.knobs, stats=args.stats,
                       block=args.block, pairs=args.pairs,
                       confirm_pairs=args.confirm_pairs, reboot_cmd=args.reboot_cmd,
                       reboot_timeout=args.reboot_timeout, store=args.store,
                       engine_dir=args.engine_dir, directory=args.dir,
                       command_line=tuple(sys.argv))


def _new(args: argparse.Namespace, base: Path | None) -> int:
    from rtlab.engine.board import open_target
    from rtlab.tune.driver import plan_lines, plan_tune, tune_dir

    req = _request(args)
    if args.target in (None, "local") and not args.plan:
        import os

        if os.geteuid() != 0:
            raise SkippedError("rtlab tune changes the system (shield, IRQs, sysctls) "
                               "between blocks: it needs root", hint="run it as root")
    _check_outputs(args)
    with open_target(req.target, req.engine_dir) as transport:
        state = plan_tune(req, transport)
        console = make_console()
        for line in plan_lines(state):
            console.print(line, highlight=False, markup=False)
        if args.plan:
            return 0
        directory = tune_dir(state, args.dir)
        return _measure(args, state, directory, transport)


def _resume(args: argparse.Namespace, base: Path | None) -> int:
    from rtlab.engine.board import open_target
    from rtlab.tune import state as tstate

    directory = tstate.find(args.resume, base, "--resume")
    state = tstate.load(directory)
    if state.get("stage") == "done":
        return _show(args, state)
    _check_outputs(args)
    make_console().print(f"resuming {state['id']} at {state['stage']} "
                         f"({sum(len(e['blocks']) for e in state['experiments'])} blocks "
                         "measured)", highlight=False, markup=False)
    with open_target(state["target"], state.get("engine_dir")) as transport:
        return _measure(args, state, directory, transport)


def _base_dir(args: argparse.Namespace) -> Path | None:
    from rtlab.fileio import check_directory

    return check_directory(args.dir, "--dir") if args.dir is not None else None


def _check_outputs(args: argparse.Namespace) -> None:
    """What the tune will write, checked before anything is measured (nothing created)."""
    from rtlab.fileio import check_directory, check_output
    from rtlab.results.store.opening import check_store

    if args.html is not None:
        check_output(args.html, "--html")
    if args.export is not None:
        check_directory(args.export, "--export")
    reason = check_store(args.store)
    if reason is not None:
        raise UsageError(f"--store: {reason}")


def _measure(args: argparse.Namespace, state: dict[str, Any], directory: Path,
             transport: Any) -> int:
    from rtlab.tune.driver import run_tune
    from rtlab.tune.search import Interrupted, Progress

    console = make_console()

    def event(text: str) -> None:
        console.print(f"  {text}", highlight=False, markup=False)

    last = [""]

    def progress(p: Progress) -> None:
        eta = "" if p.eta_s is None else f", about {p.eta_s / 60:.0f} min left at first looks"
        line = f"[{p.stage}] {p.text}; {p.spent_s / 60:.1f} min measured{eta}"
        if line != last[0]:
            last[0] = line
            console.print(line, highlight=False, markup=False)

    import signal

    from rtlab.tune.bench import STOP

    def stop(_signo: int, _frame: Any) -> None:
        STOP.set()  # seen by the bench even where the interrupt below is caught
        raise KeyboardInterrupt

    # outside a block's measurement (which handles them itself): Ctrl-C and SIGTERM stop
    # the tune the same way, its state kept and the system as before
    STOP.clear()
    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        run_tune(state, directory, transport, on_progress=progress, on_event=event)
    except (Interrupted, KeyboardInterrupt):
        console.print(f"interrupted: the tune's state is kept in {directory}; the system is "
                      f"as before; resume with `rtlab tune --resume {state['id']}`",
                      highlight=False, markup=False)
        return int(ExitCode.INTERRUPTED)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if args.keep:
        from rtlab.tune import state as tstate
        from rtlab.tune.driver import keep

        state["kept"] = keep(state, transport)
        tstate.save(directory, state)
        for note in state["kept"]["notes"]:
            event(note)
        if state["kept"]["applied"]:
            event(f"kept {'+'.join(state['kept']['knobs'])} applied; undo with "
                  f"`{state['kept']['undo']}`")
    return _show(args, state)


def _show(args: argparse.Namespace, state: dict[str, Any]) -> int:
    from rtlab.tune import ledger as tledger
    from rtlab.tune.driver import slo_outcome

    led = tledger.build(state)
    slo = slo_outcome(state) if state.get("stage") == "done" else None
    led["slo_result"] = None if slo is None else {
        k: v for k, v in slo.items() if k != "outcomes"}
    if args.export:
        from rtlab.tune.export import write_exports

        write_exports(led, state, state.get("scenario_text"), state.get("reboot", {}) and
                      state["reboot"].get("original"), Path(args.export))
    if args.html:
        from rtlab.fileio import write_output
        from rtlab.report.html_tune import render_tune_html

        write_output(args.html, render_tune_html(led), "--html")
    if args.json:
        print(json.dumps(led, indent=1))
    else:
        console = make_console()
        for line in tledger.text(led):
            console.print(line, highlight=False, markup=False)
        if slo is not None:
            console.print(f"{slo['configuration']} configuration, {slo.get('blocks', 0)} "
                          f"block(s): {slo['summary']}", highlight=False, markup=False)
    if slo is not None and not slo["passed"]:
        return int(ExitCode.THRESHOLD)
    return int(ExitCode.OK)


def _list(args: argparse.Namespace, base: Path | None) -> int:
    from rtlab.tune import state as tstate

    tunes = tstate.listing(base)
    if args.json:
        print(json.dumps([{"id": t["id"], "target": t["target"], "scenario": t["scenario"],
                           "stage": t["stage"], "final": t.get("final")} for t in tunes]))
        return 0
    console = make_console()
    if not tunes:
        console.print("no tunes kept here", highlight=False)
    for t in tunes:
        console.print(f"{t['id']}  {t['target'] or 'local'}  {t['scenario']}  {t['stage']}"
                      + (f"  -> {'+'.join(t['final']) or 'baseline'}" if t.get("final")
                         is not None else ""), highlight=False, markup=False)
    return 0


def _list_knobs(args: argparse.Namespace) -> int:
    from rtlab.tune.knobs import CATALOGUE

    if args.json:
        print(json.dumps([k.to_dict() for k in CATALOGUE], indent=1))
        return 0
    console = make_console()
    for k in CATALOGUE:
        what = ", ".join(f"{a} = {b!r}" for a, b in k.shield.items()) if k.kind == "runtime" \
            else " ".join(a if b is None else f"{a}={b}" for a, b in k.boot.items())
        console.print(f"{k.name:<22} {k.kind:<8} {k.title}{'' if k.default else ' (not default)'}"
                      f"\n{'':<31} {what}" + (f"\n{'':<31} cost: {k.cost}" if k.cost else ""),
                      highlight=False, markup=False)
    return 0


__all__ = ["UsageError", "register", "run"]
