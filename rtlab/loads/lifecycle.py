# SPDX-License-Identifier: MIT
"""A load: one or more processes, each the leader of its own process group.

Subclasses say what to run (`commands`), and optionally what to prepare
before and remove after (`setup` / `teardown`, e.g. network namespaces) and
what to read after the stop (`collect`). Starting, verifying, watching and
stopping are the same for every kind and live here and in `LoadSet`.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from rtlab.cpulist import format_cpulist
from rtlab.errors import RtlabError, UsageError
from rtlab.loads import proc
from rtlab.loads.params import Param, check_params

POLICIES = ("other", "batch", "idle", "fifo", "rr")
RT_POLICIES = ("fifo", "rr")
STDERR_TAIL_BYTES = 2000


class SpawnRecorder(Protocol):
    """What the journal (rtlab.system's session) offers loads: see docs/sys-protocol.md."""

    def record_spawn(self, pgid: int, starttime: int) -> None: ...

    def record_netns(self, name: str) -> None: ...


class NullRecorder:
    """No journal (tests, or a host where nothing is journaled)."""

    def record_spawn(self, pgid: int, starttime: int) -> None:
        pass

    def record_netns(self, name: str) -> None:
        pass


@dataclass(frozen=True)
class Placement:
    """Where and how a load runs. cpus=None: wherever the scheduler likes."""

    cpus: tuple[int, ...] | None = None
    policy: str = "other"
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"cpus": list(self.cpus) if self.cpus is not None else None,
                "policy": self.policy, "priority": self.priority}


PLACEMENT_PARAMS: tuple[Param, ...] = (
    Param("cpus", "cpulist", None, "CPUs the load may run on (default: all)"),
    Param("policy", "choice", None, "scheduling policy of the load's processes",
          choices=POLICIES),
    Param("priority", "int", None, "scheduling priority (fifo/rr: 1..99; others: 0)",
          min=0, max=99),
)


def check_placement(prefix: str, given: Mapping[str, Any], default: Placement,
                    online: Sequence[int] | None = None) -> tuple[Placement, list[str]]:
    """A Placement from scenario keys (missing keys take the kind's default), and errors."""
    values, errors = check_params(prefix, PLACEMENT_PARAMS, given)
    cpus = values.get("cpus", default.cpus)
    policy = values.get("policy", default.policy)
    if "priority" in values:
        priority = values["priority"]
    elif (policy in RT_POLICIES) == (default.policy in RT_POLICIES):
        priority = default.priority  # same class of policy: keep the kind's priority
    else:
        priority = 1 if policy in RT_POLICIES else 0
    if policy in RT_POLICIES and not 1 <= priority <= 99:
        errors.append(f"{prefix}.priority: {priority} is out of range for policy {policy!r}; "
                      "allowed: an integer 1..99")
    elif policy not in RT_POLICIES and priority != 0:
        errors.append(f"{prefix}.priority: {priority} is out of range for policy {policy!r}; "
                      "allowed: 0")
    if cpus is not None and online is not None:
        offline = sorted(set(cpus) - set(online))
        if offline:
            errors.append(f"{prefix}.cpus: CPU {','.join(map(str, offline))} is not online; "
                          f"online CPUs: {','.join(map(str, online))}")
    return Placement(cpus, policy, priority), errors


@dataclass
class Command:
    """One process of a load. `workers`: it forks workers into its group (stress-ng).
    `ready`: polled after the start until true before the next command starts."""

    name: str
    argv: list[str]
    workers: bool = False
    ready: Callable[[Proc], bool] | None = None


@dataclass
class Proc:
    """The running (or finished) process of a Command."""

    command: Command
    popen: Any  # subprocess.Popen[bytes]
    pgid: int
    starttime: int
    started_ns: int
    stdout_path: Path
    stderr_path: Path
    stopped_ns: int | None = None
    returncode: int | None = None
    died_early: bool = False
    workers_seen: int = 0
    saved_tail: str | None = None  # kept when the work directory is removed

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def poll(self) -> int | None:
        """Reap the leader if it exited; its exit status or None."""
        if self.returncode is None:
            rc = self.popen.poll()
            if rc is not None:
                self.returncode = rc
                self.stopped_ns = time.time_ns()
        return self.returncode

    def workers(self) -> list[proc.ProcStat]:
        return [m for m in proc.group_members(self.pgid) if m.pid != self.pid]

    def stderr_tail(self) -> str:
        if self.saved_tail is not None:
            return self.saved_tail
        try:
            data = self.stderr_path.read_bytes()
        except OSError:
            return ""
        return data[-STDERR_TAIL_BYTES:].decode(errors="replace").strip()

    def describe(self) -> dict[str, Any]:
        rc = self.returncode
        return {
            "name": self.command.name, "argv": list(self.command.argv),
            "pid": self.pid, "pgid": self.pgid, "starttime": self.starttime,
            "started_ns": self.started_ns, "stopped_ns": self.stopped_ns,
            "exit_status": rc if rc is None or rc >= 0 else None,
            "signal": signal.Signals(-rc).name if rc is not None and rc < 0 else None,
            "died_early": self.died_early, "workers_seen": self.workers_seen,
            "stderr_tail": self.stderr_tail(),
        }


