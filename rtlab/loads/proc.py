# SPDX-License-Identifier: MIT
"""Process groups of load processes: spawn, inspect, signal, reap.

Every load process is the leader of its own process group and gets
PR_SET_PDEATHSIG=SIGKILL, so it dies with the rtlab process that started it
(note: the signal fires when the *thread* that forked it exits; start loads
from the runner's main thread). Its workers stay in its group, so the group id
plus the leader's start time (field 22 of /proc/PID/stat) identify everything
it started; that pair is what the journal records and what `reap_recorded`
(and `rtlab restore`) use after a `kill -9` of rtlab.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rtlab.errors import MissingToolError
from rtlab.lifeline import die_with_parent

PROC = Path("/proc")

# tool -> Debian package that provides it
TOOL_PACKAGES = {
    "stress-ng": "stress-ng",
    "sockperf": "sockperf",
    "ip": "iproute2",
    "taskset": "util-linux",
    "chrt": "util-linux",
    "unshare": "util-linux",
}


def require_tool(name: str) -> str:
    """Absolute path of `name`, or SkippedError naming the package to install."""
    path = shutil.which(name)
    if path is None:
        package = TOOL_PACKAGES.get(name, name)
        raise MissingToolError(f"{name} is not installed", (name,),
                               hint=f"apt-get install {package}")
    return path


@dataclass(frozen=True)
class ProcStat:
    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int
    utime: int
    stime: int
    starttime: int


def read_stat(pid: int) -> ProcStat | None:
    """Parsed /proc/PID/stat, or None if the process is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return parse_stat(pid, raw)


def parse_stat(pid: int, raw: str) -> ProcStat:
    """The text of a /proc/PID/stat (of this machine, or copied from a board's)."""
    lpar, rpar = raw.index("("), raw.rindex(")")
    comm = raw[lpar + 1:rpar]
    f = raw[rpar + 2:].split()
    # f[0] is field 3 (state); field N is f[N - 3]
    return ProcStat(pid=pid, comm=comm, state=f[0], ppid=int(f[1]), pgrp=int(f[2]),
                    utime=int(f[11]), stime=int(f[12]), starttime=int(f[19]))


def starttime(pid: int) -> int | None:
    st = read_stat(pid)
    return None if st is None else st.starttime


def group_members(pgid: int, *, include_zombies: bool = False) -> list[ProcStat]:
    """Every process whose process group is `pgid` (zombies left out unless asked)."""
    out: list[ProcStat] = []
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        st = read_stat(int(entry.name))
        if st is None or st.pgrp != pgid:
            continue
        if st.state == "Z" and not include_zombies:
            continue
        out.append(st)
    return out


def cpus_allowed(pid: int) -> str | None:
    """The Cpus_allowed_list line of /proc/PID/status ('0-1'), None if gone."""
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def killpg(pgid: int, sig: int) -> bool:
    """Signal a group; False if it no longer exists."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def spawn(argv: Sequence[str], *, cwd: Path, stdout: IO[Any] | int,
          stderr: IO[Any] | int, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start argv as the leader of a new process group with PDEATHSIG=SIGKILL."""
    return subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=cwd,
        env=env, close_fds=True, process_group=0,
        preexec_fn=die_with_parent(signal.SIGKILL),
    )


def wait_group_empty(pgid: int, deadline: float) -> bool:
    """Poll until no live member is left in `pgid` or `deadline` (monotonic) passes."""
    while True:
        if not group_members(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def reap_recorded(pgid: int, starttime_ticks: int, *, grace_s: float = 2.0) -> dict[str, Any]:
    """Kill what is left of a recorded load group (what `rtlab restore` does for `spawned`).

    The group is ours if its leader still has the recorded start time. If the
    leader is gone but members remain, they are ours too: Linux does not hand
    out a PID again while it is still some group's id, so the number cannot
    have been reused; members started before the leader are left alone anyway.
    SIGTERM to the group, SIGKILL after `grace_s`, then wait (init reaps them).
    Returns {"pgid", "status": "gone"|"mismatch"|"reaped"|"stuck", "members": [pid...]}.
    """
    leader = read_stat(pgid)
    if leader is not None and leader.state != "Z" and leader.starttime != starttime_ticks:
        return {"pgid": pgid, "status": "mismatch", "members": []}
    members = [m for m in group_members(pgid) if m.starttime >= starttime_ticks]
    if not members:
        return {"pgid": pgid, "status": "gone", "members": []}
    pids = [m.pid for m in members]
    killpg(pgid, signal.SIGTERM)
    if not wait_group_empty(pgid, time.monotonic() + grace_s):
        killpg(pgid, signal.SIGKILL)
        if not wait_group_empty(pgid, time.monotonic() + grace_s):
            return {"pgid": pgid, "status": "stuck", "members": pids}
    return {"pgid": pgid, "status": "reaped", "members": pids}
