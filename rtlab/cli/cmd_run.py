# SPDX-License-Identifier: MIT
"""`rtlab run`: run a scenario (built-in or FILE.toml), show and store each result."""

from __future__ import annotations

import argparse
from typing import Any

from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.cli.options import add_store_arg, add_target_args
from rtlab.cli.run_display import BoardsProgress, LiveProgress, show_boards, show_stored
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.fileio import STDOUT, check_output, write_outputs
from rtlab.probes.registry import names as probe_names
from rtlab.probes.registry import shape as probe_shape
from rtlab.probes.registry import two_ended_names
from rtlab.report.html import own_report_path, render_html
from rtlab.report.junit import junit_xml
from rtlab.report.terminal import make_console
from rtlab.runner.job import RunJob, Watch, job_targets, run_job
from rtlab.runner.peers import ReflectorRequest
from rtlab.runner.prepare import RunRequest
from rtlab.textfmt import shown


def register(sub: Any) -> None:
    ends = " or ".join(two_ended_names())  # the probes measured between two ends
    p = sub.add_parser(
        "run",
        help="run a scenario (default: quick, about a minute: idle, then under load)",
        description="Run a scenario: a built-in NAME (see `rtlab scenarios list`) or a "
        "FILE.toml (docs/scenarios.md); default `quick`: the timer probe on every online CPU, "
        "25 s idle then 25 s under a stress-ng CPU+memory load on the other CPUs. Each phase "
        "is shown and stored with its own per-CPU statistics; each matrix variant is a "
        "separate stored run in one comparison. Durations take a unit: ns, us, ms, s, m, h "
        "(e.g. 500us, 10s). Exit codes: 0 ok, 1 error (or a load died early), 2 usage, "
        "3 threshold exceeded, 4 skipped (no real-time privileges, tool or system layer "
        "missing), 130 interrupted (the partial result is stored).",
    )
    p.add_argument("scenario", nargs="?", default=None, metavar="SCENARIO",
                   help="built-in scenario name or FILE.toml (default: quick)")
    p.add_argument("--probe", metavar="NAME",
                   help="run one engine probe directly instead of a scenario (`rtlab-probe "
                   f"list`: {', '.join(probe_names())})")
    p.add_argument("--probe-opt", metavar="KEY=VALUE", action="append", default=[],
                   help="an option of the --probe (`rtlab-probe NAME --help`), e.g. "
                   "mechanism=pipe or window=100ms (repeatable)")
    p.add_argument("--peer", metavar="ADDR:PORT",
                   help=f"{ends}: ping a reflector the user started on another machine (with "
                   "--probe-opt session=TOKEN) instead of two local network namespaces")
    p.add_argument("--reflector", metavar="TARGET",
                   help=f"{ends}: start the reflector on this board over SSH (bound to --peer "
                   "ADDR:PORT, its address on the link to the pinging board) and ping it from "
                   "--target (or this machine): the packets cross the link between the two "
                   "boards (docs/boards.md)")
    p.add_argument("--reflector-cpu", type=int, metavar="N",
                   help=f"{ends} with --reflector: pin the reflector to this CPU of its board")
    p.add_argument("--reflector-thread-priority", metavar="PATTERN=POLICY:PRIO",
                   action="append", default=[],
                   help=f"{ends} with --reflector: give the reflector board's threads whose name "
                   "matches PATTERN this policy and priority for the run (journaled there), "
                   "e.g. the seed's NIC IRQ thread 'irq/[0-9]+-eth1=fifo:99'; repeatable")
    p.add_argument("--reflector-irq", metavar="PATTERN=CPUS", action="append", default=[],
                   help=f"{ends} with --reflector: move the reflector board's IRQs whose name "
                   "matches PATTERN (e.g. its NIC's, 'eth1') to CPUS for the run (journaled "
                   "there), e.g. 'eth1=0'; repeatable")
    p.add_argument("--duration", metavar="DUR",
                   help="total measuring time of the run: the phases are scaled to add up to "
                   "DUR, keeping their proportions (default: the scenario's durations); with "
                   "--probe the probe's own --duration, the whole run for every probe (default "
                   "10s)")
    p.add_argument("--variant", metavar="NAME", action="append",
                   help="run only this matrix variant (repeatable; default: all)")
    p.add_argument("--cpus", metavar="LIST",
                   help="CPUs of the measured probe, e.g. 0,2-3 (default: the scenario's); "
                   "one CPU for the single-thread probes "
                   f"({', '.join(probe_names(single_cpu=True))})")
    p.add_argument("--interval", metavar="DUR",
                   help="wake-up period of the measured probe (default: the scenario's)")
    p.add_argument("--priority", type=int, metavar="N",
                   help="priority of the measured probe (1-99 for fifo/rr, 0 for other)")
    p.add_argument("--policy", choices=("fifo", "rr", "other"),
                   help="scheduling policy of the measured probe (default: the scenario's)")
    add_store_arg(p)
    p.add_argument("--allow-non-rt", action="store_true",
                   help="measure even without real-time scheduling / locked memory "
                   "(result marked NOT real-time valid)")
    p.add_argument("--samples", metavar="FILE",
                   help="also write every sample to FILE (binary; FILE.PHASE with several "
                   "phases)")
    p.add_argument("--stop-threshold", "--threshold", dest="threshold", metavar="DUR",
                   help="stop with exit code 3 as soon as one latency exceeds DUR (timer, "
                   "noise; --threshold is the old spelling); not --trace-threshold, which "
                   "only picks the samples a trace explains")
    p.add_argument("--no-shield", action="store_true",
                   help="run without the scenario's CPU shield (recorded in the result)")
    p.add_argument("--restore-first", action="store_true",
                   help="if a previous run left a stale journal, restore it before starting "
                   "(default: refuse and ask for `rtlab restore`)")
    p.add_argument("--trace", action="store_true",
                   help="record scheduler/IRQ/timer tracepoints of the measured CPUs and "
                   "explain every sample above the trace threshold (stored per phase; "
                   "`rtlab spikes RUN`); needs root and tracefs (exit 4 otherwise)")
    p.add_argument("--trace-threshold", metavar="DUR",
                   help="latency above which a sample is attributed to its cause (default "
                   "100us, or the scenario's [trace] threshold; implies --trace); never stops "
                   "the run")
    p.add_argument("--trace-buffer-kb", type=int, metavar="N",
                   help="kernel trace buffer per traced CPU in KiB, 16-262144 (default 4096; "
                   "implies --trace)")
    p.add_argument("--kernel-split", action="store_true",
                   help="timer probe: also record the kernel's own view with its timerlat "
                   "tracer (IRQ, thread and return-to-user latency per CPU; each activation "
                   "above the trace threshold split into IRQ and thread parts with its "
                   "culprit); implies --trace; a kernel without timerlat: exit 4. The "
                   "kernel's timerlat threads (FIFO 95) run beside the probe on its CPUs")
    p.add_argument("--no-progress", action="store_true", help="no live progress display")
    p.add_argument("--report", metavar="FILE",
                   help="write the HTML report here (default: reports/<run id>.html beside the "
                   "store; with several variants, one report of all of them)")
    p.add_argument("--no-report", action="store_true", help="do not write an HTML report")
    p.add_argument("--slo", metavar="EXPR",
                   help='service-level gate checked on every run, e.g. "max < 50us and '
                   'p99.99 < 20us"; exit code 3 when violated or not decided (a '
                   'percentile whose confidence interval straddles the bound: run longer)')
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML: one testcase per SLO "
                   "clause and channel (without --slo: one validity check per channel)")
    add_target_args(p, repeat=True)
    p.set_defaults(func=run)


