# SPDX-License-Identifier: MIT
"""Helpers of the system-control tests."""

from __future__ import annotations

import os
from pathlib import Path

from rtlab.system.facts import Facts


def ancestors_and_self(pid: int) -> set[int]:
    out = set()
    while pid > 1:
        out.add(pid)
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return out


def foreign_pids(facts: Facts, me: int | None = None) -> frozenset[int]:
    """User processes that are not this test process or its descendants: the
    tests leave them where they are (other people's work on a shared machine;
    `rtlab shield` without --exclude would move them too)."""
    me = os.getpid() if me is None else me
    out = set()
    for t in facts.tasks:
        if t.kthread:
            continue
        try:
            if me not in ancestors_and_self(t.pid):
                out.add(t.pid)
        except (OSError, ValueError):
            continue
    return frozenset(out)
