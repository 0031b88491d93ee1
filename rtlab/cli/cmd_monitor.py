# SPDX-License-Identifier: MIT
"""`rtlab monitor`: watch boards indefinitely, export to Prometheus (docs/monitor.md)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from rtlab.cli.options import add_store_arg, add_target_args
from rtlab.cpulist import CpuListError, parse_cpulist
from rtlab.errors import RtlabError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.fileio import check_directory
from rtlab.results.store import check_store, default_data_dir
from rtlab.scenario.units import parse_duration
from rtlab.textfmt import shown

DEFAULT_INTERVAL = "1ms"
DEFAULT_PRIORITY = 80
# the engine's own bounds: one segment is one engine run (its --duration: 1ms..1000h),
# and --dma-latency is an int32 of microseconds
MAX_SEGMENT = "1000h"
MAX_DMA_LATENCY_US = 2**31 - 1


def register(sub: Any) -> None:
    p = sub.add_parser(
        "monitor", help="watch boards for days: latency per CPU, stored and exported to "
        "Prometheus",
        description="Measures timer latency (or OS noise) on one or more boards (or this machine) "
        "without end, in segments (each stored as a run of scenario `monitor`), "
        "checkpointed so that a restart or a kill -9 neither loses nor double-counts "
        "anything, reconnecting to boards that went away (the gap is recorded). With "
        "--listen it serves Prometheus metrics. See a past day with `rtlab history --host "
        "H --day DATE`. Exit codes: 0 stopped after --duration, 1 error (e.g. the port is "
        "in use, the state directory is held by another monitor), 2 usage (bad option, "
        "CPU list, address), 4 skipped (no real-time scheduling: run as root), 130 "
        "stopped by Ctrl-C/SIGTERM (everything measured is stored or kept in the state "
        "directory).")
    add_target_args(p, repeat=True)
    p.add_argument("--probe", choices=("timer", "noise"), default="timer",
                   help="timer: wake-up latency of a SCHED_FIFO thread (default); noise: "
                   "OS noise seen by a thread that spins on each CPU (it takes the whole "
                   "CPU: for CPUs reserved to a polling workload)")
    p.add_argument("--cpus", metavar="LIST", help="CPUs to measure (default: all online)")
    p.add_argument("--interval", default=DEFAULT_INTERVAL, metavar="DUR",
                   help=f"wake-up period (default {DEFAULT_INTERVAL}: a modest rate for "
                   "days of monitoring)")
    p.add_argument("--priority", type=int, default=DEFAULT_PRIORITY, metavar="N",
                   help=f"SCHED_FIFO priority of the measuring threads (default "
                   f"{DEFAULT_PRIORITY}: below the kernel's own 99 threads)")
    p.add_argument("--dma-latency", type=int, metavar="US",
                   help="hold /dev/cpu_dma_latency at US microseconds on each board while "
                   "measuring, as a real-time application that does so (0: no deep idle "
                   "states; default: not held, the board idles as it is configured to)")
    p.add_argument("--segment", default="1h", metavar="DUR",
                   help="length of one engine run, stored as one run (default 1h)")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="serve Prometheus metrics there (HOST defaults to 127.0.0.1; "
                   "another address only when given)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="checkpoint and raw segments (default: monitor/ beside the "
                   "default store)")
    p.add_argument("--watchdog", default="15s", metavar="DUR",
                   help="a board whose engine says nothing for this long is taken as gone: "
                   "its connection is dropped and retried (default 15s; snapshots come "
                   "every second)")
    p.add_argument("--duration", metavar="DUR",
                   help="stop after this long (default: run until Ctrl-C/SIGTERM)")
    p.add_argument("--allow-non-rt", action="store_true",
                   help="measure even without real-time scheduling (results marked)")
    p.add_argument("--quiet", action="store_true", help="print only errors")
    add_store_arg(p)
    p.set_defaults(func=run)


def _number(value: int) -> str:
    """An integer as a message shows it: whole, or cut when it is huge."""
    text = str(value)
    return text if len(text) <= 20 else shown(text)


def _options(args: argparse.Namespace
             ) -> tuple[list[str], float, float | None, float, list[int] | None]:
    if args.probe == "timer":
        engine = ["timer", "--interval", args.interval, "--priority", str(args.priority),
                  "--policy", "fifo"]
    else:
        engine = ["noise"]
    cpus = None
    parse_duration(args.interval, "--interval")
    if args.cpus is not None:
        try:
            cpus = parse_cpulist(args.cpus)
        except CpuListError as exc:
            raise UsageError(f"--cpus: {exc}", hint="e.g. --cpus 1-3") from None
        if not cpus:
            raise UsageError("--cpus is empty", hint="e.g. --cpus 1-3")
        engine += ["--cpus", args.cpus]
    if not 1 <= args.priority <= 99:
        raise UsageError(f"--priority {_number(args.priority)} is out of range (1..99: "
                         "SCHED_FIFO priorities)")
    if args.probe == "noise":
        # the noise probe spins on its CPUs at the engine's own scheduling: no wake-ups,
        # so no interval, no priority of a waking thread, no idle states to hold off
        given = [o for o, v, d in (("--interval", args.interval, DEFAULT_INTERVAL),
                                   ("--priority", args.priority, DEFAULT_PRIORITY),
                                   ("--dma-latency", args.dma_latency, None)) if v != d]
        if given:
            verb = "does" if len(given) == 1 else "do"
            raise UsageError(f"{', '.join(given)} {verb} not apply to --probe noise (it "
                             "spins on each CPU)", hint="drop it, or use --probe timer")
    if args.dma_latency is not None:
        if not 0 <= args.dma_latency <= MAX_DMA_LATENCY_US:
            raise UsageError(f"--dma-latency {_number(args.dma_latency)} is out of range "
                             f"(0-{MAX_DMA_LATENCY_US} microseconds; 0: no deep idle "
                             "states)")
        engine += ["--dma-latency", str(args.dma_latency)]
    if args.allow_non_rt:
        engine.append("--allow-non-rt")
    segment_ns = parse_duration(args.segment, "--segment")
    if not 1_000_000_000 <= segment_ns <= parse_duration(MAX_SEGMENT):
        raise UsageError(f"--segment {shown(args.segment)} is out of range (1s..{MAX_SEGMENT})")
    segment_s = segment_ns / 1e9
    duration_s = (parse_duration(args.duration, "--duration") / 1e9
                  if args.duration is not None else None)
    watchdog_s = parse_duration(args.watchdog, "--watchdog") / 1e9
    if watchdog_s < 2:
        raise UsageError("--watchdog must be at least 2s (the engine reports every second)")
    return engine, segment_s, duration_s, watchdog_s, cpus


def run(args: argparse.Namespace) -> int:
    from rtlab.engine.ssh import SshTarget
    from rtlab.monitor.service import LOCAL, Monitor, MonitorOptions

    engine, segment_s, duration_s, watchdog_s, cpus = _options(args)
    listen = None
    if args.listen:
        from rtlab.monitor.http import parse_listen

        listen = parse_listen(args.listen)
    targets = list(dict.fromkeys(args.target or [LOCAL]))
    for t in targets:  # a malformed address is a usage error before anything starts
        if t != LOCAL:
            SshTarget.parse(t)
    unreachable = check_store(args.store)  # refused before the first segment is measured
    state_dir = (check_directory(args.state_dir, "--state-dir") if args.state_dir is not None
                 else default_data_dir() / "monitor")

    def say(msg: str) -> None:
        if not args.quiet:
            print(f"rtlab monitor: {msg}", file=sys.stderr, flush=True)

    opts = MonitorOptions(targets=targets, engine_args=engine, state_dir=state_dir,
                          store=args.store, segment_s=segment_s, duration_s=duration_s,
                          watchdog_s=watchdog_s, engine_dir=args.engine_dir,
                          measured_cpus=cpus, on_event=say)
    mon = Monitor(opts)
    server = None
    try:
        if listen is not None:  # a port in use is refused before the state dir is made
            from rtlab.monitor.http import MetricsServer, format_address

            server = MetricsServer(mon.live, *listen)
            server.start()
            say(f"metrics on http://{format_address(*server.address)}/metrics")
        mon.prepare()
        stopped_by: list[int] = []

        def on_signal(signum: int, _frame: object) -> None:
            stopped_by.append(signum)
            mon.stop()

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        say(f"watching {', '.join(targets)}; state in {state_dir}")
        if unreachable is not None:
            say(f"store unreachable for now, segments wait in {state_dir}: {unreachable}")
        try:
            code = mon.run()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        if mon.fatal is not None:
            raise mon.fatal
        waiting = mon.pending_count()
        if stopped_by:
            if waiting:
                say(f"{waiting} segment(s) not stored yet: kept in {state_dir}; the next "
                    "start stores them")
            say(f"stopped by {signal.Signals(stopped_by[0]).name}")
            return int(ExitCode.INTERRUPTED)
        if waiting:
            raise RtlabError(f"{waiting} segment(s) not stored yet (the store could not be "
                             f"written): kept in {state_dir}",
                             hint="the next start stores them")
        return code
    finally:
        if server is not None:
            server.stop()
        mon.close()

