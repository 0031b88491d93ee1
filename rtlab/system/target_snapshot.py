# SPDX-License-Identifier: MIT
"""What the host reads of a target through its engine's copies of /proc and /sys
(`rtlab.engine.snapshot`): the doctor's tree, and a process's ancestors.

A board has no Python: what the host's checks read from /proc and /sys there, the
board's engine copies (docs/sys-protocol.md, "snapshot"), and the host lays the
copy out as a tree that `SysRoot` reads like `rtlab doctor --root DIR`. Nothing on
the target changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.engine.snapshot import record_bytes, snapshot
from rtlab.loads.board import board_processes

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

# Everything the doctor's checks read (rtlab/system/doctor), as absolute patterns.
DOCTOR_PATTERNS: tuple[str, ...] = (
    "/proc/cmdline", "/proc/config.gz", "/proc/cpuinfo", "/proc/stat", "/proc/swaps",
    "/proc/interrupts",
    "/proc/self/cgroup", "/proc/self/limits", "/proc/self/mountinfo", "/proc/self/status",
    "/proc/sys/kernel/*", "/proc/sys/vm/swappiness",
    "/proc/[0-9]*/comm", "/proc/[0-9]*/stat", "/proc/[0-9]*/fd/*",
    "/proc/irq/*/smp_affinity_list", "/proc/irq/*/effective_affinity_list",
    "/proc/irq/default_smp_affinity",
    "/sys/class/dmi/id/product_name", "/sys/class/dmi/id/sys_vendor",
    "/sys/devices/system/clocksource/clocksource0/*",
    "/sys/devices/system/cpu/online", "/sys/devices/system/cpu/isolated",
    "/sys/devices/system/cpu/nohz_full", "/sys/devices/system/cpu/smt/control",
    "/sys/devices/system/cpu/cpufreq/boost", "/sys/devices/system/cpu/intel_pstate/no_turbo",
    "/sys/devices/system/cpu/cpuidle/*", "/sys/devices/system/cpu/vulnerabilities/*",
    "/sys/devices/system/cpu/cpu[0-9]*/cache/index*/*",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor",
    "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/*",
    "/sys/devices/system/cpu/cpu[0-9]*/topology/*",
    "/sys/devices/system/node/online", "/sys/devices/virtual/workqueue/cpumask",
    "/sys/hypervisor/type", "/sys/kernel/realtime",
    "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/defrag",
    "/sys/fs/cgroup/cpu/cpu.rt_runtime_us", "/sys/fs/cgroup/cpu,cpuacct/cpu.rt_runtime_us",
    "/boot/config-*", "/etc/os-release",
    "/sys/kernel/tracing/available_tracers", "/sys/kernel/tracing/osnoise/options",
    "/sys/kernel/debug/tracing/available_tracers",
)


def _inside(dest: Path, path: str) -> Path | None:
    """dest/path for an absolute path without `..` (anything else is dropped)."""
    parts = [p for p in path.split("/") if p]
    if not path.startswith("/") or any(p in (".", "..") for p in parts) or not parts:
        return None
    return dest.joinpath(*parts)


def materialize(records: Iterable[dict[str, Any]], dest: Path) -> int:
    """Lay snapshot records out below `dest` (files, symlinks, directories); how many."""
    n = 0
    for rec in records:
        kind = rec.get("type")
        where = _inside(dest, str(rec.get("path", "")))
        if where is None or kind not in ("file", "link", "dir"):
            continue
        if kind == "dir":
            where.mkdir(parents=True, exist_ok=True)
            n += 1
            continue
        where.parent.mkdir(parents=True, exist_ok=True)
        if kind == "link":
            if not where.is_symlink() and not where.exists():
                os.symlink(str(rec.get("target", "")), where)
        else:
            where.write_bytes(record_bytes(rec))
        n += 1
    return n


def doctor_tree(transport: Transport, dest: Path) -> Path:
    """Copy what the doctor reads from the target into `dest` (a tree for `SysRoot`)."""
    materialize(snapshot(transport, DOCTOR_PATTERNS), dest)
    (dest / "proc").mkdir(parents=True, exist_ok=True)
    (dest / "sys").mkdir(parents=True, exist_ok=True)
    return dest


def ancestors(transport: Transport, pid: int) -> list[tuple[int, str]]:
    """(pid, comm) of the ancestors of process `pid` on the target, nearest first,
    without pid 1 (e.g. the SSH server processes that started it)."""

    table = {st.pid: st for st in board_processes(transport)}
    out: list[tuple[int, str]] = []
    cur = table[pid].ppid if pid in table else 0
    while cur > 1 and cur in table and len(out) < 64:
        out.append((cur, table[cur].comm))
        cur = table[cur].ppid
    return out
