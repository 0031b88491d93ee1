# SPDX-License-Identifier: MIT
"""Fixtures of the load tests: a recording journal stand-in, tool skips, leak checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rtlab.loads import proc


class Recorder:
    """Stands in for the journal session: remembers what it was told."""

    def __init__(self) -> None:
        self.spawns: list[tuple[int, int]] = []
        self.netns: list[str] = []

    def record_spawn(self, pgid: int, starttime: int) -> None:
        self.spawns.append((pgid, starttime))

    def record_netns(self, name: str) -> None:
        self.netns.append(name)

    def leftovers(self) -> list[proc.ProcStat]:
        return [m for pgid, _ in self.spawns for m in proc.group_members(pgid)]


@pytest.fixture
def recorder() -> Recorder:
    rec = Recorder()
    yield rec
    # safety net: never leave anything behind, even when a test fails
    for pgid, start in rec.spawns:
        proc.reap_recorded(pgid, start, grace_s=1.0)
    for ns in rec.netns:
        if (Path("/run/netns") / ns).exists():
            from rtlab.loads.net import delete_netns

            delete_netns(ns)


def need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


@pytest.fixture
def stress_ng() -> None:
    need("stress-ng")
