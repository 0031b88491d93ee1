# SPDX-License-Identifier: MIT
"""Applying a CPU shield: the persistent one of `rtlab shield` (applied through
`sys apply --detach`, shown, reset) and the ones running sessions hold, verified
(docs/system.md). The plan itself is `rtlab.system.shield_plan`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.errors import RtlabError, UsageError
from rtlab.system.applier import ApplyError, hold_target, open_applier
from rtlab.system.facts import Facts, read_facts
from rtlab.system.journal_files import SHIELD_JOURNAL, journals, read_journal, restore_journal
from rtlab.system.shield_knobs import (
    KnobPlan,
    knob_path,
    knobs_in_effect,
    read_knob_state,
    skipped_note,
)
from rtlab.system.shield_plan import (
    IRQ_PATH,
    Plan,
    ShieldRequest,
    move_ops,
    plan_affinity,
    plan_shield,
    refused_irqs,
    run_shield_cpus,
)
from rtlab.system.target_lock import LOCK_NAME, LockHolder, lock_info, owner_label
from rtlab.system.verify import verify_shield

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport
    from rtlab.system.journal_files import JournalInfo, RestoreReport


def _journal_path(directory: Path) -> Path:

    return Path(directory) / SHIELD_JOURNAL


def _shield_journal(transport: Transport, directory: Path) -> JournalInfo | None:
    """The persistent shield's journal on the target, if there is one."""

    path = _journal_path(directory)
    if transport.is_local:
        try:
            return read_journal(path)
        except FileNotFoundError:  # none, or restored meanwhile
            return None
    return next((j for j in journals(directory, transport) if j.path == path), None)


def apply_shield(
    transport: Transport,
    req: ShieldRequest,
    directory: Path,
    *,
    facts: Facts | None = None,
    cpuset: bool = True,
    system: frozenset[int] | None = None,
) -> dict[str, Any]:
    """Plan and apply a persistent shield through `sys apply --detach`: a cpuset shield,
    or with `cpuset` false affinities only (to `system`), or only runtime knobs (a
    request that moves nothing)."""

    path = _journal_path(directory)
    again = "" if transport.is_local else f" --target {transport.target}"
    if _shield_journal(transport, directory) is not None:
        raise RtlabError(
            f"a shield is already applied ({path})", hint=f"run `rtlab shield --reset{again}` first"
        )
    if req.dma_latency_us is not None:
        raise UsageError("cpu_dma_latency can only be held by a running session, not a shield")
    stale = [j for j in journals(directory, transport) if j.stale and not j.detached]
    if stale:  # a crashed run's changes: a shield on top would be restored into them
        raise RtlabError(
            "a previous run left system changes behind (stale journal "
            + ", ".join(str(j.path) for j in stale) + ")",
            hint=f"run `rtlab restore{again}` first")
    facts = facts or read_facts(transport)
    state = read_knob_state(transport) if req.knobs.asked() else None
    plan: Plan = (plan_shield(facts, req, knob_state=state) if cpuset else
                  plan_affinity(facts, req, system if system is not None
                                else facts.cpus_online - req.cpus, knob_state=state))
    # the target's owner lock while applying (a running `rtlab run` refuses us, and we
    # it); it goes when the applier exits after the last operation (--detach)
    applier = open_applier(transport, path, detach=True,
                              lock=(str(Path(directory) / LOCK_NAME), owner_label("shield")))
    try:
        answers = applier.apply(plan.ops)
        bad = [i for i in plan.required if not answers[i].get("ok")]
        if bad:
            i = bad[0]
            raise ApplyError(
                f"{plan.ops[i]['op']} {plan.ops[i].get('path', '')}: {answers[i].get('error')}"
            )
        # Second pass: tasks forked while the first pass ran.
        n_first = len(plan.ops)
        extra = move_ops(plan, read_facts(transport))
        ops = plan.ops + extra
        answers += applier.apply(extra)
    except BaseException:
        applier.release()
        raise
    applier.detach_now()
    by_tid = {t.tid: t for t in plan.moved_tasks}
    moved_user = moved_k = 0
    failed: list[str] = []
    for op, ans in zip(ops, answers, strict=True):
        if op["op"] == "move":
            t = by_tid.get(op["tid"])
            if ans.get("ok"):
                if t is not None and t.kthread:
                    moved_k += 1
                else:
                    moved_user += 1
            elif ans.get("errno") != 3:  # ESRCH: exited meanwhile
                failed.append(f"move {t.label if t else op['tid']}: {ans.get('error')}")
        elif op["op"] == "affinity":
            continue  # v2: the affinities kept for the restore (a no-op when applied)
        elif not ans.get("ok") and not IRQ_PATH.match(str(op.get("path", ""))):
            failed.append(f"{op['op']} {op.get('path', '')}: {ans.get('error')}")
    irq_ok = [
        int(m.group(1))
        for op, ans in zip(ops, answers, strict=True)
        if (m := IRQ_PATH.match(str(op.get("path", "")))) and ans.get("ok")
    ]
    after = read_facts(transport)
    requested = {"irqs": req.irqs, "kthreads": req.kthreads, "backend": plan.backend,
                 **req.knobs.asked()}
    verify = verify_shield(
        after,
        req.cpus,
        backend=plan.backend,
        shield_cgroup=plan.shield_cgroup or None,
        requested=requested,
        before=facts,
        priorities=[(p.pattern, p.policy, p.priority) for p in req.priorities],
    )
    notes = list(plan.notes)
    if plan.knobs is not None:
        notes += _verify_knobs(transport, plan.knobs, verify)
    return {
        "summary": plan.summary(),
        "journal": str(path),
        "tasks_moved": moved_user,
        "kthreads_moved": moved_k,
        "second_pass_moves": len(ops) - n_first,
        "not_movable": [t.label for t in plan.not_movable],
        "left_alone": [t.label for t in plan.left_alone],
        "irqs_moved": irq_ok,
        "irqs_refused": refused_irqs(ops, answers),
        "failed": failed,
        "notes": notes,
        "verify": verify,
    }