class LoadError(RtlabError):
    """A load did not start or did not keep running."""


class Load:
    """Base of every load kind. Not started until `LoadSet` starts it."""

    kind = "load"
    default_placement = Placement()
    stop_grace_s = 0.0  # at least this long between SIGTERM and SIGKILL (LoadSet's grace_s)

    def __init__(self, params: Mapping[str, Any] | None = None,
                 placement: Placement | None = None, *, name: str | None = None):
        self.params: dict[str, Any] = dict(params or {})
        self.placement = placement if placement is not None else self.default_placement
        self.name = name or self.kind
        self.procs: list[Proc] = []
        self.workdir: Path | None = None
        self.stopping = False
        self.extra: dict[str, Any] = {}
        # a cgroup v2 partition (its directory and CPUs) that the load's processes on
        # those CPUs must join: a partition takes its CPUs away from every other cgroup
        self.partition: tuple[str, frozenset[int]] | None = None

    def join_partition(self, cgroup: str, cpus: frozenset[int]) -> None:
        """Place the processes of this load that run on `cpus` in `cgroup` (set before
        the start). A load of one process cannot be on both sides: placed on partition
        CPUs and others, it is refused (loads that can split, split)."""
        mine = self.placement.cpus
        if mine is None or not set(mine) & cpus:
            return
        if not set(mine) <= cpus and not self.splits:
            raise UsageError(
                f"load {self.name}: placed on CPUs {format_cpulist(mine)}, inside and outside "
                f"the shield's cgroup v2 partition (CPUs {format_cpulist(sorted(cpus))}); one "
                "process cannot be on both sides", hint="place it on the shield's CPUs or on "
                "the others (cpus = \"user\" or \"system\"), or use two loads")
        self.partition = (cgroup, cpus)
        self.extra["partition"] = {"cgroup": cgroup, "cpus": format_cpulist(sorted(cpus))}

    splits = False  # one process per side of a partition (per-CPU threads, e.g. rt-competitor)

    def placement_parts(self) -> list[tuple[tuple[int, ...] | None, str | None]]:
        """(CPUs, cgroup to join or None) for each process the placement needs: one, or
        one inside and one outside a partition."""
        mine, part = self.placement.cpus, self.partition
        if part is None or mine is None:
            return [(mine, None)]
        cgroup, cpus = part
        inside = tuple(c for c in mine if c in cpus)
        outside = tuple(c for c in mine if c not in cpus)
        return [(p, g) for p, g in ((inside, cgroup), (outside, None)) if p]

    def own_pids(self) -> list[int]:
        """Every live process of this load: its leaders and their workers."""
        return [p.pid for p in self.procs] + [w.pid for p in self.procs for w in p.workers()]

    # --- what subclasses provide -------------------------------------------------
    def check_tools(self) -> None:
        """Raise SkippedError if a tool is missing (called before anything starts)."""

    def setup(self, recorder: SpawnRecorder, workdir: Path) -> None:
        """Prepare what the commands need (before the first command starts)."""

    def commands(self) -> list[Command]:
        raise NotImplementedError

    def before_signal(self) -> None:
        """Last look while everything still runs (e.g. read counters), just before SIGTERM."""

    def teardown(self) -> None:
        """Remove what setup created (after every process is gone). Must be idempotent."""

    def collect(self) -> None:
        """Read results after the stop (into self.extra)."""

    # --- lifecycle, driven by LoadSet ----------------------------------------------
    def start(self, recorder: SpawnRecorder, workdir: Path, *, ready_timeout_s: float = 5.0
              ) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.setup(recorder, workdir)
        for i, cmd in enumerate(self.commands()):
            out = workdir / f"{i}-{cmd.name}.stdout"
            err = workdir / f"{i}-{cmd.name}.stderr"
            with open(out, "wb") as fo, open(err, "wb") as fe:
                p = self._spawn(cmd, fo, fe, workdir)
            p.stdout_path, p.stderr_path = out, err
            self.procs.append(p)
            recorder.record_spawn(p.pgid, p.starttime)
            if cmd.ready is not None:
                deadline = time.monotonic() + ready_timeout_s
                while not cmd.ready(p):
                    if p.poll() is not None:
                        p.died_early = True
                        raise LoadError(self._death_message(p))
                    if time.monotonic() >= deadline:
                        raise LoadError(f"load {self.name}: {cmd.name} not ready after "
                                        f"{ready_timeout_s:g} s")
                    time.sleep(0.02)

    def _spawn(self, cmd: Command, fo: IO[bytes], fe: IO[bytes], workdir: Path) -> Proc:
        popen = proc.spawn(cmd.argv, cwd=workdir, stdout=fo, stderr=fe)
        started = time.time_ns()
        st = proc.starttime(popen.pid)
        return Proc(command=cmd, popen=popen, pgid=popen.pid,
                    starttime=st if st is not None else -1, started_ns=started,
                    stdout_path=Path(), stderr_path=Path())

    def verify(self, deadline: float) -> None:
        """Every process alive and, where expected, with workers; else LoadError."""
        for p in self.procs:
            while True:
                if p.poll() is not None:
                    p.died_early = True
                    raise LoadError(self._death_message(p))
                if not p.command.workers:
                    break
                n = len(p.workers())
                p.workers_seen = max(p.workers_seen, n)
                if n > 0:
                    break
                if time.monotonic() >= deadline:
                    raise LoadError(f"load {self.name}: {p.command.name} (pid {p.pid}) "
                                    "started no workers", hint=p.stderr_tail() or None)
                time.sleep(0.05)

    def check(self) -> bool:
        """Notice early deaths; True if some process of this load died early."""
        for p in self.procs:
            if p.returncode is None and p.poll() is not None and not self.stopping:
                p.died_early = True
        return self.died_early

    @property
    def died_early(self) -> bool:
        return any(p.died_early for p in self.procs)

    def signal(self, sig: int) -> None:
        self.stopping = True
        for p in self.procs:
            if p.poll() is None or p.workers():
                proc.killpg(p.pgid, sig)

    def gone(self) -> bool:
        """Every leader reaped and no live member left in any group."""
        done = True
        for p in self.procs:
            if p.poll() is None or proc.group_members(p.pgid):
                done = False
        return done

    def leftovers(self) -> list[int]:
        """PIDs of what is still alive of this load (after the stop: what would not go)."""
        return [m.pid for p in self.procs for m in proc.group_members(p.pgid)]

    def _death_message(self, p: Proc) -> str:
        rc = p.returncode
        how = f"exit status {rc}" if rc is not None and rc >= 0 else f"signal {-(rc or 0)}"
        tail = p.stderr_tail().splitlines()
        last = f": {tail[-1]}" if tail else ""
        return f"load {self.name}: {p.command.name} (pid {p.pid}) died early ({how}){last}"

    # --- reporting -------------------------------------------------------------
    def status(self) -> str:
        if not self.procs:
            return "not started"
        if self.died_early:
            return "died"
        if all(p.returncode is not None for p in self.procs):
            return "stopped"
        return "running"

    def describe(self) -> dict[str, Any]:
        procs = [p.describe() for p in self.procs]
        first = procs[0] if procs else {}
        out: dict[str, Any] = {
            "name": self.name, "kind": self.kind, "params": _jsonable(self.params),
            "argv": first.get("argv"),
            **self.placement.to_dict(),
            "pid": first.get("pid"), "pgid": first.get("pgid"),
            "started_ns": min((p["started_ns"] for p in procs), default=None),
            "stopped_ns": max((p["stopped_ns"] or 0 for p in procs), default=None) or None,
            "exit_status": first.get("exit_status"),
            "died_early": self.died_early, "status": self.status(),
            "stderr_tail": "\n".join(p["stderr_tail"] for p in procs if p["stderr_tail"]),
            "processes": procs,
        }
        out.update(self.extra)
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


class CommandLoad(Load):
    """An arbitrary command as a load (custom loads and tests); placement is up to argv."""

    kind = "command"

    def __init__(self, argv: Sequence[str], *, workers: bool = False, name: str = "command"):
        super().__init__({"argv": list(argv)}, Placement(), name=name)
        self.argv = list(argv)
        self.workers = workers

    def commands(self) -> list[Command]:
        return [Command(self.name, list(self.argv), workers=self.workers)]
