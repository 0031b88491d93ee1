# SPDX-License-Identifier: MIT
"""Planning of a CPU shield: which cpusets, task moves, IRQ affinities, priorities
and sysctls, as `sys apply` operations (docs/system.md).

Pure: a plan is computed from `Facts` only, so it can be tested against facts of
any machine (or a fake cgroup v2 tree) and shown before anything changes; and the
shield a journal holds is read back from its entries alone. Applying a plan is
`rtlab.system.shield_apply`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from rtlab.cpulist import format_cpulist, format_cpumask, parse_cpulist, parse_cpumask
from rtlab.errors import SkippedError, UsageError
from rtlab.system.facts import Facts, Irq, Task
from rtlab.system.shield_knobs import KnobPlan, KnobState, RuntimeKnobs, plan_knobs
from rtlab.textfmt import shown

SHIELD_NAME = "rtlab-shield"
SYSTEM_NAME = "rtlab-system"
KTHREADD_PID = 2
CGROUP_DIR = "/sys/fs/cgroup"  # the engine's `mkdir` makes cgroups below it only
WORKQUEUE_MASK = "/sys/devices/virtual/workqueue/cpumask"
RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"

Backend = Literal["v1", "v2"]
PlanKind = Literal["v1", "v2", "affinity"]


@dataclass(frozen=True)
class ThreadPriority:
    """Give threads whose name matches `pattern` (e.g. r"irq/\\d+-eth0") a policy."""

    pattern: str
    policy: str = "fifo"
    priority: int = 99


@dataclass(frozen=True)
class ShieldRequest:
    cpus: frozenset[int]
    irqs: bool = True  # move IRQs (and default_smp_affinity) off the shield
    kthreads: bool = True  # move unbound kthreads and the workqueue cpumask
    priorities: tuple[ThreadPriority, ...] = ()
    rt_runtime_us: int | None = None  # e.g. -1 to disable RT throttling
    dma_latency_us: int | None = None  # hold /dev/cpu_dma_latency (sessions only)
    backend: Backend | None = None  # None: v2 when it has cpuset, else v1
    v2_partition: str = "isolated"  # or "root"
    exclude_pids: frozenset[int] = frozenset()  # processes to leave where they are
    # affinity-only shields (plan_affinity): move task affinities off the shield, and
    # default_smp_affinity (None: with the IRQs)
    tasks: bool = True
    default_smp_affinity: bool | None = None
    # runtime knobs (rtlab.system.shield_knobs): planned from a KnobState of the target
    knobs: RuntimeKnobs = field(default_factory=RuntimeKnobs)
    system: frozenset[int] | None = None  # the system CPUs named (SMT checks; None: the rest)


@dataclass
class Plan:
    request: ShieldRequest
    backend: PlanKind
    housekeeping: frozenset[int]
    shield_cgroup: str
    system_cgroup: str | None  # v1 only
    ops: list[dict[str, Any]] = field(default_factory=list)
    required: list[int] = field(default_factory=list)  # op indexes that must succeed
    moved_tasks: list[Task] = field(default_factory=list)
    not_movable: list[Task] = field(default_factory=list)  # per-CPU kthreads
    left_alone: list[Task] = field(default_factory=list)  # in another cpuset
    moved_irqs: list[Irq] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    knobs: KnobPlan | None = None  # the runtime knobs' part, when any was asked

    def add(self, op: dict[str, Any], *, required: bool = False) -> int:
        self.ops.append(op)
        if required:
            self.required.append(len(self.ops) - 1)
        return len(self.ops) - 1

    def summary(self) -> dict[str, Any]:
        user = [t for t in self.moved_tasks if not t.kthread]
        return {
            "backend": self.backend,
            "shield_cpus": format_cpulist(self.request.cpus),
            "housekeeping_cpus": format_cpulist(self.housekeeping),
            "shield_cgroup": self.shield_cgroup,
            "tasks_moved": len(user),
            "kthreads_moved": len(self.moved_tasks) - len(user),
            "kthreads_not_movable": len(self.not_movable),
            "irqs_planned": [i.irq for i in self.moved_irqs],
            "ops": len(self.ops),
        }


def validate_priorities(priorities: Sequence[ThreadPriority]) -> None:
    """UsageError (one line) for a bad pattern, policy or priority."""
    for p in priorities:
        try:
            re.compile(p.pattern)
        except re.error as exc:
            raise UsageError(f"bad thread pattern {p.pattern!r}: {exc}") from exc
        rt = p.policy in ("fifo", "rr")
        if p.policy not in ("fifo", "rr", "other", "batch", "idle"):
            raise UsageError(f"unknown policy {p.policy!r} (fifo, rr, other, batch, idle)")
        if (rt and not 1 <= p.priority <= 99) or (not rt and p.priority != 0):
            raise UsageError(f"priority {p.priority} invalid for {p.policy} (fifo/rr: 1..99)")


def priority_ops(facts: Facts, priorities: Sequence[ThreadPriority]) -> list[dict[str, Any]]:
    """`sched` operations for every thread whose name matches a pattern (from its start)."""
    ops: list[dict[str, Any]] = []
    for prio in priorities:
        rx = re.compile(prio.pattern)
        for t in facts.tasks:
            if rx.match(t.comm):
                ops.append({"op": "sched", "tid": t.tid, "policy": prio.policy,
                            "priority": prio.priority})
    return ops


_CPU_LIST_TEXT = re.compile(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*")


def irq_move_problem(pattern: object, cpus: object) -> str | None:
    """What is wrong with an IRQ move, IRQs whose name matches `pattern` (from its start)
    to the CPU list `cpus` (checked on the target when applied): "shape" (not a
    non-empty pattern and a list like "0-1,3"), "bad pattern: WHY", or None."""
    if not isinstance(pattern, str) or not pattern or not isinstance(cpus, str) \
            or not _CPU_LIST_TEXT.fullmatch(cpus):
        return "shape"
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"bad pattern: {exc}"
    return None


def parse_thread_priority(text: str, option: str = "--thread-priority") -> ThreadPriority:
    """`PATTERN=POLICY:PRIORITY` (e.g. `irq/.*-eth0=fifo:99`) -> ThreadPriority; a
    UsageError names `option`."""
    pattern, sep, rest = text.rpartition("=")
    policy, sep2, prio = rest.partition(":")
    if (not sep or not pattern or not sep2 or not prio.strip().lstrip("-").isdigit()
            or len(prio.strip()) > 9):
        raise UsageError(f"{option} {shown(text)}: expected PATTERN=POLICY:PRIORITY, "
                         "e.g. 'irq/.*-eth0=fifo:99'")
    tp = ThreadPriority(pattern, policy.strip(), int(prio))
    try:
        validate_priorities([tp])
    except UsageError as exc:
        raise UsageError(f"{option}: {exc.message}", hint=exc.hint) from None
    return tp


def validate(facts: Facts, req: ShieldRequest) -> frozenset[int]:
    """Check a request against the target; returns the housekeeping CPUs."""
    if not req.cpus:
        raise UsageError("the shield CPU list is empty")
    missing = req.cpus - facts.cpus_online
    if missing:
        raise UsageError(
            f"CPU {format_cpulist(missing)} is not online "
            f"(online: {format_cpulist(facts.cpus_online)})"
        )
    housekeeping = facts.cpus_online - req.cpus
    if not housekeeping:
        raise UsageError(
            f"shielding all CPUs ({format_cpulist(req.cpus)}) leaves none for the system",
            hint="keep at least one CPU out of --cpus",
        )
    validate_priorities(req.priorities)
    if req.rt_runtime_us is not None and req.rt_runtime_us < -1:
        raise UsageError("sched_rt_runtime_us must be -1 or >= 0")
    if req.dma_latency_us is not None and req.dma_latency_us < 0:
        raise UsageError("cpu_dma_latency must be >= 0")
    if req.v2_partition not in ("isolated", "root"):
        raise UsageError("v2 partition must be 'isolated' or 'root'")
    return housekeeping


def choose_backend(facts: Facts, wanted: Backend | None) -> Backend:
    cg = facts.cgroup
    if wanted == "v2" or (wanted is None and cg.v2_cpuset):
        if not (cg.v2 and cg.v2_cpuset):
            raise SkippedError(
                "cgroup v2 has no cpuset controller here"
                + (f" (it is bound to the v1 hierarchy at {cg.v1_cpuset})" if cg.v1_cpuset else ""),
                hint="use the v1 backend, or boot with cgroup_no_v1=all",
            )
        return "v2"
    if not cg.v1_cpuset:
        raise SkippedError(
            "no cpuset controller is mounted (neither cgroup v1 nor v2)",
            hint="mount cgroup2 with the cpuset controller enabled",
        )
    if not (cg.v1_cpuset + "/").startswith(CGROUP_DIR + "/"):
        # a controller is bound to one hierarchy at a time: v2 has no cpuset while this
        # v1 mount holds it, and the engine makes cpusets only below /sys/fs/cgroup/
        both = f" (cgroup v2 at {cg.v2} cannot have it meanwhile)" if cg.v2 else ""
        raise SkippedError(
            f"cpuset is bound to the cgroup v1 hierarchy mounted at {cg.v1_cpuset}{both}, "
            f"outside {CGROUP_DIR}/ where rtlab makes its cpusets",
            hint=f"`umount {cg.v1_cpuset}` gives cpuset back to cgroup v2; or mount that "
                 f"hierarchy below {CGROUP_DIR}/ instead",
        )
    return "v1"


def _knob_plan(facts: Facts, req: ShieldRequest, state: KnobState | None
               ) -> tuple[KnobPlan | None, Facts]:
    """The runtime knobs' plan (None: none asked), and the facts the rest is planned
    from: SMT siblings taken offline are no CPUs of the shield's sets (a system set
    named in `req.system` must leave them out; without one, the rest is the system)."""
    if not req.knobs.asked():
        return None, facts
    if state is None:
        raise ValueError("runtime knobs need the target's KnobState")
    kp = plan_knobs(state, req.knobs, req.cpus, req.system or frozenset(), facts)
    if kp.offline:
        facts = replace(facts, cpus_online=facts.cpus_online - kp.offline)
    return kp, facts


def _with_knobs(plan: Plan, kp: KnobPlan | None) -> Plan:
    """The knobs' operations around the shield's: SMT first (restored last, after the
    cpusets are gone), the settings at the end."""
    if kp is None:
        return plan
    plan.knobs = kp
    n = len(kp.first)
    plan.ops[:0] = kp.first
    plan.required = [i + n for i in plan.required]
    plan.ops.extend(kp.ops)
    plan.notes.extend(kp.notes)
    return plan


def plan_shield(facts: Facts, req: ShieldRequest, *,
                knob_state: KnobState | None = None) -> Plan:
    """A cpuset shield (`knob_state`: the target's knob files, when `req` asks for
    runtime knobs)."""
    kp, facts = _knob_plan(facts, req, knob_state)
    housekeeping = validate(facts, req)
    backend = choose_backend(facts, req.backend)
    shield_cpus = format_cpulist(req.cpus)
    hk_cpus = format_cpulist(housekeeping)
    if backend == "v1":
        root = facts.cgroup.v1_cpuset
        assert root is not None
        plan = Plan(req, backend, housekeeping, f"{root}/{SHIELD_NAME}", f"{root}/{SYSTEM_NAME}")
        _plan_v1(plan, facts, root, shield_cpus, hk_cpus)
    else:
        root = facts.cgroup.v2
        assert root is not None
        plan = Plan(req, backend, housekeeping, f"{root}/{SHIELD_NAME}", None)
        _plan_v2(plan, facts, root, shield_cpus)
    if req.irqs:
        _plan_irqs(plan, facts, req.cpus, housekeeping)
    _plan_tail(plan, facts, req)
    return _with_knobs(plan, kp)


def plan_affinity(facts: Facts, req: ShieldRequest, system: frozenset[int], *,
                  knob_state: KnobState | None = None) -> Plan:
    """A shield without cpusets (the MBDA steps "tasks to CPU 0", "+ IRQs"): affinities
    only. Every movable task that may run on a shielded CPU gets the `system` CPUs;
    IRQs that are not kernel-managed and default_smp_affinity likewise. Tasks forked
    later inherit their parent's affinity (unlike a cpuset, nothing catches them; kthreadd
    is moved too, so new kernel threads start on the system CPUs)."""
    dsa = req.irqs if req.default_smp_affinity is None else req.default_smp_affinity
    kp, facts = _knob_plan(facts, req, knob_state)
    if kp is not None and req.system is None:
        system = system - kp.offline
    if req.tasks or req.irqs or dsa:  # what moves needs two sets; priorities alone do not
        validate(facts, req)
        if not system:
            raise UsageError("the system CPU list is empty")
        if system & req.cpus:
            raise UsageError(f"system CPUs {format_cpulist(system)} overlap the shielded "
                             f"CPUs {format_cpulist(req.cpus)}")
        missing = system - facts.cpus_online
        if missing:
            raise UsageError(f"system CPU {format_cpulist(missing)} is not online "
                             f"(online: {format_cpulist(facts.cpus_online)})")
    plan = Plan(req, "affinity", system, "", None)
    if req.tasks:
        for t in facts.tasks:
            if t.per_cpu or (t.kthread and not req.kthreads):
                continue
            if t.pid in req.exclude_pids:
                plan.left_alone.append(t)
                continue
            if t.affinity & req.cpus:
                plan.add({"op": "affinity", "tid": t.tid, "cpus": sorted(system)})
                plan.moved_tasks.append(t)
    if req.irqs or dsa:  # kernel-managed IRQs refuse the write: not planned
        _plan_irqs(plan, facts, req.cpus, system, skip_managed=True, default_affinity=dsa,
                   only_default=not req.irqs)
    _plan_tail(plan, facts, req)
    return _with_knobs(plan, kp)


def _plan_tail(plan: Plan, facts: Facts, req: ShieldRequest) -> None:
    """Thread priorities, RT throttling and the DMA latency hold: common to all plans."""
    for op in priority_ops(facts, req.priorities):
        plan.add(op)
    if req.rt_runtime_us is not None:
        plan.add(
            {"op": "write", "path": RT_RUNTIME, "value": str(req.rt_runtime_us)}, required=True
        )
    if req.dma_latency_us is not None:
        plan.add(
            {"op": "hold", "path": "/dev/cpu_dma_latency", "value": req.dma_latency_us},
            required=True,
        )


def _plan_v1(plan: Plan, facts: Facts, root: str, shield_cpus: str, hk_cpus: str) -> None:
    mems = facts.cgroup.v1_mems or "0"
    system, shield = plan.system_cgroup, plan.shield_cgroup
    assert system is not None
    for op in (
        {"op": "mkdir", "path": system},
        {"op": "write", "path": f"{system}/cpuset.cpus", "value": hk_cpus},
        {"op": "write", "path": f"{system}/cpuset.mems", "value": mems},
        {"op": "mkdir", "path": shield},
        {"op": "write", "path": f"{shield}/cpuset.cpus", "value": shield_cpus},
        {"op": "write", "path": f"{shield}/cpuset.mems", "value": mems},
        {"op": "write", "path": f"{shield}/cpuset.cpu_exclusive", "value": "1"},
        {"op": "write", "path": f"{shield}/cpuset.sched_load_balance", "value": "0"},
        # The root must stop balancing across all CPUs for the shield to be a
        # scheduling domain of its own (restored from the journal).
        {"op": "write", "path": f"{root}/cpuset.sched_load_balance", "value": "0"},
    ):
        plan.add(op, required=True)
    plan.ops.extend(move_ops(plan, facts))
    if plan.request.kthreads and facts.workqueue_cpumask is not None:
        want = format_cpumask(plan.housekeeping)
        if frozenset(parse_cpumask(facts.workqueue_cpumask)) != plan.housekeeping:
            plan.add({"op": "write", "path": WORKQUEUE_MASK, "value": want})


def move_ops(plan: Plan, facts: Facts) -> list[dict[str, Any]]:
    """v1: one `move` per task still in the root cpuset (call again after
    applying, with fresh facts, to catch tasks forked meanwhile)."""
    ops: list[dict[str, Any]] = []
    target = plan.system_cgroup
    if plan.backend != "v1" or target is None:
        return ops
    known = {t.tid for t in plan.not_movable}
    for t in facts.tasks:
        # kthreadd (pid 2) is refused by every cgroup (EINVAL): report, don't try
        if t.per_cpu or (t.kthread and t.pid == KTHREADD_PID):
            if t.kthread and t.tid not in known:
                plan.not_movable.append(t)
                known.add(t.tid)
            continue
        if t.kthread and not plan.request.kthreads:
            continue
        if not t.kthread and not plan.request.tasks:  # `tasks = false`: user tasks stay
            continue
        if t.pid in plan.request.exclude_pids:
            if t not in plan.left_alone:
                plan.left_alone.append(t)
            continue
        where = t.cgroups.get("cpuset")
        if where is None:
            continue
        if where != "/":
            if where.lstrip("/") not in (SHIELD_NAME, SYSTEM_NAME) and t not in plan.left_alone:
                plan.left_alone.append(t)
            continue
        ops.append({"op": "move", "tid": t.tid, "cgroup": target})
        plan.moved_tasks.append(t)
    return ops


def _plan_v2(plan: Plan, facts: Facts, root: str, shield_cpus: str) -> None:
    # Removing a partition gives every task of the other cgroups the whole CPU set again,
    # whatever its affinity was (the kernel resets it). So every task's affinity as it is
    # now is journaled first (setting it is a no-op): restore runs in reverse order, and
    # sets each back after the partition is gone (first seen on a PREEMPT_RT board: the
    # irq/N threads, pinned to their IRQ's effective CPU, came back unpinned).
    for t in facts.tasks:
        if not t.per_cpu and t.affinity:
            plan.add({"op": "affinity", "tid": t.tid, "cpus": sorted(t.affinity)})
    subtree = (facts.cgroup.v2_subtree_control or "").split()
    if "cpuset" not in subtree:
        plan.add(
            {
                "op": "write",
                "path": f"{root}/cgroup.subtree_control",
                "value": "+cpuset",
                "undo": "-cpuset",
            },
            required=True,
        )
    shield = plan.shield_cgroup
    for op in (
        {"op": "mkdir", "path": shield},
        {"op": "write", "path": f"{shield}/cpuset.cpus", "value": shield_cpus},
        {
            "op": "write",
            "path": f"{shield}/cpuset.cpus.partition",
            "value": plan.request.v2_partition,
        },
    ):
        plan.add(op, required=True)
    plan.notes.append(
        "cgroup v2: the partition takes the shielded CPUs away from every other cgroup, "
        "so the kernel moves the tasks; none are moved one by one"
    )
    if not plan.request.tasks:
        plan.notes.append(
            "cgroup v2: tasks = false cannot be honoured with a cpuset partition: the "
            "kernel moves every task off the shielded CPUs (use cpuset = false to leave "
            "user tasks where they are)"
        )
    for t in facts.tasks:
        if t.per_cpu and t.kthread:
            plan.not_movable.append(t)
        elif (t.kthread and not t.per_cpu and plan.request.kthreads) or not t.kthread:
            plan.moved_tasks.append(t)
    wq = facts.workqueue_cpumask
    if (plan.request.kthreads and wq is not None
            and frozenset(parse_cpumask(wq)) != plan.housekeeping):
        plan.add({"op": "write", "path": WORKQUEUE_MASK,
                  "value": format_cpumask(plan.housekeeping)})


def _plan_irqs(plan: Plan, facts: Facts, shield: frozenset[int], hk: frozenset[int], *,
               skip_managed: bool = False, default_affinity: bool = True,
               only_default: bool = False) -> None:
    hk_list = format_cpulist(hk)
    for irq in [] if only_default else facts.irqs:
        if irq.affinity is None or not (irq.affinity & shield):
            continue
        if skip_managed and irq.managed:
            continue
        plan.add(
            {"op": "write", "path": f"/proc/irq/{irq.irq}/smp_affinity_list", "value": hk_list}
        )
        plan.moved_irqs.append(irq)
    dflt = facts.default_smp_affinity
    if default_affinity and dflt is not None and frozenset(parse_cpumask(dflt)) & shield:
        plan.add(
            {"op": "write", "path": "/proc/irq/default_smp_affinity", "value": format_cpumask(hk)}
        )


IRQ_PATH = re.compile(r"^/proc/irq/(\d+)/smp_affinity_list$")


def refused_irqs(ops: list[dict[str, Any]], answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """IRQs whose affinity write was refused (kernel-managed: EIO/EPERM)."""
    out = []
    for op, ans in zip(ops, answers, strict=True):
        m = IRQ_PATH.match(str(op.get("path", "")))
        if m and not ans.get("ok"):
            out.append(
                {"irq": int(m.group(1)), "errno": ans.get("errno"), "error": ans.get("error")}
            )
    return out


def shield_from_journal(entries: list[dict[str, Any]]) -> tuple[frozenset[int], str, str] | None:
    """(cpus, backend, cgroup) of the shield a journal created, or None."""

    backend = "v1"
    found: tuple[str, str] | None = None
    for e in entries:
        p = str(e.get("path", ""))
        if p.endswith(f"/{SHIELD_NAME}/cpuset.cpus"):
            found = (p.rsplit("/", 1)[0], str(e.get("value", "")))
        if p.endswith(f"/{SHIELD_NAME}/cpuset.cpus.partition"):
            backend = "v2"
    if found is None:
        return None
    return frozenset(parse_cpulist(found[1], strides=True)), backend, found[0]


def run_shield_cpus(entries: list[dict[str, Any]], online: frozenset[int]
                     ) -> tuple[frozenset[int], str, str | None] | None:
    """(cpus, backend, cgroup) of the shield a run's journal holds: its cpuset, or for
    a shield without cpusets the CPUs its IRQ and task affinities were moved off."""

    found = shield_from_journal(entries)
    if found is not None:
        return found
    system: set[int] = set()
    for e in entries:
        path = str(e.get("path", ""))
        if e.get("op") == "write" and IRQ_PATH.match(path):
            system |= set(parse_cpulist(str(e.get("value", "")), strides=True))
        elif e.get("op") == "write" and path == "/proc/irq/default_smp_affinity":
            system |= set(parse_cpumask(str(e.get("value", ""))))
        elif e.get("op") == "affinity" and isinstance(e.get("cpus"), list):
            system |= {int(c) for c in e["cpus"]}
    if not system or not online - system:
        return None
    return frozenset(online - system), "none", None
