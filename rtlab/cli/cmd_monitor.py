# SPDX-License-Identifier: MIT
"""`rtlab monitor`: watch boards indefinitely, export to Prometheus (docs/monitor.md)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from rtlab.cli.options import add_store_arg, add_target_args
from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode
from rtlab.fileio import check_directory
from rtlab.monitor.request import (
    DEFAULT_INTERVAL,
    DEFAULT_PRIORITY,
    MonitorRequest,
    plan_monitor,
)
from rtlab.probes.registry import DEFAULT_PROBE, monitored
from rtlab.results.store import check_store, default_data_dir


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
    p.add_argument("--probe", choices=tuple(monitored()), default=DEFAULT_PROBE,
                   help="; ".join(f"{name}: {use.help}" for name, use in monitored().items()))
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
    p.add_argument("--trace", action="store_true",
                   help="flight recorder: each board keeps a bounded ring of scheduler/IRQ/"
                   "timer tracepoints and sends home only the pages around each sample above "
                   "--trace-threshold; the worst spikes of every segment are explained "
                   "(`rtlab spikes RUN`); needs root and tracefs on the board")
    p.add_argument("--trace-threshold", metavar="DUR",
                   help="samples above this are explained (default 100us; implies --trace)")
    p.add_argument("--trace-rate", metavar="BYTES",
                   help="the most trace bytes a board sends per second, e.g. 64k (default; "
                   "0: no cap); windows over the cap are dropped and counted (implies --trace)")
    p.add_argument("--quiet", action="store_true", help="print only errors")
    add_store_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rtlab.engine.ssh import SshTarget
    from rtlab.monitor.service import LOCAL, Monitor, MonitorOptions

    plan = plan_monitor(MonitorRequest(
        probe=args.probe, interval=args.interval, priority=args.priority,
        dma_latency=args.dma_latency, cpus=args.cpus, segment=args.segment,
        duration=args.duration, watchdog=args.watchdog, allow_non_rt=args.allow_non_rt,
        trace=args.trace, trace_threshold=args.trace_threshold, trace_rate=args.trace_rate))
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

    opts = MonitorOptions(targets=targets, engine_args=plan.engine_args, state_dir=state_dir,
                          store=args.store, segment_s=plan.segment_s,
                          duration_s=plan.duration_s, watchdog_s=plan.watchdog_s,
                          engine_dir=args.engine_dir, measured_cpus=plan.cpus, on_event=say,
                          trace=plan.trace)
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

