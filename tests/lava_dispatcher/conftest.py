# SPDX-License-Identifier: MIT
"""Fixtures of the LAVA dispatcher tests: LAVA's own lava-run, from the private
directory scripts/lava/dispatcher.sh prepares (cached), and one emulated x86_64
PREEMPT_RT board of this package's own (tests/lab/boards.py) as the job's SSH device."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.boards import Board

REPO = Path(__file__).resolve().parent.parent.parent
DISPATCHER = REPO / "scripts" / "lava" / "dispatcher.sh"


@pytest.fixture(scope="package")
def lava_cache() -> Path:
    """LAVA's dispatcher unpacked into the cache (the first time: apt-get download of
    three .debs and a pip install into a private venv; then nothing)."""
    p = subprocess.run([str(DISPATCHER), "prepare"], capture_output=True, text=True,
                       timeout=1200, check=False)
    assert p.returncode == 0, f"dispatcher.sh prepare failed:\n{p.stdout}{p.stderr}"
    return Path(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="package")
def dut() -> Iterator[Board]:
    """The job's device: an x86_64-rt board with the static engine in /tmp/bin. It is
    rebootable (the lab's reboot command), so a test can boot it once with another
    kernel command line; such a test leaves it on that line (it runs last)."""
    from rtlab.engine.builds import engine_for

    board = Board.boot("lava-dut", "x86_64-rt", rebootable=True)
    print(f"\n[lab] {board.describe()}")
    try:
        install_engine(board, engine_for("x86_64"))
        yield board
    finally:
        board.stop()


def install_engine(board: Board, engine: Path) -> None:
    board.sh("mkdir -p /tmp/bin", check=True)
    board.copy_to(engine, "/tmp/bin/rtlab-probe")
