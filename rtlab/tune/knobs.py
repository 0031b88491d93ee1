# SPDX-License-Identifier: MIT
"""The catalogue of knobs `rtlab tune` may turn, each declared once (docs/tune.md).

A knob says what it changes, how (runtime knobs are fields of the scenario's
`[shield]` table, applied and restored by the runner's journaled shield, locally and
on boards; boot knobs are kernel command-line parameters, booted once through the
reboot interface), what it needs on the target (`requires`: checked from the target's
own files before the tune starts; a knob the target lacks is skipped and named), what
it costs (CPUs given up, power, security), which doctor findings propose it, and which
other knobs it works with (re-tested on top of each other: isolcpus with nohz_full).

Placeholders in values: `{user}` the measured (shielded) CPUs, `{system}` the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from rtlab.cpulist import format_cpulist
from rtlab.errors import UsageError
from rtlab.scenario.model import ShieldSpec
from rtlab.system.sysroot import SysRoot

Kind = Literal["runtime", "boot"]

# What a knob can need of the target; each is checked by `missing()` below.
REQUIREMENTS = ("two-cpus", "cpuset", "cpufreq", "cpuidle", "smt", "thp", "numa",
                "timer-migration", "watchdog", "irq-threads", "rt-throttling", "nohz-full",
                "stat-interval")


@dataclass(frozen=True)
class Knob:
    name: str
    kind: Kind
    title: str
    changes: str  # what it changes on the target, in words
    shield: Mapping[str, Any] = field(default_factory=dict)  # runtime: [shield] fields
    boot: Mapping[str, str | None] = field(default_factory=dict)  # boot: parameters
    requires: tuple[str, ...] = ()
    cost: str = ""
    gives_up_cpus: bool = False  # the measured CPUs serve nothing else afterwards
    proposed_by: tuple[str, ...] = ()  # doctor finding codes (rtlab.system.doctor.Code)
    partners: tuple[str, ...] = ()  # knobs it works with (re-tested on top of them)
    default: bool = True  # in the default candidate set
    seeds: str = ""  # where the seeds or the tuning guides name it

    def boot_params(self, user: Sequence[int], system: Sequence[int]) -> dict[str, str | None]:
        return {k: (None if v is None else _fill(v, user, system)) for k, v in self.boot.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "title": self.title,
                "changes": self.changes, "shield": dict(self.shield),
                "boot": dict(self.boot), "requires": list(self.requires), "cost": self.cost,
                "gives_up_cpus": self.gives_up_cpus, "proposed_by": list(self.proposed_by),
                "partners": list(self.partners), "default": self.default}


def _fill(v: str, user: Sequence[int], system: Sequence[int]) -> str:
    return v.replace("{user}", format_cpulist(user)).replace("{system}", format_cpulist(system))


# Network IRQ threads: what the AMSC and UDP seeds raise above the application.
NET_IRQ_THREADS = r"irq/\d+-(eth|en|eno|ens|enp|wl|virtio|mlx|ixgbe|igb|i40e|stmmac|fec).*"

CATALOGUE: tuple[Knob, ...] = (
    # ---- runtime knobs: [shield] fields -------------------------------------------------
    Knob("cpuset-shield", "runtime", "cpuset shield of the measured CPUs",
         "an exclusive cpuset for the measured CPUs; every movable task goes to the others",
         shield={"cpuset": True, "tasks": True}, requires=("two-cpus", "cpuset"),
         cost="the measured CPUs run only the real-time work", gives_up_cpus=True,
         proposed_by=("no-isolation", "measured-cpus-not-isolated"),
         partners=("irq-affinity", "kthreads"),
         seeds="AMSC and MBDA (cset shield); Enea's partitioning classes"),
    Knob("irq-affinity", "runtime", "IRQ affinity away from the measured CPUs",
         "every movable IRQ and /proc/irq/default_smp_affinity to the other CPUs",
         shield={"irqs": True, "default_smp_affinity": True}, requires=("two-cpus",),
         cost="the other CPUs serve every interrupt", proposed_by=("irq-on-isolated",
                                                                   "irqbalance-running"),
         partners=("cpuset-shield",),
         seeds="AMSC (IRQs to the last CPU), MBDA (IRQ migration)"),
    Knob("kthreads", "runtime", "kernel thread and workqueue affinity",
         "unbound kernel threads and the workqueue cpumask to the other CPUs",
         shield={"tasks": True, "kthreads": True}, requires=("two-cpus",),
         cost="kernel housekeeping runs only on the other CPUs",
         proposed_by=("workqueue-on-isolated", "measured-cpus-not-isolated"),
         partners=("cpuset-shield",), seeds="MBDA (affinity), tuned realtime profile"),
    Knob("rt-throttling-off", "runtime", "RT throttling off",
         "kernel.sched_rt_runtime_us = -1: real-time tasks may use 100 % of a CPU",
         shield={"sched_rt_runtime_us": -1}, requires=("rt-throttling",),
         cost="a runaway real-time task can starve its CPU for good",
         proposed_by=("rt-throttling",), seeds="tuned realtime profile, rt-tests docs"),
    Knob("dma-latency", "runtime", "cpu_dma_latency 0 (PM QoS)",
         "holds /dev/cpu_dma_latency at 0 µs: no CPU enters an idle state with exit latency",
         shield={"dma_latency": 0}, requires=("cpuidle",),
         cost="power: no CPU sleeps deeply while the hold lasts",
         proposed_by=("deep-idle-states",), seeds="cyclictest's default, tuned"),
    Knob("idle-states", "runtime", "deep idle states disabled on the measured CPUs",
         "every cpuidle state with an exit latency above 0 µs disabled on the measured CPUs",
         shield={"idle_max_latency_us": 0}, requires=("cpuidle",),
         cost="power: the measured CPUs poll when idle",
         proposed_by=("deep-idle-states",), partners=("dma-latency",),
         seeds="GSI (idle kernel parameter: 100 µs against 80 µs)"),
    Knob("governor", "runtime", "cpufreq governor performance",
         "the measured CPUs' scaling_governor = performance",
         shield={"governor": "performance"}, requires=("cpufreq",),
         cost="power: the measured CPUs run at full speed",
         proposed_by=("cpufreq-governor-not-performance",), partners=("min-freq",),
         seeds="tuned realtime profile"),
    Knob("min-freq", "runtime", "minimum frequency at the maximum",
         "the measured CPUs' scaling_min_freq = cpuinfo_max_freq",
         shield={"min_freq": "max"}, requires=("cpufreq",),
         cost="power: no frequency scaling on the measured CPUs",
         proposed_by=("cpufreq-governor-not-performance",), partners=("governor",)),
    Knob("smt-off", "runtime", "SMT siblings offline",
         "the SMT siblings of the measured CPUs offline",
         shield={"smt": False}, requires=("smt",),
         cost="the siblings' CPUs are given up", gives_up_cpus=True,
         proposed_by=("smt-sibling-busy", "smt-active"),
         seeds="GSI (hyperthreading on and off)"),
    Knob("timer-migration-off", "runtime", "timer migration off",
         "kernel.timer_migration = 0: timers stay on the CPU that armed them",
         shield={"timer_migration": False}, requires=("timer-migration",),
         proposed_by=("timer-migration",), seeds="tuned realtime profile"),
    Knob("watchdogs-off", "runtime", "soft and NMI watchdogs off",
         "kernel.watchdog = 0: no periodic watchdog work on any CPU",
         shield={"watchdogs": False}, requires=("watchdog",),
         cost="lockups are no longer detected", proposed_by=("nmi-watchdog", "soft-watchdog"),
         seeds="tuned realtime profile (nmi_watchdog=0)"),
    Knob("stat-interval", "runtime", "vm statistics every 10 s",
         "vm.stat_interval = 10: the per-CPU vmstat work runs every 10 s instead of 1 s",
         shield={"vm_stat_interval": 10}, requires=("stat-interval",),
         cost="memory statistics up to 10 s stale", seeds="tuned realtime profile"),
    Knob("net-irq-priority", "runtime", "network IRQ threads at FIFO 98",
         "the network interrupts' threads at SCHED_FIFO 98, above the load and below the "
         "measured thread",
         shield={"thread_priorities": ((NET_IRQ_THREADS, "fifo", 98),)},
         requires=("irq-threads",), cost="network interrupts pre-empt other RT work",
         seeds="AMSC and the UDP seed (IRQ thread priorities)"),
    Knob("thp-never", "runtime", "transparent huge pages off",
         "transparent_hugepage/enabled = never: no khugepaged collapses, no huge-page faults",
         shield={"thp": "never"}, requires=("thp",), proposed_by=("thp-always",),
         seeds="tuned realtime profile"),
    Knob("numa-balancing-off", "runtime", "NUMA balancing off",
         "kernel.numa_balancing = 0: no page-migration scans",
         shield={"numa_balancing": False}, requires=("numa",),
         proposed_by=("numa-balancing",), seeds="tuned realtime profile"),
    # ---- boot knobs: kernel command line --------------------------------------------------
    Knob("isolcpus", "boot", "isolcpus on the measured CPUs",
         "isolcpus=managed_irq,domain,{user}: no load balancing onto the measured CPUs, "
         "managed IRQs kept away", boot={"isolcpus": "managed_irq,domain,{user}"},
         requires=("two-cpus",), cost="the measured CPUs run only tasks pinned there",
         gives_up_cpus=True, proposed_by=("no-isolation", "isolation-not-in-effect"),
         partners=("nohz_full", "rcu_nocbs"), seeds="MBDA (isolcpus), every RT guide"),
    Knob("nohz_full", "boot", "nohz_full on the measured CPUs",
         "nohz_full={user}: no periodic tick while one task runs",
         boot={"nohz_full": "{user}"}, requires=("two-cpus", "nohz-full"),
         proposed_by=("no-nohz-full",), partners=("isolcpus", "rcu_nocbs"),
         seeds="tuned realtime profile, OpenShift performance profile"),
    Knob("rcu_nocbs", "boot", "RCU callbacks off the measured CPUs",
         "rcu_nocbs={user}: RCU callbacks run in kthreads on the other CPUs",
         boot={"rcu_nocbs": "{user}"}, requires=("two-cpus",),
         partners=("nohz_full", "isolcpus"), seeds="tuned realtime profile"),
    Knob("irqaffinity", "boot", "default IRQ affinity at boot",
         "irqaffinity={system}: interrupts start on the other CPUs",
         boot={"irqaffinity": "{system}"}, requires=("two-cpus",),
         proposed_by=("irq-on-isolated",), partners=("isolcpus",)),
    Knob("idle-poll", "boot", "idle=poll", "idle=poll: idle CPUs poll, never sleep",
         boot={"idle": "poll"}, cost="power: every CPU polls when idle (heat)",
         proposed_by=("deep-idle-states",), seeds="GSI (the idle kernel parameter)"),
    Knob("max-cstate", "boot", "C-states limited at boot",
         "processor.max_cstate=1 intel_idle.max_cstate=0",
         boot={"processor.max_cstate": "1", "intel_idle.max_cstate": "0"},
         cost="power: no deep C-states", proposed_by=("deep-idle-states",)),
    Knob("nosmt", "boot", "SMT off at boot", "nosmt: one thread per core",
         boot={"nosmt": None}, requires=("smt",), cost="half the hardware threads",
         gives_up_cpus=True, proposed_by=("smt-active", "smt-sibling-busy"),
         seeds="GSI (hyperthreading)"),
    Knob("skew_tick", "boot", "skewed ticks", "skew_tick=1: CPUs' ticks do not fire at once",
         boot={"skew_tick": "1"}, seeds="tuned realtime profile"),
    Knob("nowatchdog", "boot", "watchdogs off at boot", "nowatchdog nmi_watchdog=0",
         boot={"nowatchdog": None, "nmi_watchdog": "0"}, cost="lockups are not detected",
         proposed_by=("nmi-watchdog", "soft-watchdog"), seeds="tuned realtime profile"),
)

BY_NAME: dict[str, Knob] = {k.name: k for k in CATALOGUE}


def select(names: str | None, *, boot: bool) -> list[Knob]:
    """The candidates: `--knobs a,b,...` (any of the catalogue), else every default
    runtime knob, and the default boot knobs when a reboot interface is given.
    UsageError (one line) for an unknown name, a boot knob without a reboot command,
    or a name given twice."""
    if names is None:
        return [k for k in CATALOGUE if k.default and (k.kind == "runtime" or boot)]
    out: list[Knob] = []
    for raw in names.split(","):
        name = raw.strip()
        if not name:
            raise UsageError(f"--knobs {names[:60]!r}: an empty name",
                             hint="e.g. --knobs cpuset-shield,irq-affinity")
        knob = BY_NAME.get(name)
        if knob is None:
            raise UsageError(f"--knobs: unknown knob {name[:60]!r}",
                             hint="`rtlab tune --list-knobs` lists them")
        if knob in out:
            raise UsageError(f"--knobs: knob {name!r} given twice")
        if knob.kind == "boot" and not boot:
            raise UsageError(f"--knobs: knob {name!r} changes the kernel command line: it needs a "
                             "reboot interface", hint="give --reboot-cmd CMD (docs/tune.md)")
        out.append(knob)
    return out


# ---- what the target has ------------------------------------------------------------------
def _cpu_has(root: SysRoot, cpus: Iterable[int], rel: str) -> bool:
    return all(root.exists(f"sys/devices/system/cpu/cpu{c}/{rel}") for c in cpus)


def _siblings(root: SysRoot, cpu: int) -> list[int]:
    return root.cpulist(f"sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") or []


def missing(knob: Knob, root: SysRoot, user: Sequence[int], system: Sequence[int]
            ) -> str | None:
    """Why the target cannot have this knob (None: it can), from its own files."""
    for req in knob.requires:
        why = _missing(req, root, user, system)
        if why:
            return why
    return None


def _missing(req: str, root: SysRoot, user: Sequence[int], system: Sequence[int]
             ) -> str | None:
    if req == "two-cpus":
        return None if system and set(system).isdisjoint(user) else \
            "needs at least one CPU besides the measured ones"
    if req == "cpuset":
        v2 = root.read("sys/fs/cgroup/cgroup.controllers") or ""
        if "cpuset" in v2.split() or root.exists("sys/fs/cgroup/cpuset/cpuset.cpus"):
            return None
        return "no cgroup cpuset controller (v1 or v2)"
    if req == "cpufreq":
        return None if _cpu_has(root, user, "cpufreq/scaling_governor") else \
            "no cpufreq on the measured CPUs"
    if req == "cpuidle":
        # state0 is polling on x86; an idle knob matters only where a state can sleep
        return None if _cpu_has(root, user, "cpuidle/state1/latency") else \
            "no cpuidle states beyond polling on the measured CPUs"
    if req == "smt":
        if any(len(_siblings(root, c)) > 1 for c in user):
            return None
        return "no SMT siblings of the measured CPUs"
    if req == "thp":
        return None if root.exists("sys/kernel/mm/transparent_hugepage/enabled") else \
            "no transparent huge pages"
    if req == "numa":
        return None if root.exists("proc/sys/kernel/numa_balancing") else \
            "no NUMA balancing (kernel.numa_balancing)"
    if req == "timer-migration":
        return None if root.exists("proc/sys/kernel/timer_migration") else \
            "no kernel.timer_migration"
    if req == "watchdog":
        return None if root.exists("proc/sys/kernel/watchdog") else "no kernel.watchdog"
    if req == "stat-interval":
        return None if root.exists("proc/sys/vm/stat_interval") else "no vm.stat_interval"
    if req == "rt-throttling":
        v = root.read("proc/sys/kernel/sched_rt_runtime_us")
        if v is None:
            return "no kernel.sched_rt_runtime_us"
        return None
    if req == "irq-threads":
        import re

        if any(re.fullmatch(NET_IRQ_THREADS, comm) for _, comm in root.processes()):
            return None
        return ("no threaded network interrupt (irq/N-eth0 ...: PREEMPT_RT or threadirqs, "
                "and a network device whose interrupt has a thread)")
    if req == "nohz-full":
        config, _ = root.kconfig()
        if config and config.get("CONFIG_NO_HZ_FULL") != "y":
            return "the kernel is built without CONFIG_NO_HZ_FULL"
        return None
    raise ValueError(f"unknown requirement {req!r}")


def already(knob: Knob, root: SysRoot, shield: ShieldSpec | None, user: Sequence[int],
            system: Sequence[int]) -> str | None:
    """Why this knob is in effect already without the tune (the scenario's own shield,
    or the target's settings), else None."""
    if knob.kind == "boot":
        cmdline = root.cmdline()
        want = knob.boot_params(user, system)
        if all(k in cmdline and (v is None or cmdline[k] == v) for k, v in want.items()):
            return "already on the kernel command line"
        return None
    if shield is not None:
        have = shield.to_dict()
        if all(_same(have.get(k), v) for k, v in knob.shield.items()):
            return "already in the scenario's [shield]"
    checks = {
        "rt-throttling-off": ("proc/sys/kernel/sched_rt_runtime_us", "-1"),
        "timer-migration-off": ("proc/sys/kernel/timer_migration", "0"),
        "watchdogs-off": ("proc/sys/kernel/watchdog", "0"),
        "numa-balancing-off": ("proc/sys/kernel/numa_balancing", "0"),
    }
    if knob.name in checks:
        rel, value = checks[knob.name]
        if (root.read(rel) or "").strip() == value:
            return f"already {value} on the target"
    if knob.name == "governor" and user and all(
            (root.read(f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor") or "")
            .strip() == "performance" for c in user):
        return "the measured CPUs run the performance governor already"
    return None


def _same(have: Any, want: Any) -> bool:
    if isinstance(want, tuple):
        return list(map(list, want)) == [list(x.values()) if isinstance(x, dict) else list(x)
                                         for x in (have or [])]
    return bool(have == want)


# ---- a configuration: a set of knobs ------------------------------------------------------
def label(knobs: Iterable[str]) -> str:
    """A configuration's name: "baseline", or its knobs in catalogue order joined by +."""
    names = order(knobs)
    return "+".join(names) if names else "baseline"


def order(knobs: Iterable[str]) -> list[str]:
    wanted = set(knobs)
    return [k.name for k in CATALOGUE if k.name in wanted]


def runtime_shield(base: ShieldSpec | None, knobs: Iterable[str], user: Sequence[int],
                   system: Sequence[int]) -> ShieldSpec | None:
    """The scenario's shield with the runtime knobs' fields set (a shield of its own,
    with the scenario's CPU sets, when the scenario has none and a knob needs one)."""
    fields: dict[str, Any] = {}
    priorities: list[tuple[str, str, int]] = []
    for name in order(knobs):
        k = BY_NAME[name]
        if k.kind != "runtime":
            continue
        for key, value in k.shield.items():
            if key == "thread_priorities":
                priorities += list(value)
            else:
                fields[key] = value
    if not fields and not priorities:
        return base
    if base is None:
        # no shield in the scenario: one that moves nothing but what the knobs ask
        base = ShieldSpec(tuple(system), tuple(user), cpuset=False, tasks=False)
    if priorities:
        fields["thread_priorities"] = tuple(base.thread_priorities) + tuple(priorities)
    try:
        return replace(base, **fields)
    except TypeError as exc:  # a field this build's [shield] does not have
        raise UsageError(f"this rtlab's [shield] cannot set {exc}") from None


def boot_params(knobs: Iterable[str], user: Sequence[int], system: Sequence[int]
                ) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in order(knobs):
        k = BY_NAME[name]
        if k.kind == "boot":
            out.update(k.boot_params(user, system))
    return out


def proposals(findings: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """knob name -> the doctor findings (their titles) that propose it."""
    out: dict[str, list[str]] = {}
    for f in findings:
        if f.get("severity") == "ok":
            continue
        codes = set(f.get("codes") or [])
        for k in CATALOGUE:
            if codes & set(k.proposed_by):
                out.setdefault(k.name, []).append(str(f.get("title") or f.get("check")))
    return out
