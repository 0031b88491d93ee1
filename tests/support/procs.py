# SPDX-License-Identifier: MIT
"""The processes of this machine as /proc shows them, for tests that check what a
command started and what it left behind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3, the state, first:
    [0] state, [1] ppid, [2] pgrp, ...), or None when the process is gone or unreadable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, stat_fields) of every process that could be read."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = stat_fields(entry.name)
            if fields is not None:
                yield int(entry.name), fields


def group_members(pgid: int) -> list[int]:
    """Live processes (no zombies) of process group pgid."""
    return [pid for pid, f in processes() if f[0] != "Z" and int(f[2]) == pgid]


def children_of(ppid: int) -> set[int]:
    """Processes whose parent is ppid."""
    return {pid for pid, f in processes() if int(f[1]) == ppid}
