# SPDX-License-Identifier: MIT
"""The kernel's own split in a traced run (`rtlab run --trace --kernel-split`,
scenario `[trace] kernel_split = true`; docs/tracing.md "The kernel's own split").

The measured probe's engine records with the kernel's timerlat tracer in its trace
instance (`--trace-tracer timerlat`, osnoise/cpus set to the measured CPUs and
journaled) and, beside the ordinary events, the osnoise noise events that name what
ran on the CPU. After the phase the capture is analysed (rtlab.trace.timerlat) and
stored per phase as `trace["kernel_split"]` (docs/results.md): per CPU the IRQ, thread
and return-to-user latency statistics, the culprit counts of the activations above the
trace threshold, and the worst of them with their splits.

The kernel's timerlat threads (SCHED_FIFO 95 by default) run beside rtlab's probe on
the measured CPUs: they measure the kernel's own timer path, not rtlab's thread, and
they preempt everything below their priority, rtlab's thread too when it runs lower.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rtlab.errors import SkippedError, UsageError
from rtlab.trace.timerlat import NOISE_EVENTS, CpuTimerlat, Split, analyze
from rtlab.trace.tracefs import DEFAULT_EVENTS, TraceFS

TRACER = "timerlat"
EVENTS: tuple[str, ...] = (*DEFAULT_EVENTS, *(f"osnoise/{n}" for n in NOISE_EVENTS))
PROBES = ("timer",)  # the measured probes a kernel split goes with
MAX_SPLITS = 20  # worst activations stored per CPU
MAX_BLOCKERS = 3  # blockers kept per part of a stored split
MAX_CULPRITS = 10
CONTEXTS = {"irq": "IRQ", "thread": "thread", "user": "return-to-user"}
STATS = ("count", "min", "p50", "p99", "p99.9", "max")
USER_ABSENT = "return-to-user: not recorded by this kernel"
NOTE = ("kernel's view (timerlat): the kernel's timerlat threads (FIFO 95) run beside "
        "rtlab's probe on the measured CPUs; they measure the kernel's own timer path, "
        "not rtlab's thread")


def check_probes(scenario: Any) -> None:
    """Before anything starts: every phase's measured probe is one a kernel split goes
    with (UsageError, exit 2, otherwise)."""
    trace = getattr(scenario, "trace", None)
    if trace is None or not trace.enabled or not trace.kernel_split:
        return
    for phase in scenario.phases:
        if phase.probe.name not in PROBES:
            raise UsageError(f"--kernel-split ([trace] kernel_split): phase {phase.name} "
                             f"measures with the "
                             f"{phase.probe.name} probe; the kernel's split goes with "
                             f"{', '.join(PROBES)} only",
                             hint="measure with --probe timer, or leave --kernel-split out")


def check_tracer(tracefs: Path | None = None) -> None:
    """Before anything starts on this machine: its kernel has the timerlat tracer
    (SkippedError, exit 4, with the tracers it has otherwise). A board's engine says so
    itself (exit 4)."""
    if tracefs is None:
        found = TraceFS.find()
        if found is None:
            raise SkippedError("--kernel-split: tracefs is not mounted, so the timerlat "
                               "tracer cannot be looked for",
                               hint="mount -t tracefs nodev /sys/kernel/tracing")
        tracefs = found.path
    try:
        tracers = (tracefs / "available_tracers").read_text().split()
    except OSError as exc:
        raise SkippedError(f"--kernel-split: cannot read {tracefs}/available_tracers: "
                           f"{exc.strerror or exc}", hint="run as root") from None
    if TRACER not in tracers:
        raise SkippedError(f"--kernel-split: this kernel has no {TRACER} tracer (it has: "
                           f"{', '.join(tracers) or 'none'})",
                           hint="a kernel with CONFIG_TIMERLAT_TRACER, e.g. a "
                           "PREEMPT_RT board: --target BOARD")


def engine_options() -> dict[str, Any]:
    """The engine options that add the kernel's view to a traced probe."""
    return {"trace_tracer": TRACER, "trace_events": ",".join(EVENTS)}


def _split_dict(sp: Split, start_ns: int | None) -> dict[str, Any]:
    d = sp.to_dict()
    d["irq_blockers"] = d["irq_blockers"][:MAX_BLOCKERS]  # type: ignore[index]
    d["thread_blockers"] = d["thread_blockers"][:MAX_BLOCKERS]  # type: ignore[index]
    d["latency_ns"] = sp.latency_ns
    d["at_ns"] = sp.expiry_ns - start_ns if start_ns is not None else None
    return d


def _stats(res: CpuTimerlat, context: str) -> dict[str, int | None] | None:
    d = res.distribution(context)
    return {k: d.get(k) for k in STATS} if d["count"] else None


def cpu_split(res: CpuTimerlat, start_ns: int | None) -> dict[str, Any]:
    """One CPU's stored kernel split."""
    worst = sorted(res.splits, key=lambda s: -s.latency_ns)[:MAX_SPLITS]
    worst.sort(key=lambda s: s.expiry_ns)
    out: dict[str, Any] = {c: _stats(res, c) for c in CONTEXTS}
    if out["user"] is None:
        out["user_note"] = USER_ABSENT
    out["splits"] = len(res.splits)
    out["culprits"] = dict(list(res.culprits().items())[:MAX_CULPRITS])
    out["worst"] = [_split_dict(s, start_ns) for s in worst]
    return out


def summarize(capture: Any, threshold_ns: int, start_ns: int | None = None
              ) -> dict[str, Any]:
    """The stored kernel split of one phase's capture (`start_ns`: the run's start on
    CLOCK_MONOTONIC; each stored split's `at_ns` is its timer's expiry after it)."""
    base: dict[str, Any] = {"tracer": TRACER, "threshold_ns": threshold_ns, "note": NOTE}
    meta = getattr(capture, "meta", {}) or {}
    if meta.get("tracer") != TRACER:
        return {**base, "cpus": {},
                "error": f"the capture was not recorded with the {TRACER} tracer"}
    per_cpu = analyze(capture, threshold_ns)
    cpus = {str(c): cpu_split(r, start_ns) for c, r in per_cpu.items()}
    out = {**base, "cpus": cpus}
    if not any(r.irq for r in per_cpu.values()):
        out["error"] = f"the capture holds no {TRACER} records"
    return out


def phase_split(capture: Any, threshold_ns: int, start_ns: int | None) -> dict[str, Any]:
    """`summarize` for a run: a capture it cannot read becomes the split's `error`, never
    the loss of the phase's measurement or attribution."""
    try:
        return summarize(capture, threshold_ns, start_ns)
    except Exception as exc:
        return {"tracer": TRACER, "threshold_ns": threshold_ns, "note": NOTE, "cpus": {},
                "error": f"not analysed: {type(exc).__name__}: {exc}"}


def notes_of(split: dict[str, Any]) -> list[str]:
    """The run notes a phase's kernel split adds."""
    if split.get("error"):
        return [f"kernel's view (timerlat): {split['error']}"]
    cpus = split.get("cpus") or {}
    absent = [str(c) for c, d in cpus.items() if d.get("user") is None]
    return [str(split.get("note") or NOTE)] + (
        [f"kernel's view (timerlat) CPU{','.join(absent)}: {USER_ABSENT}"] if absent else [])
