# SPDX-License-Identifier: MIT
"""`rtlab monitor`'s request, checked and turned into the monitor's options before
anything starts: which probe watches (a probe that declares how it is monitored,
`ProbeInfo.monitor`: nothing here names one), its engine arguments, the segment, the
watchdog and the CPUs. A bad value is a UsageError naming the option (exit 2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rtlab.cpulist import CpuListError, parse_cpulist
from rtlab.errors import UsageError
from rtlab.loads.params import parse_size
from rtlab.monitor.flight import DEFAULT_RATE, DEFAULT_TRIGGER_NS, MonitorTrace
from rtlab.probes.registry import DEFAULT_PROBE, monitored
from rtlab.scenario.units import parse_duration
from rtlab.textfmt import shown

DEFAULT_INTERVAL = "1ms"
DEFAULT_PRIORITY = 80
# the engine's own bounds: one segment is one engine run (its --duration: 1ms..1000h),
# and --dma-latency is an int32 of microseconds
MAX_SEGMENT = "1000h"
MAX_DMA_LATENCY_US = 2**31 - 1
MAX_TRACE_RATE = 1 << 30


@dataclass(frozen=True)
class MonitorRequest:
    """The monitor's options as given (text where the user typed text)."""

    probe: str = DEFAULT_PROBE
    interval: str = DEFAULT_INTERVAL
    priority: int = DEFAULT_PRIORITY
    dma_latency: int | None = None
    cpus: str | None = None
    segment: str = "1h"
    duration: str | None = None
    watchdog: str = "15s"
    allow_non_rt: bool = False
    trace: bool = False
    trace_threshold: str | None = None  # implies trace
    trace_rate: str | None = None  # bytes per second (k/M suffixes); implies trace


@dataclass(frozen=True)
class MonitorPlan:
    """What the monitor runs: the engine's arguments (without --duration) and timing."""

    engine_args: list[str]
    segment_s: float
    duration_s: float | None
    watchdog_s: float
    cpus: list[int] | None
    trace: MonitorTrace | None = None


def _number(value: int) -> str:
    """An integer as a message shows it: whole, or cut when it is huge."""
    text = str(value)
    return text if len(text) <= 20 else shown(text)


def plan_monitor(req: MonitorRequest) -> MonitorPlan:
    """The request checked (UsageError, one line, on the first bad value) and planned."""
    uses = monitored()
    use: Any = uses.get(req.probe)
    if use is None:
        raise UsageError(f"--probe {shown(req.probe)}: not a probe the monitor runs; "
                         "allowed: " + ", ".join(uses))
    engine = [req.probe]
    if use.wakes:
        engine += ["--interval", req.interval, "--priority", str(req.priority)]
    engine += list(use.fixed_args)
    cpus = None
    parse_duration(req.interval, "--interval")
    if req.cpus is not None:
        try:
            cpus = parse_cpulist(req.cpus)
        except CpuListError as exc:
            raise UsageError(f"--cpus: {exc}", hint="e.g. --cpus 1-3") from None
        if not cpus:
            raise UsageError("--cpus is empty", hint="e.g. --cpus 1-3")
        engine += ["--cpus", req.cpus]
    if not 1 <= req.priority <= 99:
        raise UsageError(f"--priority {_number(req.priority)} is out of range (1..99: "
                         "SCHED_FIFO priorities)")
    if not use.wakes:
        # a probe that spins on its CPUs at the engine's own scheduling: no wake-ups, so
        # no interval, no priority of a waking thread, no idle states to hold off
        given = [o for o, v, d in (("--interval", req.interval, DEFAULT_INTERVAL),
                                   ("--priority", req.priority, DEFAULT_PRIORITY),
                                   ("--dma-latency", req.dma_latency, None)) if v != d]
        if given:
            verb = "does" if len(given) == 1 else "do"
            waking = next((n for n, u in uses.items() if u.wakes), None)
            raise UsageError(f"{', '.join(given)} {verb} not apply to --probe {req.probe} "
                             f"({use.why_not_waking})",
                             hint="drop it" + (f", or use --probe {waking}" if waking else ""))
    if req.dma_latency is not None:
        if not 0 <= req.dma_latency <= MAX_DMA_LATENCY_US:
            raise UsageError(f"--dma-latency {_number(req.dma_latency)} is out of range "
                             f"(0-{MAX_DMA_LATENCY_US} microseconds; 0: no deep idle "
                             "states)")
        engine += ["--dma-latency", str(req.dma_latency)]
    if req.allow_non_rt:
        engine.append("--allow-non-rt")
    segment_ns = parse_duration(req.segment, "--segment")
    if not 1_000_000_000 <= segment_ns <= parse_duration(MAX_SEGMENT):
        raise UsageError(f"--segment {shown(req.segment)} is out of range (1s..{MAX_SEGMENT})")
    duration_s = (parse_duration(req.duration, "--duration") / 1e9
                  if req.duration is not None else None)
    watchdog_s = parse_duration(req.watchdog, "--watchdog") / 1e9
    if watchdog_s < 2:
        raise UsageError("--watchdog must be at least 2s (the engine reports every second)")
    return MonitorPlan(engine, segment_ns / 1e9, duration_s, watchdog_s, cpus,
                       _trace(req))


def _trace(req: MonitorRequest) -> MonitorTrace | None:
    """--trace, --trace-threshold, --trace-rate checked (each of the last two implies
    --trace)."""
    if not (req.trace or req.trace_threshold is not None or req.trace_rate is not None):
        return None
    trigger = DEFAULT_TRIGGER_NS
    if req.trace_threshold is not None:
        trigger = parse_duration(req.trace_threshold, "--trace-threshold")
        if not 1_000 <= trigger <= 10_000_000_000:
            raise UsageError(f"--trace-threshold {shown(req.trace_threshold)} is out of range "
                             "(1us..10s)")
    rate = DEFAULT_RATE
    if req.trace_rate is not None:
        try:
            rate = parse_size(req.trace_rate)
        except ValueError:
            raise UsageError(f"--trace-rate {shown(req.trace_rate)}: not a size in bytes per "
                             "second", hint="e.g. --trace-rate 64k (0: no cap)") from None
        if rate > MAX_TRACE_RATE:
            raise UsageError(f"--trace-rate {shown(req.trace_rate)} is out of range "
                             "(0..1G bytes per second)")
    return MonitorTrace(trigger, rate)