def _verify_knobs(transport: Transport, kp: KnobPlan, verify: dict[str, Any]) -> list[str]:
    """The runtime knobs in effect, added to a shield's check; the note naming the
    skipped ones."""
    knobs, problems = knobs_in_effect(read_knob_state(transport), kp)
    verify["in_effect"]["knobs"] = knobs
    verify["problems"] = list(verify.get("problems") or []) + problems
    verify["in_effect"]["ok"] = bool(verify["in_effect"].get("ok")) and not problems
    note = skipped_note(kp)
    return [note] if note is not None else []


def shield_status(transport: Transport, directory: Path) -> dict[str, Any] | None:

    path = _journal_path(directory)
    info = _shield_journal(transport, directory)
    if info is None:
        return None
    facts = read_facts(transport)
    shield = run_shield_cpus(info.entries, facts.cpus_online)
    knobs = journal_knobs(transport, info.entries)
    if shield is None:  # runtime knobs or priorities only: nothing per CPU to verify
        if not knobs and not info.entries:
            return None
        return {"requested": {"cpus": None, "journal": str(path), "knobs": knobs},
                "in_effect": None, "problems": []}
    cpus, backend, cgroup = shield
    irqs = any(IRQ_PATH.match(str(e.get("path", ""))) for e in info.entries)
    st = verify_shield(
        facts,
        cpus,
        backend=backend,
        shield_cgroup=cgroup,
        requested={"irqs": irqs, "backend": backend, "journal": str(path), "knobs": knobs},
    )
    return st


def journal_knobs(transport: Transport, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runtime knobs' writes a journal holds: per file, the value written, the one
    it had (restored on reset) and what it reads now."""
    writes = [e for e in entries if e.get("op") == "write"
              and knob_path(str(e.get("path", ""))) is not None]
    if not writes:
        return []
    from rtlab.engine.snapshot import record_bytes, snapshot

    now = {str(r["path"]): record_bytes(r).decode(errors="replace").rstrip("\n")
           for r in snapshot(transport, sorted({str(e["path"]) for e in writes}))
           if r.get("type") == "file"}
    return [{"knob": knob_path(str(e["path"])), "path": e["path"], "value": e.get("value"),
             "was": e.get("undo", e.get("old")), "now": now.get(str(e["path"]))}
            for e in writes]


def reset_shield(transport: Transport, directory: Path) -> RestoreReport | None:
    """Undo the persistent shield, owning the target meanwhile (refused while a run
    holds it: that run's journal recorded the shield's values as the ones to restore)."""

    if _shield_journal(transport, directory) is None:
        return None
    with hold_target(transport, directory, "shield --reset"):
        return restore_journal(transport, _journal_path(directory))


def run_shields(transport: Transport, directory: Path) -> list[dict[str, Any]]:
    """The shields held by running sessions (`rtlab run`) on the target: each verified
    like a persistent one, with `held_by` (owner, its pid and command line, since when,
    the journal). Read-only."""

    held = [j for j in journals(directory, transport)  # sessions that own the target
            if j.held and not j.detached and j.entries and j.owner is not None]
    if not held:
        return []
    try:
        holder: LockHolder | None = lock_info(transport, Path(directory) / LOCK_NAME)
    except (RtlabError, OSError):
        holder = None
    facts = read_facts(transport)
    out: list[dict[str, Any]] = []
    for j in held:
        shield = run_shield_cpus(j.entries, facts.cpus_online)
        info = LockHolder(str(Path(directory) / LOCK_NAME), True, j.pid, j.owner,
                             j.time_ns)
        if holder is not None and holder.held and holder.pid == j.pid:
            info = holder  # the lock's own line: since when it owns the target
        held_by = {**info.to_dict(), "who": info.who(), "journal": str(j.path),
                   "changes": len(j.entries)}
        if shield is None:  # e.g. only priorities or a sysctl: nothing per CPU to verify
            out.append({"held_by": held_by, "requested": {"cpus": None, "journal": str(j.path)},
                        "in_effect": None, "problems": []})
            continue
        cpus, backend, cgroup = shield
        irqs = any(IRQ_PATH.match(str(e.get("path", ""))) for e in j.entries)
        st = verify_shield(facts, cpus, backend=backend, shield_cgroup=cgroup,
                           requested={"irqs": irqs, "backend": backend, "journal": str(j.path)},
                           own={p: "the run holding this shield" for p in
                                (info.owner_pid if transport.is_local else None, j.pid)
                                if p})
        out.append({"held_by": held_by, **st})
    return out
