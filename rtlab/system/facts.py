# SPDX-License-Identifier: MIT
"""Facts about a target read by `rtlab-probe sys facts` (docs/sys-protocol.md).

The planner (`shield.py`) and the verifier (`verify.py`) work on these, never on
the local /proc directly, so the same code plans a shield for a remote board.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from rtlab.cpulist import format_cpulist, parse_cpulist
from rtlab.errors import RtlabError, UsageError

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

SCHEMA = 1
T = TypeVar("T")


@dataclass(frozen=True)
class Task:
    pid: int
    tid: int
    comm: str
    kthread: bool
    per_cpu: bool  # PF_NO_SETAFFINITY: cannot be moved
    starttime: int
    affinity: frozenset[int]
    policy: str
    priority: int
    cgroups: dict[str, str] = field(hash=False, compare=False)

    @property
    def label(self) -> str:
        return f"{self.comm}[{self.tid}]"


@dataclass(frozen=True)
class Irq:
    irq: int
    name: str | None
    affinity: frozenset[int] | None
    effective: frozenset[int] | None
    managed: bool | None
    threaded_pid: int | None
    counts: tuple[int, ...] | None


@dataclass(frozen=True)
class Cpuset:
    """A cpuset directly below a cpuset hierarchy's root, as the target's engine read
    it (a shield's own are there): its files' text, None where one was unreadable."""

    hierarchy: str  # "v1" | "v2"
    path: str
    cpus: str | None
    cpus_effective: str | None
    partition: str | None  # v2 only


@dataclass(frozen=True)
class CgroupFacts:
    v1_cpuset: str | None
    v2: str | None
    v2_cpuset: bool
    v2_partition: bool
    v1_mems: str | None = None
    v2_subtree_control: str | None = None
    # the cpusets below the roots; None: the engine did not say (an older one)
    cpusets: tuple[Cpuset, ...] | None = None

    def cpuset(self, path: str) -> Cpuset | None:
        """The cpuset at `path` on the target, None when there is none (or unknown)."""
        path = path.rstrip("/")
        return next((c for c in self.cpusets or () if c.path == path), None)


@dataclass(frozen=True)
class Facts:
    cpus_online: frozenset[int]
    cpus_possible: frozenset[int]
    cpus_isolated: frozenset[int]
    tasks: tuple[Task, ...]
    irqs: tuple[Irq, ...]
    default_smp_affinity: str | None
    workqueue_cpumask: str | None
    cgroup: CgroupFacts
    sysctl: dict[str, int | None]

    def task(self, tid: int) -> Task | None:
        for t in self.tasks:
            if t.tid == tid:
                return t
        return None


def _cpus(v: Any) -> frozenset[int] | None:
    return None if v is None else frozenset(int(c) for c in v)


def parse_facts(obj: dict[str, Any]) -> Facts:
    """Build Facts from the decoded JSON object; refuse other types or schemas."""
    if obj.get("type") != "facts" or obj.get("schema") != SCHEMA:
        raise RtlabError(
            f"unexpected facts record (type={obj.get('type')!r}, schema={obj.get('schema')!r})",
            hint="rtlab and rtlab-probe versions differ; reinstall both",
        )
    tasks = tuple(
        Task(
            pid=int(t["pid"]),
            tid=int(t["tid"]),
            comm=str(t["comm"]),
            kthread=bool(t["kthread"]),
            per_cpu=bool(t["per_cpu"]),
            starttime=int(t.get("starttime") or 0),
            affinity=_cpus(t.get("affinity")) or frozenset(),
            policy=str(t.get("policy", "other")),
            priority=int(t.get("priority") or 0),
            cgroups=dict(t.get("cgroups") or {}),
        )
        for t in obj.get("tasks", [])
    )
    irqs = tuple(
        Irq(
            irq=int(i["irq"]),
            name=i.get("name"),
            affinity=_cpus(i.get("affinity")),
            effective=_cpus(i.get("effective")),
            managed=i.get("managed"),
            threaded_pid=i.get("threaded_pid"),
            counts=None if i.get("counts") is None else tuple(int(c) for c in i["counts"]),
        )
        for i in obj.get("irqs", [])
    )
    cg = obj.get("cgroup") or {}
    return Facts(
        cpus_online=_cpus(obj.get("cpus_online")) or frozenset(),
        cpus_possible=_cpus(obj.get("cpus_possible")) or frozenset(),
        cpus_isolated=_cpus(obj.get("cpus_isolated")) or frozenset(),
        tasks=tasks,
        irqs=irqs,
        default_smp_affinity=obj.get("default_smp_affinity"),
        workqueue_cpumask=obj.get("workqueue_cpumask"),
        cgroup=CgroupFacts(
            v1_cpuset=cg.get("v1_cpuset"),
            v2=cg.get("v2"),
            v2_cpuset=bool(cg.get("v2_cpuset")),
            v2_partition=bool(cg.get("v2_partition")),
            v1_mems=cg.get("v1_mems"),
            v2_subtree_control=cg.get("v2_subtree_control"),
            cpusets=None if cg.get("cpusets") is None else tuple(
                Cpuset(hierarchy=str(c["hierarchy"]), path=str(c["path"]),
                       cpus=c.get("cpus"), cpus_effective=c.get("cpus_effective"),
                       partition=c.get("partition"))
                for c in cg["cpusets"]),
        ),
        sysctl=dict(obj.get("sysctl") or {}),
    )


def read_facts(transport: Transport, timeout_s: float = 30.0) -> Facts:
    """`rtlab-probe sys facts` on the transport's target."""
    proc = transport.run(["sys", "facts"], timeout_s=timeout_s)
    if proc.returncode != 0:
        raise RtlabError(f"`sys facts` failed: {proc.stderr.strip() or proc.returncode}")
    try:
        return parse_facts(json.loads(proc.stdout))
    except (ValueError, KeyError, TypeError) as exc:
        raise RtlabError(
            f"`sys facts` printed something that is not a facts record: {exc}"
        ) from exc


@dataclass(frozen=True)
class Preemption:
    """The kernel's preemption model as `rtlab-probe sys preempt` decides it: the same
    decision that writes `system.preempt` into every probe's header, so the doctor and
    the run's provenance cannot disagree (docs/engine-output.md#preemption-model)."""

    model: str  # rt | full | lazy | voluntary | none | unknown
    source: str | None  # where it was read, e.g. "/proc/cmdline (preempt=full)"
    dynamic: bool | None  # PREEMPT_DYNAMIC kernel (None: unknown)
    live_error: str | None  # dynamic only: why debugfs sched/preempt was not read
    version: str | None  # uname -v
    realtime: str | None  # /sys/kernel/realtime as read
    config: str | None  # where the kernel config was read

    @property
    def described(self) -> str:
        """The model, where it came from and, if so, why the live mode was not read."""
        how = f"{self.model} (from {self.source})" if self.source else self.model
        if self.live_error:
            how += f"; live mode unreadable: {self.live_error}"
        return how


def read_sys_record(transport: Transport, what: str, parse: Callable[[dict[str, Any]], T],
                    root: str | None = None, timeout_s: float = 30.0) -> T:
    """`rtlab-probe sys WHAT [--root DIR]` on the transport's target, its one record
    parsed by `parse` (ValueError/KeyError/TypeError when it is not one); RtlabError if
    it fails."""
    proc = transport.run(["sys", what, *(["--root", root] if root else [])],
                         timeout_s=timeout_s)
    if proc.returncode != 0:
        raise RtlabError(f"`sys {what}` failed: {proc.stderr.strip() or proc.returncode}")
    try:
        return parse(json.loads(proc.stdout))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RtlabError(f"`sys {what}` printed something that is not a {what} record: {exc}",
                         hint="rtlab and rtlab-probe versions differ; reinstall both") from exc


def parse_preemption(obj: dict[str, Any]) -> Preemption:
    """A `sys preempt` record; ValueError/KeyError/TypeError when it is not one."""
    if obj.get("type") != "preempt" or obj.get("schema") != SCHEMA:
        raise ValueError(f"type={obj.get('type')!r}, schema={obj.get('schema')!r}")
    return Preemption(model=str(obj["preempt"]), source=obj["preempt_source"],
                      dynamic=obj["preempt_dynamic"], live_error=obj["preempt_live_error"],
                      version=obj.get("version"), realtime=obj.get("realtime"),
                      config=obj.get("config"))


def read_preemption(transport: Transport, root: str | None = None,
                    timeout_s: float = 30.0) -> Preemption:
    """`rtlab-probe sys preempt [--root DIR]` on the transport's target; RtlabError if
    it fails."""
    return read_sys_record(transport, "preempt", parse_preemption, root, timeout_s)


def parse_cpus_arg(text: str, online: frozenset[int], what: str = "--cpus") -> frozenset[int]:
    """A user CPU list, validated against the online CPUs (UsageError, exit 2)."""
    try:
        cpus = frozenset(parse_cpulist(text, strides=True))
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from exc
    if not cpus:
        raise UsageError(f"{what}: empty CPU list")
    missing = sorted(cpus - online)
    if missing:
        raise UsageError(
            f"{what}: CPU {format_cpulist(frozenset(missing))} is not online "
            f"(online: {format_cpulist(online)})"
        )
    return cpus