def _job(args: argparse.Namespace) -> RunJob:
    """`rtlab run`'s options as the runner's request."""
    return RunJob(
        request=RunRequest(
            scenario=args.scenario, probe=args.probe, probe_opts=tuple(args.probe_opt),
            variants=tuple(args.variant or ()), duration=args.duration,
            interval=args.interval, threshold=args.threshold, cpus=args.cpus,
            priority=args.priority, policy=args.policy, allow_non_rt=bool(args.allow_non_rt),
            trace=bool(args.trace), trace_threshold=args.trace_threshold,
            trace_buffer_kb=args.trace_buffer_kb, kernel_split=bool(args.kernel_split),
            samples=args.samples),
        targets=tuple(args.target or ()), peer=args.peer,
        reflector=ReflectorRequest(args.reflector, args.reflector_cpu,
                                   tuple(args.reflector_thread_priority),
                                   tuple(args.reflector_irq)),
        store=args.store, engine_dir=args.engine_dir, restore_first=args.restore_first,
        no_shield=args.no_shield, command_line=("rtlab", *args.argv))


def run(args: argparse.Namespace) -> int:
    # Validate everything before anything starts.
    slo = None
    if args.slo is not None:
        slo = parse_slo(args.slo, "--slo")  # UsageError (exit 2) on a bad expression
    check_run_outputs(args)
    job = _job(args)
    targets = job_targets(job)  # checked; asked once
    several = len(targets) > 1
    console, err = make_console(), make_console(stderr=True)
    progress: Any = None
    if not args.no_progress and console.is_terminal:
        progress = BoardsProgress(console) if several else LiveProgress(console)

    def stored(_board: str | None, outcome: Any, where: str) -> None:
        if progress is not None:
            progress.clear()
        show_stored(outcome.result, where, console)

    watch = Watch(on_progress=progress.update if progress is not None else None,
                  on_stored=None if several else stored)
    try:
        done = run_job(job, watch, targets)
    finally:
        if progress is not None:
            progress.stop()
    compare_by = "run"
    if several:
        show_boards(done, console, err)
        # by host merges a host's runs: with several matrix variants, that would merge
        # variants, so the report compares run by run instead
        if len({r.scenario.get("variant") for r in done.results}) <= 1:
            compare_by = "host"
    elif done.matrix:
        ids = ", ".join(r.run_id for r in done.results)
        console.print(f"comparison {done.comparison}: runs {ids}", highlight=False)
    codes = _report_and_gate(args, slo, done.results, done.store_display, console, compare_by)
    code = done.exit_code(*codes)
    if code == ExitCode.INTERRUPTED:
        err.print(f"rtlab: interrupted: partial result{'s' if several else ''} stored",
                  highlight=False)
    elif done.loads_died and not several:
        err.print("rtlab: a load died early: the run did not have the load it asked for "
                  "(see the notes)", highlight=False)
    return int(code)


