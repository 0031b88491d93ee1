# SPDX-License-Identifier: MIT
"""Pre-flight: can this process get real-time scheduling and locked memory?

Checked before anything is measured, by trying: a short-lived thread asks for
the requested policy and priority (on Linux `sched_setscheduler(0, ...)` acts
on the calling thread only), and RLIMIT_MEMLOCK / root tell whether mlockall
can succeed.
"""

from __future__ import annotations

import os
import resource
import threading
from dataclasses import dataclass, field

from rtlab.errors import UsageError

_POLICIES = {"fifo": "SCHED_FIFO", "rr": "SCHED_RR"}


@dataclass
class Privileges:
    rt_ok: bool
    mlock_ok: bool
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.rt_ok and self.mlock_ok

    def reason(self) -> str:
        return "; ".join(self.problems)

    def fix(self) -> str:
        fixes = []
        if not self.rt_ok:
            fixes.append("run as root, or grant CAP_SYS_NICE (`setcap cap_sys_nice+ep`) or "
                         "`ulimit -r 99`")
        if not self.mlock_ok:
            fixes.append("grant CAP_IPC_LOCK or `ulimit -l unlimited`")
        fixes.append("or pass --allow-non-rt to measure anyway "
                     "(results marked NOT real-time valid)")
        return "; ".join(fixes)


_CAP_IPC_LOCK = 14


def _has_capability(bit: int) -> bool:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError):
        pass
    return False


def _try_policy(policy: str, priority: int) -> str | None:
    """None if a thread could switch to `policy`/`priority`, else the error text."""
    const = getattr(os, _POLICIES[policy])
    error: list[str] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, const, os.sched_param(priority))
        except OSError as exc:
            error.append(exc.strerror or str(exc))

    t = threading.Thread(target=probe, name="rtlab-rt-check", daemon=True)
    t.start()
    t.join(5.0)
    return error[0] if error else None


def check_privileges(policy: str, priority: int) -> Privileges:
    """Real-time scheduling for `policy` (fifo|rr) at `priority`, and mlockall. A priority
    the policy does not have is a UsageError (exit 2), not a missing privilege."""
    problems: list[str] = []
    rt_ok = True
    if policy in _POLICIES:
        const = getattr(os, _POLICIES[policy])
        lo, hi = os.sched_get_priority_min(const), os.sched_get_priority_max(const)
        if not lo <= priority <= hi:  # the kernel's EINVAL: no privilege would help
            raise UsageError(f"priority {priority} is out of range for {policy} ({lo}-{hi})",
                             hint="give --priority (or the scenario's priority) in that range")
        err = _try_policy(policy, priority)
        if err is not None:
            rt_ok = False
            soft = resource.getrlimit(resource.RLIMIT_RTPRIO)[0]
            limit = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
            problems.append(
                f"cannot get {_POLICIES[policy]} priority {priority} "
                f"({err}; RLIMIT_RTPRIO is {limit})"
            )
    mlock_ok = os.geteuid() == 0 or _has_capability(_CAP_IPC_LOCK)
    if not mlock_ok:
        soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
        # mlockall(MCL_CURRENT|MCL_FUTURE) of a small probe needs a few tens of MB.
        mlock_ok = soft == resource.RLIM_INFINITY or soft >= 256 * 1024 * 1024
        if not mlock_ok:
            problems.append(f"cannot lock memory (RLIMIT_MEMLOCK is {soft // 1024} KiB)")
    return Privileges(rt_ok, mlock_ok, problems)
