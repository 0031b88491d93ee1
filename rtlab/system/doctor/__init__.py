# SPDX-License-Identifier: MIT
"""`rtlab doctor`: small checks of everything on a system that shapes RT latency.

Usage from the runner::

    from rtlab.system.doctor import run_checks, top_findings
    findings = run_checks("/", cpus=[2, 3])
    for f in top_findings(findings, 3): ...

Each check is a small class (see `check.Check`) in a module per concern; adding one is
a class plus one line in CHECKS.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rtlab.cpulist import format_cpulist, parse_cpulist
from rtlab.errors import UsageError
from rtlab.system.doctor.check import Check, Code, Context, Finding, Severity
from rtlab.system.doctor.cpu import (
    CacheCheck,
    ClocksourceCheck,
    CpufreqCheck,
    CpuModelCheck,
    IdleCheck,
    MitigationsCheck,
    NumaCheck,
    SmtCheck,
    VirtualizationCheck,
)
from rtlab.system.doctor.irq import IrqAffinityCheck, IrqbalanceCheck
from rtlab.system.doctor.kernel import IsolationCheck, PreemptionCheck, TickCheck
from rtlab.system.doctor.memory import SwapCheck, ThpCheck
from rtlab.system.doctor.privileges import RtPrivilegeCheck
from rtlab.system.doctor.sched import (
    KthreadCheck,
    RtGroupCheck,
    RtThrottlingCheck,
    TimerMigrationCheck,
    WatchdogCheck,
    WorkqueueCheck,
)
from rtlab.system.doctor.tracers import TracersCheck
from rtlab.system.sysroot import SysRoot

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

__all__ = [
    "CHECKS",
    "Check",
    "Code",
    "Context",
    "Finding",
    "Severity",
    "run_checks",
    "summarize",
    "top_findings",
    "validate_cpus",
    "worst",
]

SCHEMA = 1

CHECKS: tuple[type[Check], ...] = (
    PreemptionCheck,
    TickCheck,
    IsolationCheck,
    CpuModelCheck,
    SmtCheck,
    CacheCheck,
    IdleCheck,
    CpufreqCheck,
    RtThrottlingCheck,
    RtGroupCheck,
    RtPrivilegeCheck,
    ThpCheck,
    SwapCheck,
    IrqbalanceCheck,
    IrqAffinityCheck,
    ClocksourceCheck,
    TimerMigrationCheck,
    WatchdogCheck,
    KthreadCheck,
    WorkqueueCheck,
    NumaCheck,
    VirtualizationCheck,
    MitigationsCheck,
    TracersCheck,
)


def validate_cpus(sysroot: SysRoot, cpus: str | list[int] | None) -> list[int] | None:
    """Parse/validate a CPU selection against the online CPUs; UsageError if bad."""
    if cpus is None:
        return None
    if isinstance(cpus, str):
        try:
            cpus = parse_cpulist(cpus, strides=True)
        except ValueError as exc:
            raise UsageError(f"--cpus: {exc}", "use a CPU list such as 2,3 or 1-3") from None
        if not cpus:
            raise UsageError("--cpus: empty CPU list", "use a CPU list such as 2,3 or 1-3")
    online = sysroot.online_cpus()
    if online is not None:
        bad = sorted(set(cpus) - set(online))
        if bad:
            raise UsageError(
                f"--cpus: CPU {format_cpulist(bad)} not online",
                f"online CPUs: {format_cpulist(online)}",
            )
    return sorted(set(cpus))


def run_checks(
    root: str = "/", cpus: list[int] | None = None, only: Iterable[str] | None = None,
    engine: Transport | None = None,
) -> list[Finding]:
    """Run every applicable check against the system tree at `root`.

    `cpus` narrows the per-CPU checks (default: all online CPUs). A check that crashes
    on an unexpected file becomes an UNKNOWN finding, never an exception. `engine`: the
    target's engine when `root` is a snapshot of a board (`rtlab doctor --target`).
    """
    sysroot = SysRoot(root)
    ctx = Context(sysroot, validate_cpus(sysroot, cpus), engine)
    wanted = set(only) if only is not None else None
    findings: list[Finding] = []
    for cls in CHECKS:
        check = cls()
        if wanted is not None and check.id not in wanted:
            continue
        try:
            if not check.applies(ctx):
                continue
            findings.append(check.run(ctx))
        except Exception as exc:  # a malformed file must not stop the doctor
            findings.append(check.unknown(f"check failed: {type(exc).__name__}: {exc}"))
    return findings


def worst(findings: Iterable[Finding]) -> Severity:
    return max((f.severity for f in findings), key=lambda s: s.rank, default=Severity.OK)


def top_findings(
    findings: Iterable[Finding], n: int = 3, min_severity: Severity = Severity.WARNING
) -> list[Finding]:
    """The `n` worst findings at or above `min_severity`, worst first (stable order)."""
    items = [f for f in findings if f.severity.rank >= min_severity.rank]
    items.sort(key=lambda f: -f.severity.rank)
    return items[:n]


def summarize(findings: list[Finding]) -> dict[str, Any]:
    counts = {s.value: 0 for s in Severity}
    for f in findings:
        counts[f.severity.value] += 1
    return {
        "worst": worst(findings).value,
        "counts": counts,
        "top": [f.check for f in top_findings(findings, 5)],
    }
