# SPDX-License-Identifier: MIT
"""Run a command as a child subreaper and report what it leaves behind.

    python subreaper.py REPORT.json TIMEOUT_S CMD [ARG...]

This process sets PR_SET_CHILD_SUBREAPER, so a process the command starts that
outlives its parent (a daemon that forks away) is re-parented here instead of to init.
After the command exits (or is killed at TIMEOUT_S), processes that are still alive
2 s later are leftovers: each is reported ({"pid", "exe", "cmdline"}) and then killed
with everything below it. REPORT.json gets {"returncode", "output", "leftovers"}. The
command's output goes to a file, not a pipe, so a daemon that keeps it open cannot
hang the wait.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def ppid_map() -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if fields[0] != "Z":
            out[int(entry.name)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    parents = ppid_map()
    found: list[int] = []
    todo = [root]
    while todo:
        p = todo.pop()
        kids = [pid for pid, pp in parents.items() if pp == p]
        found += kids
        todo += kids
    return found


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def describe(pid: int) -> dict[str, object]:
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace").strip()
    except OSError:
        cmdline = ""
    return {"pid": pid, "exe": exe, "cmdline": cmdline}


def main() -> int:
    report, timeout, cmd = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
        return 1
    with tempfile.TemporaryFile("w+") as out:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            returncode = child.wait()
            out.write(f"\n[subreaper: killed after {timeout:g} s]\n")
        # what is only on its way out gets 2 s
        t_end = time.monotonic() + 2.0
        while True:
            reap()
            left = descendants(os.getpid())
            if not left or time.monotonic() >= t_end:
                break
            time.sleep(0.05)
        leftovers = [describe(pid) for pid in left]
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        t_end = time.monotonic() + 10.0
        while descendants(os.getpid()) and time.monotonic() < t_end:
            reap()
            time.sleep(0.05)
        reap()
        out.seek(0)
        output = out.read()
    report.write_text(json.dumps({"returncode": returncode, "output": output,
                                  "leftovers": leftovers}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
