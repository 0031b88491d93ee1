# SPDX-License-Identifier: MIT
"""Planning and verification without touching the system: validation, the v1
plan, and the cgroup v2 plan executed against a fake cgroup2 directory tree."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rtlab.cpulist import format_cpumask, parse_cpumask
from rtlab.errors import SkippedError, UsageError
from rtlab.system.facts import parse_cpus_arg, parse_facts
from rtlab.system.journal_files import read_journal
from rtlab.system.shield_plan import ShieldRequest, ThreadPriority, plan_shield, shield_from_journal
from rtlab.system.verify import phase_recheck, verify_shield


def _facts(**cg: Any) -> dict[str, Any]:
    def task(
        pid: int,
        comm: str,
        kthread: bool = False,
        per_cpu: bool = False,
        aff: list[int] | None = None,
        cpuset: str = "/",
        v2: str = "/",
    ) -> dict[str, Any]:
        return {
            "pid": pid,
            "tid": pid,
            "comm": comm,
            "kthread": kthread,
            "per_cpu": per_cpu,
            "starttime": pid,
            "affinity": aff or [0, 1, 2, 3],
            "policy": "other",
            "priority": 0,
            "cgroups": {"cpuset": cpuset, "v2": v2},
        }

    return {
        "type": "facts",
        "schema": 1,
        "cpus_online": [0, 1, 2, 3],
        "cpus_possible": [0, 1, 2, 3],
        "cpus_isolated": [],
        "tasks": [
            task(1, "init"),
            task(2, "kthreadd", kthread=True),
            task(10, "ksoftirqd/3", kthread=True, per_cpu=True, aff=[3]),
            task(11, "kcompactd0", kthread=True),
            task(20, "irq/30-eth0", kthread=True),
            task(30, "app", cpuset="/other"),
        ],
        "irqs": [
            {
                "irq": 30,
                "name": "eth0",
                "affinity": [0, 1, 2, 3],
                "effective": [3],
                "managed": None,
                "threaded_pid": 20,
                "counts": [0, 0, 0, 5],
            },
            {
                "irq": 31,
                "name": "x",
                "affinity": [0],
                "effective": [0],
                "managed": None,
                "threaded_pid": None,
                "counts": [1, 0, 0, 0],
            },
        ],
        "default_smp_affinity": "f",
        "workqueue_cpumask": "f",
        "cgroup": {
            "v1_cpuset": None,
            "v2": None,
            "v2_cpuset": False,
            "v2_partition": False,
            "v1_mems": None,
            "v2_subtree_control": None,
            **cg,
        },
        "sysctl": {"kernel.sched_rt_runtime_us": 950000},
    }


def test_validation_errors() -> None:
    f = parse_facts(_facts(v1_cpuset="/sys/fs/cgroup/cpuset", v1_mems="0"))
    for cpus, msg in (({0, 1, 2, 3}, "leaves none"), ({9}, "not online"), (set(), "empty")):
        with pytest.raises(UsageError, match=msg):
            plan_shield(f, ShieldRequest(cpus=frozenset(cpus)))
    with pytest.raises(UsageError, match=r"1\.\.99"):
        plan_shield(
            f, ShieldRequest(cpus=frozenset({3}), priorities=(ThreadPriority("irq/.*", "fifo", 0),))
        )
    with pytest.raises(UsageError, match="not online"):
        parse_cpus_arg("2-5", f.cpus_online)
    with pytest.raises(UsageError):
        parse_cpus_arg("a", f.cpus_online)
    with pytest.raises(SkippedError, match="no cpuset"):
        plan_shield(parse_facts(_facts()), ShieldRequest(cpus=frozenset({3})))
    with pytest.raises(SkippedError, match="v2 has no cpuset"):
        plan_shield(f, ShieldRequest(cpus=frozenset({3}), backend="v2"))


def test_cpumask() -> None:
    assert format_cpumask({0, 1}) == "3" and format_cpumask({35}) == "00000008,00000000"
    assert parse_cpumask("00000008,00000001") == [0, 35]


def test_v1_plan() -> None:
    f = parse_facts(_facts(v1_cpuset="/sys/fs/cgroup/cpuset", v1_mems="0"))
    plan = plan_shield(
        f,
        ShieldRequest(
            cpus=frozenset({3}),
            priorities=(ThreadPriority(r"irq/\d+-eth0", "fifo", 99),),
            rt_runtime_us=-1,
        ),
    )
    s = plan.summary()
    assert s["backend"] == "v1" and s["housekeeping_cpus"] == "0-2"
    moves = [op["tid"] for op in plan.ops if op["op"] == "move"]
    assert moves == [1, 11, 20]  # not kthreadd, not per-CPU, not the task in /other
    assert [t.tid for t in plan.not_movable] == [2, 10]
    assert [t.tid for t in plan.left_alone] == [30]
    paths = {op.get("path"): op.get("value") for op in plan.ops}
    assert paths["/sys/fs/cgroup/cpuset/rtlab-shield/cpuset.cpus"] == "3"
    assert paths["/sys/fs/cgroup/cpuset/rtlab-system/cpuset.cpus"] == "0-2"
    assert paths["/proc/irq/30/smp_affinity_list"] == "0-2"
    assert "/proc/irq/31/smp_affinity_list" not in paths  # already off the shield
    assert paths["/proc/irq/default_smp_affinity"] == "7"
    assert paths["/sys/devices/virtual/workqueue/cpumask"] == "7"
    assert paths["/proc/sys/kernel/sched_rt_runtime_us"] == "-1"
    assert {"op": "sched", "tid": 20, "policy": "fifo", "priority": 99} in plan.ops


def test_v1_plan_without_tasks_moves_only_kthreads() -> None:
    # `tasks = false` with a cpuset shield: user tasks stay in the root cpuset (they were
    # moved regardless before), unbound kthreads still go to the system set
    f = parse_facts(_facts(v1_cpuset="/sys/fs/cgroup/cpuset", v1_mems="0"))
    plan = plan_shield(f, ShieldRequest(cpus=frozenset({3}), tasks=False))
    assert [op["tid"] for op in plan.ops if op["op"] == "move"] == [11, 20]
    assert plan.summary()["tasks_moved"] == 0
    none = plan_shield(f, ShieldRequest(cpus=frozenset({3}), tasks=False, kthreads=False))
    assert [op for op in none.ops if op["op"] == "move"] == []


def _fake_apply(root: Path, ops: list[dict[str, Any]]) -> None:
    """Execute write/mkdir ops on a fake tree the way cgroupfs would store them."""
    for op in ops:
        path = root / op["path"].lstrip("/")
        if op["op"] == "mkdir":
            path.mkdir()
            for f in (
                "cpuset.cpus",
                "cpuset.cpus.partition",
                "cpuset.cpus.effective",
                "cgroup.procs",
            ):
                (path / f).write_text("member\n" if f.endswith("partition") else "\n")
        elif op["op"] == "write":
            if path.name == "cgroup.subtree_control":
                cur = path.read_text().split()
                cur.append(op["value"].lstrip("+"))
                path.write_text(" ".join(cur) + "\n")
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(op["value"] + "\n")
                if path.name == "cpuset.cpus":
                    (path.parent / "cpuset.cpus.effective").write_text(op["value"] + "\n")


def test_v2_plan_against_fake_tree(tmp_path: Path) -> None:
    v2 = tmp_path / "sys/fs/cgroup"
    v2.mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (v2 / "cgroup.subtree_control").write_text("memory pids\n")
    f = parse_facts(
        _facts(
            v2="/sys/fs/cgroup",
            v2_cpuset=True,
            v2_partition=True,
            v1_cpuset="/cs",
            v2_subtree_control="memory pids",
        )
    )
    plan = plan_shield(f, ShieldRequest(cpus=frozenset({2, 3}), irqs=True))
    assert plan.backend == "v2"  # preferred over v1 when v2 has cpuset
    # first the affinity of every movable task as it is (a no-op that the journal keeps:
    # removing the partition resets affinities, the restore then sets these back)
    kept = [op for op in plan.ops if op["op"] == "affinity"]
    assert kept == [{"op": "affinity", "tid": t.tid, "cpus": sorted(t.affinity)}
                    for t in f.tasks if not t.per_cpu and t.affinity]
    assert plan.ops[:len(kept)] == kept
    assert plan.ops[len(kept)] == {
        "op": "write",
        "path": "/sys/fs/cgroup/cgroup.subtree_control",
        "value": "+cpuset",
        "undo": "-cpuset",
    }
    assert not [op for op in plan.ops if op["op"] == "move"]
    _fake_apply(tmp_path, [op for op in plan.ops if op["op"] != "affinity"])
    shield = v2 / "rtlab-shield"
    assert (shield / "cpuset.cpus").read_text().strip() == "2-3"
    assert (shield / "cpuset.cpus.partition").read_text().strip() == "isolated"
    assert "cpuset" in (v2 / "cgroup.subtree_control").read_text().split()

    # the shield's cpuset as the target's engine reports it (cgroup.cpusets of the
    # facts): the verifier reads nothing else, so a board is checked on the board
    (shield / "cpuset.cpus.effective").write_text("2-3\n")

    def with_cpusets() -> Any:
        def text(name: str) -> str:
            return (shield / name).read_text().strip()

        return parse_facts(_facts(
            v2="/sys/fs/cgroup", v2_cpuset=True, v2_partition=True,
            v2_subtree_control="cpuset memory pids",
            cpusets=[{"hierarchy": "v2", "path": plan.shield_cgroup, "cpus": text("cpuset.cpus"),
                      "cpus_effective": text("cpuset.cpus.effective"),
                      "partition": text("cpuset.cpus.partition")}]))

    v = verify_shield(with_cpusets(), {2, 3}, backend="v2", shield_cgroup=plan.shield_cgroup)
    cg = v["in_effect"]["cgroup"]
    assert cg["partition"] == "isolated" and cg["cpus_effective"] == "2-3" and cg["known"]
    assert not any("cgroup" in p for p in v["problems"]), v["problems"]
    (shield / "cpuset.cpus.partition").write_text("isolated invalid (Cpu list not exclusive)\n")
    v = verify_shield(with_cpusets(), {2, 3}, backend="v2", shield_cgroup=plan.shield_cgroup)
    assert any("partition is not in effect" in p for p in v["problems"])
    assert not v["in_effect"]["ok"]
    # already enabled: no subtree_control write; "root" partition on request
    f2 = parse_facts(
        _facts(
            v2="/sys/fs/cgroup",
            v2_cpuset=True,
            v2_partition=True,
            v2_subtree_control="cpuset memory",
        )
    )
    p2 = plan_shield(f2, ShieldRequest(cpus=frozenset({3}), v2_partition="root", irqs=False))
    part = [op for op in p2.ops if op.get("path", "").endswith("cpuset.cpus.partition")]
    changes = [op for op in p2.ops if op["op"] != "affinity"]
    assert changes[0]["op"] == "mkdir" and part[0]["value"] == "root"


def test_verify_reports_tasks_and_irqs() -> None:
    before = parse_facts(_facts(v1_cpuset="/cs"))
    raw = _facts(v1_cpuset="/cs")
    raw["irqs"][0]["counts"] = [0, 0, 0, 9]
    after = parse_facts(raw)
    v = verify_shield(after, {3}, shield_cgroup="/cs/rtlab-shield", before=before)
    cpu = v["in_effect"]["cpus"]["3"]
    assert [e["tid"] for e in cpu["user_tasks"]] == [1, 30]
    assert cpu["kthreads_per_cpu"] == 1 and cpu["irqs_fired"] == {"30": 4}
    assert cpu["irqs_affinity"] == [30] and v["requested"]["cpus"] == "3"


def test_verify_lists_own_processes_apart_from_leaks() -> None:
    """Every thread of a process the run put there on purpose (matched by process id,
    not thread id: the runner's second thread was reported as a leak) is listed under
    own_tasks; a foreign task on the shielded CPU is still a problem."""
    raw = _facts(v1_cpuset="/cs")
    base = raw["tasks"][0]
    raw["tasks"] += [
        {**base, "pid": 40, "tid": 40, "comm": "rtlab"},
        {**base, "pid": 40, "tid": 41, "comm": "rtlab"},  # a second thread of the runner
        {**base, "pid": 50, "tid": 50, "comm": "rtlab-probe"},  # a load on every CPU
        {**base, "pid": 50, "tid": 52, "comm": "rtlab-probe", "affinity": [3],
         "policy": "fifo", "priority": 98},
        {**base, "pid": 60, "tid": 60, "comm": "intruder", "affinity": [3]},
    ]
    f = parse_facts(raw)
    v = verify_shield(f, {3}, shield_cgroup="/cs/rtlab-shield",
                      own={40: "rtlab runner", 50: "load competitors"})
    cpu = v["in_effect"]["cpus"]["3"]
    assert sorted((e["tid"], e["what"]) for e in cpu["own_tasks"]) == [
        (40, "rtlab runner"), (41, "rtlab runner"), (50, "load competitors"),
        (52, "load competitors")]
    assert [e["tid"] for e in cpu["user_tasks"]] == [1, 30, 60]
    (leak,) = [p for p in v["problems"] if "user task" in p]
    assert leak.startswith("CPU 3: 3 user task(s)") and "intruder[60]" in leak
    assert "rtlab" not in leak
    # without `own` the same threads are leaks: nothing is hidden by name
    v = verify_shield(f, {3}, shield_cgroup="/cs/rtlab-shield")
    cpu = v["in_effect"]["cpus"]["3"]
    assert cpu["own_tasks"] == [] and len(cpu["user_tasks"]) == 7


def test_shield_from_journal(tmp_path: Path) -> None:
    j = tmp_path / "shield.journal"
    j.write_text(
        '{"type":"journal","schema":1,"pid":5,"detached":true}\n'
        '{"schema":1,"seq":1,"op":"mkdir","path":"/cs/rtlab-shield"}\n'
        '{"schema":1,"seq":2,"op":"write","path":"/cs/rtlab-shield/cpuset.cpus","value":"1",'
        '"old":""}\n{"schema":1,"seq":3,"op":"write","path":"/proc/irq/36/smp_affinity_list",'
        '"value":"0","old":"0-1"}\n{"schema":1,"seq":3,"op":"cancel"}\n{"schema":1,"seq":4,"op'
    )
    info = read_journal(j)
    assert info.detached and not info.held and len(info.entries) == 2  # cancelled, torn
    assert shield_from_journal(info.entries) == (frozenset({1}), "v1", "/cs/rtlab-shield")


def test_engine_facts_fields(probe_bin: str) -> None:
    out = subprocess.run([probe_bin, "sys", "facts"], capture_output=True, text=True, check=True)
    d = json.loads(out.stdout)
    assert d["type"] == "facts" and d["schema"] == 1
    for key in (
        "cpus_online",
        "cpus_possible",
        "tasks",
        "irqs",
        "default_smp_affinity",
        "cgroup",
        "sysctl",
    ):
        assert key in d
    t = d["tasks"][0]
    for key in (
        "pid",
        "tid",
        "comm",
        "kthread",
        "per_cpu",
        "affinity",
        "policy",
        "priority",
        "cgroups",
        "starttime",
    ):
        assert key in t
    if d["irqs"]:
        for key in ("irq", "name", "affinity", "effective", "managed", "threaded_pid"):
            assert key in d["irqs"][0]
    for key in ("v1_cpuset", "v2", "v2_cpuset", "v2_partition"):
        assert key in d["cgroup"]
    assert "kernel.sched_rt_runtime_us" in d["sysctl"]
    assert parse_facts(d).cpus_online


def test_affinity_plan_moves_tasks_and_unmanaged_irqs_only() -> None:
    from rtlab.system.shield_plan import plan_affinity

    raw = _facts()
    raw["irqs"].append({"irq": 40, "name": "nvme0q1", "affinity": [3], "effective": [3],
                        "managed": True, "threaded_pid": None, "counts": [0, 0, 0, 9]})
    f = parse_facts(raw)
    req = ShieldRequest(cpus=frozenset({3}), exclude_pids=frozenset({30}),
                        priorities=(ThreadPriority("irq/30-eth0", "fifo", 99),),
                        rt_runtime_us=-1)
    plan = plan_affinity(f, req, frozenset({0}))
    moved = {op["tid"] for op in plan.ops if op["op"] == "affinity"}
    # per-CPU ksoftirqd stays; the excluded pid 30 is left alone; kthreadd moves so
    # new kthreads start on the system CPUs
    assert moved == {1, 2, 11, 20} and [t.pid for t in plan.left_alone] == [30]
    assert all(op["cpus"] == [0] for op in plan.ops if op["op"] == "affinity")
    irq_paths = [op["path"] for op in plan.ops if op.get("path", "").startswith("/proc/irq/")]
    # IRQ 31 is already off CPU 3; the kernel-managed IRQ 40 refuses writes: not planned
    assert irq_paths == ["/proc/irq/30/smp_affinity_list", "/proc/irq/default_smp_affinity"]
    assert {"op": "sched", "tid": 20, "policy": "fifo", "priority": 99} in plan.ops
    rt = plan.ops.index({"op": "write", "path": "/proc/sys/kernel/sched_rt_runtime_us",
                         "value": "-1"})
    assert rt in plan.required
    assert plan.summary()["backend"] == "affinity" and plan.summary()["tasks_moved"] == 1


def test_affinity_plan_flags_and_errors() -> None:
    from rtlab.system.shield_plan import plan_affinity

    f = parse_facts(_facts())
    only_dsa = plan_affinity(f, ShieldRequest(cpus=frozenset({3}), tasks=False, irqs=False,
                                              default_smp_affinity=True), frozenset({0, 1}))
    assert only_dsa.ops == [{"op": "write", "path": "/proc/irq/default_smp_affinity",
                             "value": "3"}]
    no_kthreads = plan_affinity(f, ShieldRequest(cpus=frozenset({3}), kthreads=False,
                                                 irqs=False), frozenset({0}))
    assert {op["tid"] for op in no_kthreads.ops} == {1, 30}
    for system, msg in ((frozenset({3}), "overlap"), (frozenset({7}), "not online"),
                        (frozenset(), "empty")):
        with pytest.raises(UsageError, match=msg):
            plan_affinity(f, ShieldRequest(cpus=frozenset({3})), system)


def test_phase_recheck_names_what_arrived_and_what_fired() -> None:
    """Against the check made when the shield was applied: a task that may run on the
    shielded CPU only now is new (the ones already there are not), an own load is not a
    leak, and the IRQs counted on the CPU during the phase are listed."""
    raw = _facts(v1_cpuset="/cs")
    at_apply = verify_shield(parse_facts(raw), {3}, shield_cgroup="/cs/rtlab-shield")
    start = parse_facts(raw)
    base = raw["tasks"][0]
    raw["tasks"] += [
        {**base, "pid": 70, "tid": 70, "comm": "escapee", "affinity": [3]},
        {**base, "pid": 80, "tid": 81, "comm": "stress-ng-cpu", "affinity": [0, 3]},
    ]
    raw["irqs"][0]["counts"] = [0, 0, 0, 9]
    now = verify_shield(parse_facts(raw), {3}, shield_cgroup="/cs/rtlab-shield",
                        own={80: "load placed (placed on CPUs 0,3)"}, before=start)
    chk = phase_recheck(now, at_apply)
    assert [(t["tid"], t["comm"], t["cpu"]) for t in chk["new_tasks"]] == [(70, "escapee", 3)]
    assert chk["new_tasks_total"] == 1 and not chk["ok"]
    assert chk["irqs_fired"] == {"3": {"30": 4}}
    assert chk["own"] == [{"pid": 80, "what": "load placed (placed on CPUs 0,3)"}]
    assert any("escapee[70]" in p for p in chk["problems"])
    # nothing changed during the phase: nothing new, nothing fired
    same = phase_recheck(verify_shield(start, {3}, shield_cgroup="/cs/rtlab-shield",
                                       before=start), at_apply)
    assert same["new_tasks"] == [] and same["irqs_fired"] == {}


def test_verify_reads_back_thread_priorities() -> None:
    raw = _facts()
    for t in raw["tasks"]:
        if t["comm"] == "irq/30-eth0":
            t["policy"], t["priority"] = "fifo", 99
        if t["comm"] == "kcompactd0":
            t["policy"], t["priority"] = "fifo", 50
    f = parse_facts(raw)
    st = verify_shield(f, [3], backend="none",
                       priorities=[("irq/[0-9]+-eth0", "fifo", 99), ("kcompactd", "fifo", 98),
                                   ("irq/[0-9]+-eth1", "fifo", 99)])
    got = {(e["comm"], e["ok"]) for e in st["in_effect"]["thread_priorities"]}
    assert got == {("irq/30-eth0", True), ("kcompactd0", False)}
    probs = " | ".join(st["problems"])
    assert "kcompactd0[11] fifo/50" in probs and "no thread matches 'irq/[0-9]+-eth1'" in probs
    assert "thread_priorities" not in verify_shield(f, [3], backend="none")["in_effect"]
