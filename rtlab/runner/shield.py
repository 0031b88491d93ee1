# SPDX-License-Identifier: MIT
"""The runner's side of system control: stale journals and the shield backend.

The system layer (`rtlab.system`: journaled cpuset shield, IRQ affinity, sched
params through `rtlab-probe sys`) does the work; this module only adapts it to
the run lifecycle, so the runner never imports it when a scenario has no
shield, and tests can inject a backend.

Stale journals: a journal under the journal directory (`$RTLAB_JOURNAL_DIR`,
default `/run/rtlab`) whose `flock` is free belongs to no live applier: a
previous run was killed. `rtlab run` refuses to start then (`rtlab restore`),
or restores first with `--restore-first`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from rtlab.engine.transport import LocalTransport, Transport
from rtlab.errors import RtlabError, SkippedError
from rtlab.scenario.model import ShieldSpec
from rtlab.system import journal_files, target_lock
from rtlab.system.applier import ApplyError, SystemSession
from rtlab.system.facts import read_facts
from rtlab.system.journal_files import journal_dir, restore_journal
from rtlab.system.shield_knobs import (
    KnobPlan,
    RuntimeKnobs,
    knobs_in_effect,
    read_knob_state,
    skipped_note,
)
from rtlab.system.shield_plan import (
    ShieldRequest,
    ThreadPriority,
    move_ops,
    plan_affinity,
    plan_shield,
)
from rtlab.system.target_snapshot import ancestors
from rtlab.system.verify import phase_recheck, verify_shield


def stale_journals(directory: Path | None = None,
                   transport: Transport | None = None) -> list[Path]:
    """Journal files nobody holds on the target (a persistent `rtlab shield` is not stale)."""

    d = directory or journal_files.journal_dir(transport)
    return [j.path for j in journal_files.stale_journals(d, include_shield=False,
                                                   transport=transport)]


def restore_journals(paths: list[Path], transport: Transport | None = None) -> None:
    """`rtlab-probe sys restore --journal FILE` for each; RtlabError if one fails."""

    for path in paths:
        rep = restore_journal(transport or LocalTransport(), path)
        if not rep.ok:
            raise RtlabError(f"restoring the stale journal {path} failed: {rep.summary()}",
                             hint="run `rtlab restore` and check its output")


def check_stale(restore_first: bool, directory: Path | None = None,
                transport: Transport | None = None, *, lenient: bool = False) -> list[str]:
    """Refuse (or restore first) when a previous run left a journal: every run, with or
    without a shield (a crashed run's cpusets would make the next one fail to pin its
    threads, or measure a half-shielded system). Returns notes.

    lenient (a run that changes nothing itself): a journal directory that cannot be
    read (not root) is no reason to refuse; and on this machine, a live owner of the
    system (another run's shield) becomes a note of the result."""

    try:
        stale = stale_journals(directory, transport)
    except (RtlabError, OSError):
        if not lenient:
            raise
        return []
    notes: list[str] = []
    if lenient and not stale and (transport is None or transport.is_local):
        d = directory or journal_files.journal_dir(transport)
        try:
            holder = target_lock.lock_info(None, d / target_lock.LOCK_NAME)
        except OSError:
            holder = None
        if holder is not None and holder.held:
            notes.append(f"measured while {holder.who()} owned this machine's system state "
                         f"(since {holder.since}): its shield or settings were in effect")
    if not stale:
        return notes
    names = ", ".join(str(p) for p in stale)
    where = "" if transport is None or transport.is_local else f" on {transport.target}"
    if not restore_first:
        target = "" if not where else f" --target {transport.target}"  # type: ignore[union-attr]
        raise RtlabError(
            f"a previous run left system changes behind{where} (stale journal {names}; "
            "its rtlab and applier are gone)",
            hint=f"run `rtlab restore{target}` first, or pass --restore-first")
    restore_journals(stale, transport)
    return [f"restored the stale journal {names}{where} before starting"]


def explain_exists(exc: Any, transport: Transport, directory: Path) -> RtlabError | None:
    """A shield's cgroup that exists already (mkdir: EEXIST): say whose it is instead of
    the engine's "left over? run `rtlab restore`" when that is not so: a live session
    (named), a persistent `rtlab shield`, or a crashed run's journal. None: keep exc."""

    op, ans = getattr(exc, "op", {}), getattr(exc, "answer", {})
    if op.get("op") != "mkdir" or ans.get("errno") != 17:  # EEXIST
        return None
    path = str(op.get("path", ""))
    try:
        found = journal_files.journals(directory, transport)
    except (RtlabError, OSError):
        found = []
    where = "" if transport.is_local else f" on {transport.target}"
    again = "" if transport.is_local else f" --target {transport.target}"
    for j in found:
        if not any(e.get("op") == "mkdir" and e.get("path") == path for e in j.entries):
            continue
        if j.held:
            who = target_lock.LockHolder(str(j.path), True, j.pid, j.owner,
                                     j.time_ns).who() if j.owner else f"pid {j.pid}"
            return RtlabError(f"{path}{where} belongs to a live session: {who} "
                              f"(journal {j.path})",
                              hint="wait for it to end or stop it; one rtlab run or shield "
                                   "owns a system at a time")
        if j.detached:
            return RtlabError(f"{path}{where} belongs to a persistent shield "
                              f"(`rtlab shield`, journal {j.path})",
                              hint=f"remove it with `rtlab shield --reset{again}`, or run "
                                   "with --no-shield")
        return RtlabError(f"{path}{where} was left by a run that crashed (stale journal "
                          f"{j.path})", hint=f"run `rtlab restore{again}` first")
    # we hold the target lock: no other rtlab using this journal directory is live
    return RtlabError(f"{path}{where} exists already and no journal in {directory} "
                      "created it (another journal directory, or made by hand)",
                      hint="find who made it; remove it (rmdir) when nobody uses it")


class ShieldBackend(Protocol):
    """What the runner needs from the system layer for one run."""

    def apply(self) -> dict[str, Any]:
        """Apply the shield (journaled); return what is in effect (verified)."""

    def phase_start(self) -> None:
        """Note what is true now (IRQ counts), before a phase measures."""

    def phase_check(self, own: dict[int, str]) -> dict[str, Any]:
        """The shield checked again after a phase measured (`own`: load processes placed
        on the shielded CPUs on purpose): docs/system.md, "Checked again"."""

    def release(self) -> dict[str, Any]:
        """Undo everything (idempotent); return what was restored."""

    @property
    def recorder(self) -> Any:
        """A SpawnRecorder (journal) for loads, or None."""

    @property
    def probe_cgroup(self) -> str | None:
        """The cgroup the probes must join to reach the shielded CPUs (a cgroup v2
        partition takes them away from every other cgroup), or None."""


def shield_request(spec: ShieldSpec, facts: Any, exclude: frozenset[int] = frozenset()
                   ) -> ShieldRequest:
    """The system layer's request for a scenario's [shield] on a target with these facts
    (`exclude`: processes to leave where they are). A system set that is every other
    CPU names no CPU in particular: SMT siblings taken offline (smt = false) leave it."""
    user, system = frozenset(spec.user), frozenset(spec.system)
    named = None if system == facts.cpus_online - user else system
    priorities = tuple(ThreadPriority(m, pol, pr) for m, pol, pr in spec.thread_priorities)
    # a cpuset shield moves default_smp_affinity with the IRQs
    irqs = spec.irqs or (spec.cpuset and spec.default_smp_affinity)
    return ShieldRequest(cpus=user, irqs=irqs, kthreads=spec.kthreads,
                         priorities=priorities, rt_runtime_us=spec.sched_rt_runtime_us,
                         dma_latency_us=spec.dma_latency, exclude_pids=exclude,
                         tasks=spec.tasks, default_smp_affinity=spec.default_smp_affinity,
                         knobs=RuntimeKnobs.of(spec), system=named)


class SystemShield:
    """The scenario's shield through rtlab.system: facts -> plan -> journaled apply ->
    verify; `release` restores everything (the journal guarantees it even after a crash).

    With `cpuset = true` the system layer's cpuset shield is planned (cgroup v1 or v2);
    without it (the MBDA steps "tasks to CPU 0", "+ IRQs") only affinities are written:
    every movable task's affinity, IRQ affinity and default_smp_affinity to the system
    CPUs, as asked.
    """

    def __init__(self, spec: ShieldSpec, transport: Transport | None = None,
                 directory: Path | None = None, *, take_owner: bool = True) -> None:
        self.spec = spec
        # False: the caller (`rtlab tune`) holds the target's owner lock for longer
        self._take_owner = take_owner
        self._transport = transport or LocalTransport()

        self._dir = directory or journal_dir(self._transport)
        self._session: Any = None
        self.plan_summary: dict[str, Any] = {}
        self._where: tuple[str, str | None] = ("none", None)  # backend, shield cgroup
        self._applied: dict[str, Any] | None = None
        self._phase_before: Any = None
        self._carriers: dict[int, str] | None = None  # a board's SSH server processes
        self._knobs: KnobPlan | None = None  # the runtime knobs planned

    def apply(self) -> dict[str, Any]:

        spec = self.spec
        cmd = self._transport
        if cmd.is_local:
            self._dir.mkdir(parents=True, exist_ok=True)
        # the applier first: on a board, the SSH server process that hosts this run's
        # connection is its ancestor and stays where it is (the probes start from it)
        # ... and it takes the target's owner lock first: one run or shield at a time
        self._session = SystemSession(
            cmd, self._dir, name=journal_files.run_session_name(cmd),
            owner=target_lock.owner_label() if self._take_owner else None).__enter__()
        before = read_facts(cmd)
        knobs = RuntimeKnobs.of(spec)
        state = read_knob_state(cmd) if knobs.asked() else None
        ops, required, backend, cgroup = self._plan(before, state)
        try:
            answers = self._session.apply(ops, required=required)
        except ApplyError as exc:
            better = explain_exists(exc, cmd, self._dir)
            if better is None:
                raise
            raise better from exc
        refused = [{"op": o, "error": a.get("error")} for o, a in zip(ops, answers, strict=False)
                   if not a.get("ok")]
        after = read_facts(cmd)
        effect = verify_shield(after, spec.user, backend=backend, shield_cgroup=cgroup,
                               requested=spec.to_dict(), own=self.own_processes(),
                               before=before, priorities=spec.thread_priorities)
        effect["refused"] = refused[:50]
        effect["plan"] = self.plan_summary
        if self._knobs is not None:
            self._add_knobs(effect, self._knobs)
        self._where, self._applied = (backend, cgroup), effect
        return effect

    def _add_knobs(self, effect: dict[str, Any], kp: KnobPlan) -> None:
        """The runtime knobs requested vs in effect (read back now), their problems, and
        a note naming the knobs this target lacks (skipped, never a failure)."""
        knobs, problems = knobs_in_effect(read_knob_state(self._transport), kp)
        effect["in_effect"]["knobs"] = knobs
        effect["problems"] = list(effect.get("problems") or []) + problems
        effect["in_effect"]["ok"] = bool(effect["in_effect"].get("ok")) and not problems
        notes = list(kp.notes)
        skipped = skipped_note(kp)
        if skipped is not None:
            notes.append(skipped)
        effect["notes"] = notes

    def phase_start(self) -> None:

        self._phase_before = read_facts(self._transport)

    def phase_check(self, own: dict[int, str]) -> dict[str, Any]:

        spec = self.spec
        backend, cgroup = self._where
        now = verify_shield(read_facts(self._transport), spec.user, backend=backend,
                            shield_cgroup=cgroup, own={**self.own_processes(), **own},
                            requested=spec.to_dict(),
                            before=self._phase_before, priorities=spec.thread_priorities)
        return phase_recheck(now, self._applied)

    def own_processes(self) -> dict[int, str]:
        """What this run itself keeps outside the cpusets, by process id: the runner
        (left where it is so that the probes it starts can reach the shielded CPUs),
        on a board the SSH server processes that carry this run's connection (the
        probes start from them), and the journal's applier. The shield check lists
        them, never as leaks."""
        own: dict[int, str] = {}
        applier = getattr(self._session, "applier", None)
        if self._transport.is_local:
            own[os.getpid()] = "rtlab runner (starts the probes on the shielded CPUs)"
        elif applier is not None and getattr(applier, "pid", None):
            if self._carriers is None:  # read once: they live as long as the connection

                self._carriers = {
                    pid: f"{comm} (carries this run's SSH connection; starts the probes)"
                    for pid, comm in ancestors(self._transport, int(applier.pid))}
            own.update(self._carriers)
        if applier is not None and getattr(applier, "pid", None):
            own[int(applier.pid)] = "rtlab-probe sys apply (holds the journal)"
        return own

    def _plan(self, facts: Any, state: Any = None
              ) -> tuple[list[dict[str, Any]], list[int], str, str | None]:

        spec = self.spec
        req = shield_request(spec, facts, frozenset(self.own_processes()))
        system = frozenset(spec.system)
        if spec.cpuset:
            plan = plan_shield(facts, req, knob_state=state)
            ops = list(plan.ops) + move_ops(plan, facts)
            self.plan_summary, self._knobs = plan.summary(), plan.knobs
            return ops, list(plan.required), plan.backend, plan.shield_cgroup
        plan = plan_affinity(facts, req, system, knob_state=state)
        self.plan_summary, self._knobs = plan.summary(), plan.knobs
        return list(plan.ops), list(plan.required), "none", None

    def release(self) -> dict[str, Any]:
        if self._session is None:
            return {}
        session, self._session = self._session, None
        report = session.release()
        if report is None:
            return {"released": True}
        out = {k: getattr(report, k) for k in ("restored", "gone", "failed", "error")}
        out["ok"] = report.ok
        if not report.ok:
            raise RtlabError(f"restoring the shield was incomplete: {report.summary()}",
                             hint="run `rtlab restore`")
        return out

    @property
    def recorder(self) -> Any:
        return self._session

    @property
    def probe_cgroup(self) -> str | None:
        backend, cgroup = self._where
        return cgroup if backend == "v2" else None


def default_backend(spec: ShieldSpec, transport: Transport | None = None, *,
                    take_owner: bool = True) -> ShieldBackend:
    """The system layer's shield, or SkippedError when this build has none. take_owner
    False: the caller holds the target's owner lock already (`rtlab tune`)."""
    try:
        import rtlab.system.applier
        import rtlab.system.shield_plan
        import rtlab.system.verify  # noqa: F401
    except ImportError as exc:
        raise SkippedError("this scenario asks for a CPU shield, but the system layer "
                           f"is not available in this build ({exc})",
                           hint="run it with --no-shield to measure without the shield"
                           ) from None
    if (transport is None or transport.is_local) and os.geteuid() != 0:
        raise SkippedError("this scenario's CPU shield needs root (cpusets, IRQ affinity)",
                           hint="run as root, or with --no-shield")
    return SystemShield(spec, transport, take_owner=take_owner)
