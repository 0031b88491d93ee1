# SPDX-License-Identifier: MIT
"""A full snapshot of the system state the `sys` primitives can change.

Used by the tests to prove that apply + restore leaves the machine exactly as
it was: every task's affinity, cgroup (all v1 hierarchies and v2), scheduling
policy and priority; every IRQ's smp_affinity; default_smp_affinity; the cpuset
directory tree and its files; the sysctls and sysfs files the shield touches.
Run as a script to print it (`python -m tests.support.snapshot`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SYSCTLS = (
    "/proc/sys/kernel/sched_rt_runtime_us",
    "/proc/sys/kernel/sched_rt_period_us",
    "/proc/irq/default_smp_affinity",
    "/sys/devices/virtual/workqueue/cpumask",
)
CPUSET_FILES = ("cpuset.cpus", "cpuset.mems", "cpuset.cpu_exclusive", "cpuset.sched_load_balance")


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def tasks() -> dict[int, dict[str, object]]:
    out: dict[int, dict[str, object]] = {}
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            tids = list((pid_dir / "task").iterdir())
        except OSError:
            continue
        for tdir in tids:
            tid = int(tdir.name)
            try:
                stat = (tdir / "stat").read_text()
                cg = (tdir / "cgroup").read_text().strip()
                aff = sorted(os.sched_getaffinity(tid))
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            out[tid] = {
                "comm": stat[stat.index("(") + 1 : stat.rindex(")")],
                "starttime": int(fields[19]),
                "affinity": aff,
                "cgroup": cg,
                "rt_priority": int(fields[37]),
                "policy": int(fields[38]),
            }
    return out


def irqs() -> dict[int, str | None]:
    return {
        int(d.name): _read(d / "smp_affinity_list")
        for d in Path("/proc/irq").iterdir()
        if d.name.isdigit()
    }


def cpuset_tree(root: str = "/sys/fs/cgroup/cpuset") -> dict[str, dict[str, str | None]]:
    out: dict[str, dict[str, str | None]] = {}
    if not Path(root).is_dir():
        return out
    for dirpath, _dirs, _files in os.walk(root):
        out[dirpath] = {f: _read(Path(dirpath) / f) for f in CPUSET_FILES}
    return out


def snapshot() -> dict[str, object]:
    return {
        "tasks": tasks(),
        "irqs": irqs(),
        "files": {p: _read(p) for p in SYSCTLS},
        "cpusets": cpuset_tree(),
    }


def diff(before: dict, after: dict) -> list[str]:
    """Differences that matter: tasks present in both snapshots (same tid and
    start time) must be identical; everything else must be equal."""
    out: list[str] = []
    tb, ta = before["tasks"], after["tasks"]
    for tid, b in tb.items():
        a = ta.get(tid)
        if a is None or a["starttime"] != b["starttime"]:
            continue  # exited meanwhile
        for key in ("affinity", "cgroup", "policy", "rt_priority"):
            if a[key] != b[key]:
                out.append(f"task {tid} ({b['comm']}): {key} {b[key]!r} -> {a[key]!r}")
    for key in ("irqs", "files", "cpusets"):
        if before[key] != after[key]:
            out.append(f"{key}: {before[key]!r} -> {after[key]!r}")
    return out


if __name__ == "__main__":
    import json

    json.dump(snapshot(), sys.stdout, indent=1, default=str)
    print()
