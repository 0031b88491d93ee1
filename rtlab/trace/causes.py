# SPDX-License-Identifier: MIT
"""What attribution works on and gives back: a spike (CPU, deadline, wake), the components
its latency is made of (tasks, IRQ-like contexts, idle, gaps) and the cause they add up
to, with the one-line text the report shows."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Spike:
    """One late wake-up: times are absolute CLOCK_MONOTONIC ns."""

    cpu: int
    deadline_ns: int
    wake_ns: int
    tid: int | None = None  # the measuring thread; inferred from sched_switch when None
    source: str = "samples"

    @property
    def latency_ns(self) -> int:
        return self.wake_ns - self.deadline_ns


@dataclass
class Component:
    """Time of one interfering thing inside [deadline, wake] (exclusive of nested ones)."""

    kind: str  # irq | softirq | vector | hrtimer | ipi | task | idle | wake_path | gap
    name: str
    ident: int | None = None  # irq number, softirq vector, pid
    duration_ns: int = 0
    count: int = 0
    prio: int | None = None  # kernel prio for tasks (0..99 RT, 100..139 normal)

    def label(self) -> str:
        if self.kind == "irq":
            return f"irq {self.ident} {self.name}"
        if self.kind == "softirq":
            return f"softirq {self.name}"
        if self.kind == "task":
            pr = f" {prio_text(self.prio)}" if self.prio is not None else ""
            return f"task {self.name}[{self.ident}]{pr}"
        return f"{self.kind} {self.name}".strip()

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "name": self.name,
            "id": self.ident,
            "duration_ns": self.duration_ns,
            "count": self.count,
            "prio": self.prio,
        }


def prio_text(prio: int) -> str:
    return f"rt{99 - prio}" if prio < 100 else f"nice{prio - 120}"


def fmt_ns(ns: int) -> str:
    if abs(ns) >= 1_000_000:
        return f"{ns / 1e6:.2f} ms"
    if abs(ns) >= 1_000:
        return f"{ns / 1e3:.0f} µs"
    return f"{ns} ns"


UNEXPLAINED_LABELS = {
    None: "host/hypervisor or SMI",
    True: "host/hypervisor",
    False: "SMI/firmware/hardware",
}


@dataclass
class Cause:
    """Why one spike was late. Offsets (`*_ns` of milestones) are relative to the deadline."""

    cpu: int
    deadline_ns: int
    wake_ns: int
    latency_ns: int
    tid: int | None
    source: str
    coverage: str  # full | partial | none
    timer_expire_ns: int | None = None  # the probe's hrtimer callback started
    waking_ns: int | None = None  # sched_waking of the probe thread
    wakeup_ns: int | None = None  # sched_wakeup
    switch_in_ns: int | None = None  # sched_switch to the probe thread
    idle_exit_ns: int | None = None  # cpu_idle leave after the deadline
    components: list[Component] = field(default_factory=list)
    unexplained_ns: int = 0
    accounted_ns: int = 0
    notes: list[str] = field(default_factory=list)
    virtualized: bool | None = None

    def by_kind(self, kind: str) -> list[Component]:
        return [c for c in self.components if c.kind == kind]

    def interference(self) -> list[Component]:
        """Named causes (everything except the probe's own wake path), largest first."""
        return sorted(
            (c for c in self.components if c.kind not in ("wake_path", "idle", "gap")),
            key=lambda c: -c.duration_ns,
        )

    def top(self) -> str:
        """The largest share: 'unexplained' or a component label."""
        best = max(self.interference(), key=lambda c: c.duration_ns, default=None)
        if best is None or self.unexplained_ns >= best.duration_ns:
            return "unexplained"
        return best.label()

    def summary(self, max_items: int = 4) -> str:
        parts = []
        what = UNEXPLAINED_LABELS[self.virtualized]
        items: list[tuple[int, str]] = []
        if self.unexplained_ns > 0:
            items.append(
                (self.unexplained_ns, f"{fmt_ns(self.unexplained_ns)} unexplained ({what})")
            )
        for c in self.interference():
            if c.duration_ns >= 1000 or c.duration_ns * 100 >= self.latency_ns:
                n = f" ×{c.count}" if c.count > 1 else ""
                items.append((c.duration_ns, f"{c.label()} {fmt_ns(c.duration_ns)}{n}"))
        wp = sum(c.duration_ns for c in self.by_kind("wake_path"))
        if wp * 10 >= self.latency_ns:
            items.append((wp, f"own wake path {fmt_ns(wp)}"))
        items.sort(key=lambda t: -t[0])
        parts = [t for _, t in items[:max_items]]
        if len(items) > max_items:
            parts.append(f"+{len(items) - max_items} more")
        if self.coverage == "none":
            parts = ["no trace for this window"]
        return f"{fmt_ns(self.latency_ns)}: " + (", ".join(parts) if parts else "nothing traced")

    def to_dict(self) -> dict[str, object]:
        return {
            "cpu": self.cpu,
            "deadline_ns": self.deadline_ns,
            "wake_ns": self.wake_ns,
            "latency_ns": self.latency_ns,
            "tid": self.tid,
            "source": self.source,
            "coverage": self.coverage,
            "milestones": {
                "timer_expire_ns": self.timer_expire_ns,
                "waking_ns": self.waking_ns,
                "wakeup_ns": self.wakeup_ns,
                "switch_in_ns": self.switch_in_ns,
                "idle_exit_ns": self.idle_exit_ns,
            },
            "components": [c.to_dict() for c in self.components],
            "unexplained_ns": self.unexplained_ns,
            "accounted_ns": self.accounted_ns,
            "top": self.top(),
            "summary": self.summary(),
            "notes": list(self.notes),
        }