def check_run_outputs(args: argparse.Namespace) -> None:
    """Every file the run writes on this machine after measuring (report, JUnit) is
    checked before it measures: a typo never costs a run (rtlab.fileio)."""
    given = [(args.junit, "--junit")]
    if not [t for t in args.target or [] if t not in (None, "local")]:
        given.append((args.samples, "--samples"))  # FILE itself; FILE.PHASE after prepare
    if not args.no_report:
        given.append((args.report, "--report"))
    named = [(p, o) for p, o in given if p is not None]  # "" is a bad name, not none
    for path, option in named:
        check_output(path, option)
    if args.no_report and args.report is not None:
        raise UsageError("--report and --no-report contradict each other: give one")
    paths = [p for p, _ in named if p != STDOUT]
    if len(set(paths)) < len(paths):
        raise UsageError(f"two of --junit, --report and --samples name the same file "
                         f"{shown(paths[0], 200)}")
    if args.samples == STDOUT:
        raise UsageError("--samples -: the samples are binary; give a file")
    if (args.report == STDOUT and not args.no_report) or args.junit == STDOUT:
        raise UsageError("rtlab run prints its results on standard output: give --report "
                         "and --junit a file, not -")


def _report_and_gate(args: argparse.Namespace, slo: Any, results: list[Any],
                     store_display: str, console: Any, compare_by: str = "run"
                     ) -> list[ExitCode]:
    """Write the HTML report (unless --no-report) and check the SLO; extra exit codes."""
    if not results:
        return []
    reports = None
    codes: list[ExitCode] = []
    if slo is not None:

        reports = [evaluate_slo(slo, r, shape_of=probe_shape) for r in results]
        for r, rep in zip(results, reports, strict=True):
            console.print(f"run {r.run_id}: {rep.summary()}", highlight=False, markup=False)
            if not rep.passed:
                codes.append(ExitCode.THRESHOLD)
    outputs: list[tuple[Any, Any, str]] = []
    if args.junit:  # with an SLO one testcase per clause and channel, else validity checks
        outputs.append((args.junit, junit_xml(results, slo,
                                              evaluate_slo(slo, results, shape_of=probe_shape)
                                              if slo is not None else None), "--junit"))
    if not args.no_report:
        target = args.report or own_report_path(store_display, results[-1].run_id)
        single = reports[0] if reports and len(results) == 1 else None
        outputs.append((target, render_html(results, slo=slo, slo_report=single,
                                            compare_by=compare_by), "--report"))
    for (_, _, option), path in zip(outputs, write_outputs(outputs), strict=True):
        console.print(f"{'JUnit' if option == '--junit' else 'report'}: "
                      f"{path or 'standard output'}", highlight=False)
    return codes
