# SPDX-License-Identifier: MIT
"""`rtlab run`: run a scenario (built-in or FILE.toml), show and store each result."""

from __future__ import annotations

import argparse
from typing import Any

from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.cli.run_boards import run_boards
from rtlab.cli.target import add_target_args, open_target
from rtlab.cpulist import MAX_CPUS
from rtlab.engine.ssh import SshTarget
from rtlab.engine.transport import LocalTransport
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.fileio import STDOUT, check_output, write_outputs
from rtlab.probes.registry import names as probe_names
from rtlab.report import render
from rtlab.report.html import own_report_path, render_html
from rtlab.report.junit import junit_xml
from rtlab.report.spikes import spike_lines
from rtlab.report.terminal import channel_label, make_console
from rtlab.results.store import Store
from rtlab.runner import RunOptions, run_variants
from rtlab.runner.direct import ReflectorBoard, make_peer, start_peer
from rtlab.runner.prepare import RunRequest, prepare
from rtlab.runner.remote import check_remote, target_online_cpus
from rtlab.runner.run import worst_exit
from rtlab.scenario import find, online_cpus
from rtlab.scenario.loader import declared_targets
from rtlab.system.shield import ThreadPriority, irq_move_problem, parse_thread_priority
from rtlab.textfmt import seconds, shown, us


