# SPDX-License-Identifier: MIT
"""Whether rtlab can get real-time priority and lock memory here."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import resource
import threading

from rtlab.system.doctor.check import Check, Code, Context, Finding, Severity


def try_fifo(priority: int = 1) -> str | None:
    """Try SCHED_FIFO in a short-lived thread; None on success, else the errno name."""
    result: list[str | None] = []

    def attempt() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            result.append(None)
        except OSError as exc:
            result.append(errno.errorcode.get(exc.errno or 0, str(exc)))

    thread = threading.Thread(target=attempt, name="rtlab-doctor-fifo", daemon=True)
    thread.start()
    thread.join(5)
    return result[0] if result else "timeout"


def try_mlock(size: int = 65536) -> str | None:
    """Lock and unlock a small buffer; None on success, else the errno name."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return "no libc"
    buf = ctypes.create_string_buffer(size)
    if libc.mlock(buf, ctypes.c_size_t(size)) != 0:
        return errno.errorcode.get(ctypes.get_errno(), "error")
    libc.munlock(buf, ctypes.c_size_t(size))
    return None


def _fmt_limit(value: int | None) -> str:
    if value is None:
        return "n/a"
    return "unlimited" if value == resource.RLIM_INFINITY or value < 0 else str(value)


def _limits_file(text: str | None) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for line in (text or "").splitlines():
        for key, label in (("rtprio", "Max realtime priority"), ("memlock", "Max locked memory")):
            if line.startswith(label):
                soft = line[len(label) :].split()[0]
                out[key] = -1 if soft == "unlimited" else int(soft)
    return out


class RtPrivilegeCheck(Check):
    """Without SCHED_FIFO the probe competes as an ordinary task, and without locked memory it
    takes page faults: both measure the setup, not the system."""

    id = "rt-privileges"
    title = "Real-time priority and memory locking for rtlab"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        if s.live:
            euid = os.geteuid()
            rtprio: int | None = resource.getrlimit(resource.RLIMIT_RTPRIO)[0]
            memlock: int | None = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
            fifo = try_fifo()
            mlock = try_mlock()
            attempted = True
        else:
            status = s.read("proc/self/status") or ""
            uid_line = next((ln for ln in status.splitlines() if ln.startswith("Uid:")), "")
            euid = int(uid_line.split()[2]) if len(uid_line.split()) > 2 else -1
            lim = _limits_file(s.read("proc/self/limits"))
            rtprio, memlock = lim.get("rtprio"), lim.get("memlock")
            fifo = mlock = None
            attempted = False
        facts = {
            "euid": euid,
            "rlimit_rtprio": _fmt_limit(rtprio),
            "rlimit_memlock": _fmt_limit(memlock),
            "attempted": attempted,
            "sched_fifo": "ok" if attempted and fifo is None else fifo,
            "mlock": "ok" if attempted and mlock is None else mlock,
        }
        who = "root" if euid == 0 else f"euid {euid}" if euid >= 0 else "unknown user"
        summary = f"{who}, RLIMIT_RTPRIO {_fmt_limit(rtprio)}, RLIMIT_MEMLOCK {_fmt_limit(memlock)}"
        grant = (
            "run as root, or grant the probe capabilities: setcap "
            "cap_sys_nice,cap_ipc_lock+ep rtlab-probe, or in /etc/security/limits.conf: "
            "'@realtime - rtprio 99' and '@realtime - memlock unlimited'"
        )
        if not attempted:
            if euid < 0 and rtprio is None:
                return self.unknown("not the live system and no proc/self/status or limits", facts)
            no_rt = euid != 0 and not rtprio
            no_lock = euid != 0 and memlock is not None and 0 <= memlock < 64 * 2**20
            if no_rt or no_lock:
                code = Code.NO_RT_PRIORITY if no_rt else Code.NO_MEMLOCK
                return self.problem(
                    Severity.WARNING, code, summary + " (not attempted: not the live system)",
                    advice=grant, facts=facts)
            return self.finding(
                Severity.INFO, summary + " (not attempted: not the live system)", facts=facts
            )
        if fifo is not None:
            hint = (
                " (EPERM as root: see the rt-group check, cpu.rt_runtime_us of this cgroup)"
                if euid == 0 and fifo == "EPERM"
                else ""
            )
            return self.problem(
                Severity.CRITICAL, Code.NO_RT_PRIORITY,
                f"{summary}; SCHED_FIFO refused: {fifo}{hint}",
                advice=grant
                if euid != 0
                else "give this process's cpu cgroup RT runtime "
                "(see rt-group) or move it to the root cgroup",
                facts=facts)
        if mlock is not None or (euid != 0 and memlock is not None and 0 <= memlock < 64 * 2**20):
            return self.problem(
                Severity.WARNING, Code.NO_MEMLOCK,
                f"{summary}; memory locking limited ({mlock or 'small RLIMIT_MEMLOCK'})",
                advice=grant, facts=facts)
        return self.ok(f"{summary}; SCHED_FIFO and mlock work", facts)
