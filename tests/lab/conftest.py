# SPDX-License-Identifier: MIT
"""Fixtures of the emulated board lab (tests/lab/boards.py, docs/lab.md).

- x86_board, arm64_board: an x86_64-rt board ("lab-x86", 10.77.0.1 on eth1) and an
  aarch64-rt board ("lab-arm64", 10.77.0.2 on eth1), each booted once for the tests of
  this package and joined by a link (lab_link); they are stopped when the package's
  tests end, so the emulators do not load the machine for the tests that follow.
  Tests must leave them as they found them.
- fresh_board: a factory, fresh_board(kind="x86_64-rt", **Board.boot options) -> Board,
  for a test that kills things or changes the board for good; its boards are stopped
  when the test ends.

Each boot (board, accelerator, boot time) is printed as it happens (visible with -s)
and listed again in a "rtlab lab boards" section at the end of the test session.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .boards import Board, LinkSpec, link_pair

_BOOTS: list[str] = []
_fresh_names = itertools.count(1)


def record_boot(board: Board) -> None:
    """Note a board's boot for the session summary (and print it now)."""
    line = board.describe()
    _BOOTS.append(line)
    print(f"\n[lab] {line}")


def record_note(line: str) -> None:
    """Note anything else about the lab for the session summary."""
    _BOOTS.append(line)
    print(f"\n[lab] {line}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _BOOTS:
        terminalreporter.section("rtlab lab boards")
        for line in _BOOTS:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def lab_note() -> Callable[[str], None]:
    """lab_note(line): add a line to the session's "rtlab lab boards" summary."""
    return record_note


@pytest.fixture(scope="package")
def lab_link() -> tuple[LinkSpec, LinkSpec]:
    """The session's board-to-board link: (x86 end 10.77.0.1/24, arm64 end 10.77.0.2/24)."""
    return link_pair("10.77.0")


def _session_board(name: str, kind: str, link: LinkSpec) -> Iterator[Board]:
    board = Board.boot(name, kind, link=link)
    record_boot(board)
    try:
        yield board
    finally:
        board.stop()


@pytest.fixture(scope="package")
def x86_board(lab_link: tuple[LinkSpec, LinkSpec]) -> Iterator[Board]:
    """The session's x86_64 PREEMPT_RT board, "lab-x86", 10.77.0.1 on its link."""
    yield from _session_board("lab-x86", "x86_64-rt", lab_link[0])


@pytest.fixture(scope="package")
def arm64_board(lab_link: tuple[LinkSpec, LinkSpec]) -> Iterator[Board]:
    """The session's aarch64 PREEMPT_RT board, "lab-arm64", 10.77.0.2 on its link."""
    yield from _session_board("lab-arm64", "aarch64-rt", lab_link[1])


@pytest.fixture
def fresh_board() -> Iterator[Callable[..., Board]]:
    """fresh_board(kind="x86_64-rt", **options) -> a newly booted board of its own."""
    boards: list[Board] = []

    def make(kind: str = "x86_64-rt", **options: Any) -> Board:
        board = Board.boot(f"fresh-{next(_fresh_names)}", kind, **options)
        boards.append(board)
        record_boot(board)
        return board

    try:
        yield make
    finally:
        for board in boards:
            board.stop()