def register(sub: Any) -> None:
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
                   help="udp: ping a reflector the user started on another machine (with "
                   "--probe-opt session=TOKEN) instead of two local network namespaces")
    p.add_argument("--reflector", metavar="TARGET",
                   help="udp: start the reflector on this board over SSH (bound to --peer "
                   "ADDR:PORT, its address on the link to the pinging board) and ping it from "
                   "--target (or this machine): the packets cross the link between the two "
                   "boards (docs/boards.md)")
    p.add_argument("--reflector-cpu", type=int, metavar="N",
                   help="udp with --reflector: pin the reflector to this CPU of its board")
    p.add_argument("--reflector-thread-priority", metavar="PATTERN=POLICY:PRIO",
                   action="append", default=[],
                   help="udp with --reflector: give the reflector board's threads whose name "
                   "matches PATTERN this policy and priority for the run (journaled there), "
                   "e.g. the seed's NIC IRQ thread 'irq/[0-9]+-eth1=fifo:99'; repeatable")
    p.add_argument("--reflector-irq", metavar="PATTERN=CPUS", action="append", default=[],
                   help="udp with --reflector: move the reflector board's IRQs whose name "
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
    p.add_argument("--store", metavar="PATH",
                   help="result store: SQLite file or SQLAlchemy URL "
                   "(default $RTLAB_STORE or ~/.local/share/rtlab/rtlab.db)")
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


def _request(args: argparse.Namespace) -> Any:

    return RunRequest(
        scenario=args.scenario, probe=args.probe, probe_opts=tuple(args.probe_opt),
        variants=tuple(args.variant or ()), duration=args.duration, interval=args.interval,
        threshold=args.threshold, cpus=args.cpus, priority=args.priority, policy=args.policy,
        allow_non_rt=bool(args.allow_non_rt), trace=bool(args.trace),
        trace_threshold=args.trace_threshold, trace_buffer_kb=args.trace_buffer_kb,
        samples=args.samples, peer=args.peer if args.reflector is None else None)


def _prepare(args: argparse.Namespace, online: list[int] | None = None
             ) -> tuple[Any, list[Any]]:
    """Everything validated and resolved before anything starts: (file, variants)."""

    return prepare(_request(args), online)


def run(args: argparse.Namespace) -> int:
    # Validate everything before anything starts.
    slo = None
    if args.slo is not None:

        slo = parse_slo(args.slo, "--slo")  # UsageError (exit 2) on a bad expression
    check_run_outputs(args)
    check_reflector_args(args)
    targets = args.target or _scenario_targets(args) or [None]
    traced = [f for f, v in (("--trace", args.trace), ("--trace-threshold", args.trace_threshold),
                             ("--trace-buffer-kb", args.trace_buffer_kb)) if v]
    boards = [t for t in targets if t not in (None, "local")]
    if traced and boards:  # before connecting (a scenario's [trace] is checked once read)
        raise UsageError(f"{traced[0]} with --target {boards[0]}: tracing is read from this "
                         "machine's tracefs; it is not available for boards yet")
    if len(targets) > 1:

        return run_boards(args, slo, targets, _prepare, _report_and_gate)
    with open_target(targets[0], args.engine_dir) as target:
        return _run_on(args, slo, target)


def _run_on(args: argparse.Namespace, slo: Any, target: Any) -> int:

    online = None if target.is_local else target_online_cpus(target)
    sfile, variants = _prepare(args, online)
    if not target.is_local:
        check_remote(variants, target, peer=args.peer)
    elif args.samples is not None:
        check_samples_outputs(variants)  # FILE.PHASE of each phase (FILE: checked first)
    # validated; nothing created before run_variants
    peer = _udp_peer(args, variants, target, online, getattr(sfile, "reflector", None))

    console = make_console()
    err = make_console(stderr=True)
    store = Store.open(args.store)
    show_progress = not args.no_progress and console.is_terminal
    progress = _LiveProgress(console) if show_progress else None
    opts = RunOptions(
        store=store,
        allow_non_rt=args.allow_non_rt,
        on_progress=progress.update if progress else None,
        command_line=["rtlab", *args.argv],
        restore_first=args.restore_first,
        no_shield=args.no_shield,
        transport=target,
    )

    def shown(outcome: Any) -> None:
        if progress:
            progress.clear()
        result = outcome.result
        if result.scenario.get("variant"):
            console.print(f"variant {result.scenario['variant']}", style="bold",
                          highlight=False)
        render(result, console)
        for line in spike_lines(result):
            console.print(line, highlight=False, markup=False)
        for line in _doctor_lines(result):
            console.print(line, highlight=False, markup=False)
        console.print(f"run {result.run_id} stored in {store.display}", highlight=False)

    try:
        if peer is not None:  # namespaces + reflector (or the remote one): removed below
            variants = start_peer(peer, variants, opts)
        outcomes = run_variants(variants, opts, on_outcome=shown)
    finally:
        if peer is not None:
            peer.close()
        if progress:
            progress.stop()
        store.close()
    if len(variants) > 1 or sfile.has_matrix:
        ids = ", ".join(o.result.run_id for o in outcomes)
        console.print(f"comparison {opts.comparison}: runs {ids}", highlight=False)
    codes = [o.exit_code for o in outcomes]
    codes += _report_and_gate(args, slo, [o.result for o in outcomes], store.display, console)
    if ExitCode.INTERRUPTED in codes:
        err.print("rtlab: interrupted: partial result stored", highlight=False)
        return int(ExitCode.INTERRUPTED)
    if any(o.loads_died for o in outcomes):
        err.print("rtlab: a load died early: the run did not have the load it asked for "
                  "(see the notes)", highlight=False)
    return int(worst_exit(*codes))


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


def check_reflector_args(args: argparse.Namespace) -> None:
    """The udp peer's options, checked as written before anything connects or starts
    (what needs the board, its CPUs and IRQs, is checked there)."""
    if args.reflector is not None:
        SshTarget.parse(args.reflector, "--reflector")
    if args.reflector_cpu is not None and not 0 <= args.reflector_cpu < MAX_CPUS:
        raise UsageError(f"--reflector-cpu {args.reflector_cpu}: out of range "
                         f"0..{MAX_CPUS - 1}")
    for text in args.reflector_thread_priority:
        parse_thread_priority(text, "--reflector-thread-priority")
    for text in args.reflector_irq:
        _irq_move(text)


def check_samples_outputs(variants: list[Any]) -> None:
    """The raw sample files a local run's probes write (--samples: one per phase)."""
    for variant in variants:
        for phase in variant.phases:
            path = phase.probe.options.get("samples_file")
            if path:
                check_output(str(path), "--samples")


def _scenario_targets(args: argparse.Namespace) -> list[str]:
    """The boards a scenario file names, when --target does not say."""
    if args.probe is not None:
        return []

    return declared_targets(find(args.scenario or "quick"))


def _report_and_gate(args: argparse.Namespace, slo: Any, results: list[Any],
                     store_display: str, console: Any, compare_by: str = "run"
                     ) -> list[ExitCode]:
    """Write the HTML report (unless --no-report) and check the SLO; extra exit codes."""
    if not results:
        return []
    reports = None
    codes: list[ExitCode] = []
    if slo is not None:

        reports = [evaluate_slo(slo, r) for r in results]
        for r, rep in zip(results, reports, strict=True):
            console.print(f"run {r.run_id}: {rep.summary()}", highlight=False, markup=False)
            if not rep.passed:
                codes.append(ExitCode.THRESHOLD)
    outputs: list[tuple[Any, Any, str]] = []
    if args.junit:  # with an SLO one testcase per clause and channel, else validity checks
        outputs.append((args.junit, junit_xml(results, slo, evaluate_slo(slo, results)
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


def _doctor_lines(result: Any) -> list[str]:
    """The doctor's top findings that may explain what was measured."""
    doctor = result.provenance.get("doctor") or {}
    top = doctor.get("top") or []
    lines = []
    for f in top:
        advice = f" -> {f['advice']}" if f.get("advice") else ""
        lines.append(f"doctor [{f.get('severity')}] {f.get('title')}: {f.get('summary')}"
                     f"{advice}")
    if lines:
        lines.insert(0, "what may explain these numbers (rtlab doctor):")
    return lines


class _LiveProgress:
    """Per-CPU samples, current max and missed, with elapsed/remaining time."""

    def __init__(self, console: Any) -> None:
        from rich.live import Live

        self._live = Live(console=console, transient=True, auto_refresh=False)
        self._live.start()

    def update(self, p: Any) -> None:
        from rich.table import Table


        remaining = ""
        if p.duration_ns:
            remaining = f", {seconds(max(0, p.duration_ns - p.elapsed_ns))} left"
        phase = f"phase {p.phase} ({p.phase_index + 1}/{p.phases}) " if p.phases > 1 else ""
        table = Table(title=f"{phase}measuring: {seconds(p.elapsed_ns)} elapsed{remaining}",
                      title_justify="left")
        for name in ("channel", "samples", "max µs", "missed"):
            table.add_column(name, justify="left" if name == "channel" else "right")
        for ch in p.channels:
            table.add_row(channel_label(ch), f"{ch.samples:,}", us(ch.max_ns), f"{ch.missed:,}")
        self._live.update(table, refresh=True)

    def clear(self) -> None:
        from rich.text import Text

        self._live.update(Text(""), refresh=True)

    def stop(self) -> None:
        self._live.stop()


def _udp_peer(args: argparse.Namespace, variants: list[Any], target: Any = None,
              online: list[int] | None = None, spec: Any = None) -> Any:
    """The udp run's other end: --reflector (its flags win over the scenario's
    [reflector] table `spec`), the scenario's reflector, --peer, or none given."""
    cpus = online if online is not None else online_cpus()
    board = args.reflector or (spec.target if spec is not None else None)
    if board is None:
        if (args.reflector_cpu is not None or args.reflector_thread_priority
                or args.reflector_irq):
            raise UsageError("--reflector-cpu, --reflector-thread-priority and "
                             "--reflector-irq go with --reflector TARGET")
        return make_peer(variants, args.peer, cpus, board=target)

    SshTarget.parse(board, "--reflector" if args.reflector else "[reflector] target")
    if target is not None and not target.is_local and target.target == board:
        raise UsageError(f"the reflector {board} is the board that pings (--target): give "
                         "the other one")
    if args.reflector_thread_priority or spec is None:
        prios = tuple(parse_thread_priority(t, "--reflector-thread-priority")
                      for t in args.reflector_thread_priority)
    else:
        prios = tuple(ThreadPriority(m, pol, pr) for m, pol, pr in spec.thread_priorities)
    if args.reflector_irq or spec is None:
        irqs = tuple(_irq_move(t) for t in args.reflector_irq)
    else:
        irqs = spec.irqs
    address = args.peer if args.peer is not None or spec is None else spec.address
    cpu = args.reflector_cpu if args.reflector_cpu is not None or spec is None else spec.cpu
    return make_peer(variants, address, cpus, ReflectorBoard(
        board, target if target is not None else LocalTransport(),
        engine_dir=args.engine_dir, cpu=cpu, thread_priorities=prios,
        irq_affinities=irqs))


def _irq_move(text: str) -> tuple[str, str]:
    """`PATTERN=CPUS` of --reflector-irq (CPUS checked on the board when applied)."""
    pattern, _, cpus = text.rpartition("=")
    why = irq_move_problem(pattern, cpus)
    if why == "shape":
        raise UsageError(f"--reflector-irq {shown(text)}: expected PATTERN=CPUS, e.g. "
                         "'eth1=0'")
    if why is not None:
        raise UsageError(f"--reflector-irq {shown(text)}: {why}")
    return pattern, cpus
