# SPDX-License-Identifier: MIT
"""Where tracefs is on this machine, and the events a capture records by default.

Recording is the engine's (`rtlab-probe ... --trace-dir`, docs/engine-output.md "Trace
capture"): one recorder for this machine and for boards. The host finds tracefs here
(or mounts it) before a traced run starts, so a kernel without it is told in one line
(`rtlab.runner.tracing.check_available`), and decodes and attributes what the engine
wrote (`rtlab.trace.capture`, `rtlab.trace.attribution`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rtlab.errors import SkippedError

# Events the attribution uses, the engine's default --trace-events (the same list; a test
# holds them equal). Absent ones are skipped individually and reported.
DEFAULT_EVENTS: tuple[str, ...] = (
    "sched/sched_switch",
    "sched/sched_waking",
    "sched/sched_wakeup",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "timer/hrtimer_start",
    "timer/hrtimer_expire_entry",
    "timer/hrtimer_expire_exit",
    "ipi/ipi_raise",
    "ipi/ipi_entry",
    "ipi/ipi_exit",
    "ipi/ipi_send_cpu",
    "ipi/ipi_send_cpumask",
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
    "irq_vectors/reschedule_entry",
    "irq_vectors/reschedule_exit",
    "irq_vectors/call_function_entry",
    "irq_vectors/call_function_exit",
    "irq_vectors/call_function_single_entry",
    "irq_vectors/call_function_single_exit",
    "irq_vectors/irq_work_entry",
    "irq_vectors/irq_work_exit",
    "irq_vectors/x86_platform_ipi_entry",
    "irq_vectors/x86_platform_ipi_exit",
    "irq_vectors/thermal_apic_entry",
    "irq_vectors/thermal_apic_exit",
    "power/cpu_idle",
)

def _mounts() -> list[tuple[str, str]]:
    out = []
    with contextlib.suppress(OSError), open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                out.append((parts[1].replace("\\040", " "), parts[2]))
    return out


@dataclass
class TraceFS:
    """Where tracefs is and whether this process mounted it (then it must unmount it)."""

    path: Path
    mounted_by_us: bool = False

    @classmethod
    def find(cls) -> TraceFS | None:
        for mnt, fstype in _mounts():
            if fstype == "tracefs":
                return cls(Path(mnt))
        for cand in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
            if Path(cand, "trace_clock").exists():
                return cls(Path(cand))
        return None

    @classmethod
    def find_or_mount(cls, mountpoint: str = "/sys/kernel/tracing") -> TraceFS:
        """Find tracefs or mount it; raises SkippedError with the reason if impossible."""
        found = cls.find()
        if found:
            return found
        if os.geteuid() != 0:
            raise SkippedError(
                "tracefs is not mounted and mounting it needs root",
                hint="run as root or mount -t tracefs nodev /sys/kernel/tracing",
            )
        if not Path(mountpoint).is_dir():
            raise SkippedError(
                f"no tracefs mount point {mountpoint} (kernel without tracing?)",
                hint="a kernel with CONFIG_FTRACE and CONFIG_TRACING",
            )
        res = subprocess.run(
            ["mount", "-t", "tracefs", "nodev", mountpoint],
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode != 0 or not Path(mountpoint, "trace_clock").exists():
            msg = (res.stderr or "").strip() or "tracefs not available"
            raise SkippedError(
                f"cannot mount tracefs: {msg}",
                hint="a kernel with CONFIG_FTRACE and CONFIG_TRACING",
            )
        return cls(Path(mountpoint), mounted_by_us=True)

    def unmount_if_ours(self) -> bool:
        """Unmount if we mounted it and nobody else has an instance in it."""
        if not self.mounted_by_us:
            return False
        inst = self.path / "instances"
        if inst.is_dir() and any(inst.iterdir()):
            return False  # someone else is tracing; leave it mounted
        res = subprocess.run(["umount", str(self.path)], capture_output=True, check=False)
        if res.returncode == 0:
            self.mounted_by_us = False
            return True
        return False
