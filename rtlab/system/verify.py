# SPDX-License-Identifier: MIT
"""What is actually true on the shielded CPUs, right before measuring.

`verify_shield()` compares "shield requested" with "shield in effect" per CPU:
which tasks may still run there (and why), which IRQs may still fire there
(affinity, effective affinity, and counts that grew), and what the cpuset says
(effective CPUs, v2 partition state). The dict goes into the result as is.

Everything comes from `Facts` read on the target by its engine (`sys facts`),
the shield's cpuset too: nothing here reads this machine, so the same check is true
for a board.

Processes the caller put there on purpose (`own`: process id -> what it is, e.g.
the runner itself, its journal applier, a load the scenario places on every CPU)
are listed per CPU under `own_tasks`, every thread of them, and are not problems;
any other task that may run on a shielded CPU is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rtlab.cpulist import format_cpulist
from rtlab.system.facts import Facts


def _in_cgroup(cgroups: dict[str, str], backend: str, name: str) -> bool:
    key = "cpuset" if backend == "v1" else "v2"
    where = cgroups.get(key, "")
    return where == f"/{name}" or where.startswith(f"/{name}/")


def verify_shield(
    facts: Facts,
    shield_cpus: Iterable[int],
    *,
    backend: str = "v1",
    shield_cgroup: str | None = None,
    requested: dict[str, Any] | None = None,
    own: Mapping[int, str] | None = None,
    before: Facts | None = None,
    priorities: Sequence[tuple[str, str, int]] = (),
) -> dict[str, Any]:
    shield = frozenset(shield_cpus)
    own = dict(own or {})
    name = shield_cgroup.rstrip("/").rsplit("/", 1)[-1] if shield_cgroup else None
    problems: list[str] = []
    per_cpu: dict[str, dict[str, Any]] = {}
    before_counts = {i.irq: i.counts for i in before.irqs} if before else {}
    for cpu in sorted(shield):
        tasks: list[dict[str, Any]] = []
        kthreads: list[dict[str, Any]] = []
        ours: list[dict[str, Any]] = []
        pinned = 0
        for t in facts.tasks:
            if cpu not in t.affinity:
                continue
            if t.per_cpu:
                pinned += 1
                continue
            if name and _in_cgroup(t.cgroups, backend, name):
                continue  # the measured work itself
            entry = {"tid": t.tid, "pid": t.pid, "comm": t.comm,
                     "affinity": format_cpulist(t.affinity)}
            if t.pid in own and not t.kthread:  # by process: every thread of it
                ours.append({**entry, "what": own[t.pid]})
                continue
            (kthreads if t.kthread else tasks).append(entry)
        irq_aff = [i.irq for i in facts.irqs if i.affinity is not None and cpu in i.affinity]
        irq_eff = [i.irq for i in facts.irqs if i.effective is not None and cpu in i.effective]
        fired: dict[str, int] = {}
        for i in facts.irqs:
            old = before_counts.get(i.irq)
            if i.counts and old and len(i.counts) > cpu < len(old) and i.counts[cpu] > old[cpu]:
                fired[str(i.irq)] = i.counts[cpu] - old[cpu]
        per_cpu[str(cpu)] = {
            "user_tasks": tasks,
            "own_tasks": ours,
            "kthreads_movable": kthreads,
            "kthreads_per_cpu": pinned,
            "irqs_affinity": irq_aff,
            "irqs_effective": irq_eff,
            "irqs_fired": fired if before else None,
        }
        if tasks:
            problems.append(
                f"CPU {cpu}: {len(tasks)} user task(s) may still run there, e.g. "
                + ", ".join(f"{e['comm']}[{e['tid']}]" for e in tasks[:3])
            )
        if kthreads:
            problems.append(f"CPU {cpu}: {len(kthreads)} unbound kthread(s) may still run there")
        if irq_aff:
            problems.append(
                f"CPU {cpu}: IRQ {', '.join(map(str, irq_aff))} may be delivered there "
                "(refused or kernel-managed)"
            )
        lazy = sorted(set(irq_eff) - set(irq_aff))
        if lazy:
            problems.append(
                f"CPU {cpu}: IRQ {', '.join(map(str, lazy))} still target it until they next "
                "fire (lazy affinity move)"
            )
    cg: dict[str, Any] = {"backend": backend, "path": shield_cgroup}
    if shield_cgroup:
        cg.update(_cgroup_in_effect(facts, backend, shield_cgroup, problems))
    threads = verify_priorities(facts, priorities, problems) if priorities else None
    return {
        "requested": {"cpus": format_cpulist(shield), **(requested or {})},
        "in_effect": {
            "cpus": per_cpu,
            "cgroup": cg,
            **({"thread_priorities": threads} if threads is not None else {}),
            "isolated_boot": format_cpulist(facts.cpus_isolated),
            "ok": not problems,
        },
        "problems": problems,
    }


def _cgroup_in_effect(facts: Facts, backend: str, path: str,
                      problems: list[str]) -> dict[str, Any]:
    """The shield's cpuset as the target's engine read it (`cgroup.cpusets` of its
    facts): effective CPUs and, on v2, the partition; a missing or invalid one is a
    problem. Facts without cpusets (an engine that does not report them) say nothing
    either way: `known` false, no problem."""
    out: dict[str, Any] = {"cpus_effective": None}
    if backend == "v2":
        out["partition"] = None
    if facts.cgroup.cpusets is None:
        return {**out, "known": False}
    found = facts.cgroup.cpuset(path)
    if found is None:
        problems.append(f"the shield cgroup {path} does not exist")
        return {**out, "known": True}
    out["cpus_effective"] = found.cpus_effective
    if backend == "v2":
        part = found.partition
        out["partition"] = part
        if part is not None and (not part.split()
                                 or "invalid" in part
                                 or part.split()[0] not in ("root", "isolated")):
            problems.append(f"cgroup v2 partition is not in effect: {part}")
    if found.cpus_effective == "":
        problems.append(f"the shield cgroup {path} has no effective CPU")
    return {**out, "known": True}


def verify_priorities(facts: Facts, priorities: Sequence[tuple[str, str, int]],
                      problems: list[str]) -> list[dict[str, Any]]:
    """Per requested (pattern, policy, priority): every matching thread with the policy
    and priority read back from the kernel; a pattern that matches nothing or a thread
    that does not run as asked is a problem."""
    out: list[dict[str, Any]] = []
    for pattern, policy, priority in priorities:
        rx = re.compile(pattern)
        matched = [t for t in facts.tasks if rx.match(t.comm)]
        if not matched:
            problems.append(f"no thread matches {pattern!r}: its priority was not set")
        wrong = []
        for t in matched:
            ok = t.policy == policy and t.priority == priority
            out.append({"match": pattern, "tid": t.tid, "comm": t.comm, "policy": t.policy,
                        "priority": t.priority, "ok": ok})
            if not ok:
                wrong.append(f"{t.label} {t.policy}/{t.priority}")
        if wrong:
            problems.append(f"{len(wrong)} thread(s) matching {pattern!r} do not run as "
                            f"{policy}/{priority}: " + ", ".join(wrong[:3]))
    return out


def phase_recheck(now: Mapping[str, Any], at_apply: Mapping[str, Any] | None) -> dict[str, Any]:
    """The shield checked again at the end of a phase (`now`: verify_shield() with the
    phase's start as `before`), summed up against the check made when it was applied:
    tasks that may run on a shielded CPU now but could not then (`new_tasks`: started
    or moved during the phase, e.g. a load's worker that escaped its placement), and
    the IRQs that fired on each shielded CPU during the phase."""
    def leaks(v: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
        cpus = ((v or {}).get("in_effect") or {}).get("cpus") or {}
        return {c: list(e.get("user_tasks") or []) + list(e.get("kthreads_movable") or [])
                for c, e in cpus.items()}

    old = {(c, t["tid"]) for c, ts in leaks(at_apply).items() for t in ts}
    new_tasks = [{**t, "cpu": int(c)} for c, ts in sorted(leaks(now).items())
                 for t in ts if (c, t["tid"]) not in old]
    cpus = (now.get("in_effect") or {}).get("cpus") or {}
    fired = {c: e["irqs_fired"] for c, e in sorted(cpus.items()) if e.get("irqs_fired")}
    own = sorted({(t["pid"], t["what"]) for e in cpus.values()
                  for t in e.get("own_tasks") or []})
    return {
        "ok": bool((now.get("in_effect") or {}).get("ok")),
        "problems": list(now.get("problems") or []),
        "new_tasks": new_tasks[:50],
        "new_tasks_total": len(new_tasks),
        "irqs_fired": fired,
        "own": [{"pid": p, "what": w} for p, w in own],
    }
