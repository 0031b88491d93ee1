# SPDX-License-Identifier: MIT
"""Reading a target's files through its engine (`rtlab-probe sys snapshot`).

A board has no Python: what the host's checks read from /proc and /sys there, the
board's engine copies (docs/sys-protocol.md, "snapshot"), and the host lays the
copy out as a tree that `SysRoot` reads like `rtlab doctor --root DIR`. Nothing on
the target changes.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.errors import RtlabError

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

SNAPSHOT_TIMEOUT_S = 120.0

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
)


def snapshot(transport: Transport, patterns: Iterable[str],
             timeout_s: float = SNAPSHOT_TIMEOUT_S, *, max_file: int | None = None,
             max_total: int | None = None) -> list[dict[str, Any]]:
    """The records of `rtlab-probe sys snapshot` for these patterns on the target
    (`max_file`/`max_total`: the engine's caps per file and in all, in bytes)."""
    args = ["sys", "snapshot"]
    if max_file is not None:
        args += ["--max-file", str(max_file)]
    if max_total is not None:
        args += ["--max-total", str(max_total)]
    proc = transport.run(args, input="".join(f"{p}\n" for p in patterns),
                         timeout_s=timeout_s)
    if proc.returncode != 0:
        line = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise RtlabError(f"cannot read files on {transport.target}: {line}")
    out: list[dict[str, Any]] = []
    done = False
    for raw in proc.stdout.splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict):
            done = done or rec.get("type") == "snapshot_done"
            out.append(rec)
    if not done:
        raise RtlabError(f"the file snapshot of {transport.target} ended early")
    return out


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
        elif "base64" in rec:
            where.write_bytes(base64.b64decode(str(rec["base64"])))
        else:
            where.write_text(str(rec.get("text", "")))
        n += 1
    return n


def doctor_tree(transport: Transport, dest: Path) -> Path:
    """Copy what the doctor reads from the target into `dest` (a tree for `SysRoot`)."""
    materialize(snapshot(transport, DOCTOR_PATTERNS), dest)
    (dest / "proc").mkdir(parents=True, exist_ok=True)
    (dest / "sys").mkdir(parents=True, exist_ok=True)
    return dest


def parse_stat(text: str) -> tuple[str, int] | None:
    """(comm, ppid) from the text of /proc/PID/stat."""
    try:
        comm = text[text.index("(") + 1 : text.rindex(")")]
        return comm, int(text[text.rindex(")") + 2 :].split()[1])
    except (ValueError, IndexError):
        return None


def ancestors(transport: Transport, pid: int) -> list[tuple[int, str]]:
    """(pid, comm) of the ancestors of process `pid` on the target, nearest first,
    without pid 1 (e.g. the SSH server processes that started it)."""
    table: dict[int, tuple[str, int]] = {}
    for rec in snapshot(transport, ["/proc/[0-9]*/stat"]):
        parts = str(rec.get("path", "")).split("/")
        if rec.get("type") == "file" and len(parts) == 4 and parts[2].isdigit():
            st = parse_stat(str(rec.get("text", "")))
            if st is not None:
                table[int(parts[2])] = st
    out: list[tuple[int, str]] = []
    cur = table.get(pid, ("", 0))[1]
    while cur > 1 and cur in table and len(out) < 64:
        out.append((cur, table[cur][0]))
        cur = table[cur][1]
    return out
