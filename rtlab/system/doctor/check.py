# SPDX-License-Identifier: MIT
"""The doctor's vocabulary: severities, finding codes, findings, the check interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from rtlab.system.sysroot import SysRoot

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport


class Severity(Enum):
    """How much a finding may hurt latency. `rank` orders them, worst highest."""

    OK = "ok"
    INFO = "info"
    UNKNOWN = "unknown"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {
    Severity.OK: 0,
    Severity.INFO: 1,
    Severity.UNKNOWN: 2,
    Severity.WARNING: 3,
    Severity.CRITICAL: 4,
}


class Code(Enum):
    """Machine-readable reasons for a finding that is not ok (stable strings)."""

    # kernel
    PREEMPT_RT = "preempt-rt"
    PREEMPT_FULL = "preempt-full"
    PREEMPT_NONE = "preempt-none-or-voluntary"
    PREEMPT_MODE_UNREADABLE = "preempt-mode-unreadable"
    NO_NOHZ_FULL = "no-nohz-full"
    NOHZ_FULL_NOT_BUILT = "nohz-full-not-built"
    # isolation and topology
    NO_ISOLATION = "no-isolation"
    ISOLATION_NOT_IN_EFFECT = "isolation-not-in-effect"
    CPUS_NOT_ISOLATED = "measured-cpus-not-isolated"
    SMT_SIBLING_BUSY = "smt-sibling-busy"
    SMT_ACTIVE = "smt-active"
    CACHE_SHARED = "cache-shared-with-housekeeping"
    WORKQUEUE_ON_ISOLATED = "workqueue-on-isolated"
    IRQ_ON_ISOLATED = "irq-on-isolated"
    IRQBALANCE_RUNNING = "irqbalance-running"
    NUMA_BALANCING = "numa-balancing"
    # power
    DEEP_IDLE_STATES = "deep-idle-states"
    CPUFREQ_GOVERNOR = "cpufreq-governor-not-performance"
    CPUFREQ_BOOST = "cpufreq-boost"
    # scheduler
    RT_THROTTLING = "rt-throttling"
    RT_THROTTLING_OFF = "rt-throttling-off"
    RT_GROUP_ZERO = "rt-group-runtime-zero"
    TIMER_MIGRATION = "timer-migration"
    NMI_WATCHDOG = "nmi-watchdog"
    SOFT_WATCHDOG = "soft-watchdog"
    KTHREAD_PRIORITIES = "kthread-priorities"
    # memory
    THP_ALWAYS = "thp-always"
    SWAP_ON = "swap-on"
    # clocks, platform
    CLOCKSOURCE_SLOW = "clocksource-slow"
    TSC_UNSTABLE = "tsc-unstable"
    VIRTUALIZED = "virtualized"
    STEAL_TIME = "steal-time"
    MITIGATIONS = "mitigations"
    # privileges
    NO_RT_PRIORITY = "no-rt-priority"
    NO_MEMLOCK = "no-memlock"
    # tracers
    NO_TRACEFS = "no-tracefs"
    NO_LATENCY_TRACERS = "no-latency-tracers"
    # generic
    UNREADABLE = "unreadable"


@dataclass
class Finding:
    """What one check found."""

    check: str
    title: str
    severity: Severity
    summary: str
    why: str
    advice: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    codes: tuple[Code, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "title": self.title,
            "severity": self.severity.value,
            "summary": self.summary,
            "why": self.why,
            "advice": self.advice,
            "codes": [c.value for c in self.codes],
            "facts": self.facts,
        }


class Context:
    """What every check may read: the system tree, the CPUs of interest, shared facts."""

    def __init__(self, sysroot: SysRoot, cpus: list[int] | None = None,
                 engine: Transport | None = None) -> None:
        self.sys = sysroot
        self.engine = engine  # a board's engine (`--target`): asked live where it decides
        self.requested_cpus = cpus
        online = sysroot.online_cpus()
        self.online: list[int] = online if online is not None else []
        self.cpus: list[int] = list(cpus) if cpus is not None else list(self.online)

    @cached_property
    def cmdline(self) -> dict[str, str | None]:
        return self.sys.cmdline()

    @cached_property
    def kconfig_with_source(self) -> tuple[dict[str, str], str | None]:
        return self.sys.kconfig()

    @property
    def kconfig(self) -> dict[str, str]:
        return self.kconfig_with_source[0]

    @cached_property
    def isolated(self) -> set[int]:
        """CPUs isolated in effect: isolated (isolcpus) plus nohz_full."""
        cpus = set(self.sys.cpulist("sys/devices/system/cpu/isolated") or [])
        cpus |= set(self.sys.cpulist("sys/devices/system/cpu/nohz_full") or [])
        return cpus

    @cached_property
    def housekeeping(self) -> list[int]:
        """CPUs for housekeeping: online minus isolated minus requested (CPU 0 if none)."""
        hk = set(self.online) - self.isolated - set(self.requested_cpus or [])
        if not hk or (hk == set(self.online) and not self.requested_cpus):
            return [min(self.online)] if self.online else [0]
        return sorted(hk)

    @cached_property
    def flags(self) -> set[str]:
        return self.sys.cpuinfo_flags() or set()

    @cached_property
    def machine(self) -> str:
        """A rough architecture name from cpuinfo (x86 if it has x86 flags)."""
        if "fpu" in self.flags or "tsc" in self.flags:
            return "x86"
        if self.sys.live:
            import platform

            return platform.machine()
        return "unknown"


class Check:
    """One concern. Subclasses set `id` and `title`, say in their docstring why the
    concern shapes latency (every finding's `why`), and implement `run`."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    why: ClassVar[str] = ""
    per_cpu: ClassVar[bool] = False  # narrowed by --cpus

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__doc__:
            cls.why = " ".join(cls.__doc__.split())

    def applies(self, ctx: Context) -> bool:
        return True

    def run(self, ctx: Context) -> Finding:
        raise NotImplementedError

    def finding(
        self,
        severity: Severity,
        summary: str,
        *,
        advice: str | None = None,
        facts: dict[str, Any] | None = None,
        codes: tuple[Code, ...] = (),
    ) -> Finding:
        return Finding(
            self.id, self.title, severity, summary, self.why, advice, dict(facts or {}), codes
        )

    def problem(self, severity: Severity, code: Code, summary: str, *, advice: str | None,
                facts: dict[str, Any] | None = None) -> Finding:
        """What is wrong (one code) and the change that puts it right."""
        return self.finding(severity, summary, advice=advice, facts=facts, codes=(code,))

    def ok(self, summary: str, facts: dict[str, Any] | None = None) -> Finding:
        return self.finding(Severity.OK, summary, facts=facts)

    def unknown(self, summary: str, facts: dict[str, Any] | None = None) -> Finding:
        return self.finding(Severity.UNKNOWN, summary, facts=facts, codes=(Code.UNREADABLE,))
