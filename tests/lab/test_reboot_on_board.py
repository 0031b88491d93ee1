# SPDX-License-Identifier: MIT
"""The reboot interface on an emulated x86_64 PREEMPT_RT board of this module's own
(a rebootable lab board: `boards.py reboot DIR` restarts its qemu with a one-shot
-append, docs/lab.md): boot knobs booted once and verified in effect from the board's
files, the original command line restored; a boot that never comes back is one line
and the board is back on its original; after kill -9 of the host mid-way, the board's
next reboot brings the original back. The logic in detail: tests/tune/test_reboot*.py.
Latency is not measured here."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from rtlab.engine.board import open_target
from rtlab.errors import RtlabError
from rtlab.tune.bootcheck import read_boot_files, tasks_on, verify_boot
from rtlab.tune.reboot import Rebooter, compose, normalise
from tests.support.waiting import wait_for

from .boards import Board
from .conftest import record_boot

REPO = Path(__file__).resolve().parents[2]
KNOBS = {"isolcpus": "1", "nohz_full": "1", "rcu_nocbs": "1", "irqaffinity": "0"}
# two unpinned busy loops for a few seconds: one of them runs on CPU 1 unless isolated
SPIN = ("for i in 1 2; do timeout 6 sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & "
        "done; sleep 2")


@pytest.fixture(scope="module")
def board() -> Iterator[Board]:
    b = Board.boot("lab-reboot", "x86_64-rt", rebootable=True)
    record_boot(b)
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def ssh_env(board: Board, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("RTLAB_SSH_CONFIG", str(board.ssh_config))
    return {**os.environ, "PYTHONPATH": str(REPO)}


def rebooter(board: Board, **kw: object) -> Rebooter:
    opts: dict = {"timeout_s": 240.0, **kw}
    return Rebooter(board.alias, board.reboot_command, **opts)


def cmdline_and_boot(board: Board) -> tuple[str, str]:
    r = board.sh("cat /proc/cmdline /proc/sys/kernel/random/boot_id", timeout=60)
    assert r.returncode == 0, r.stderr
    cmd, boot_id = r.stdout.splitlines()
    return cmd, boot_id


def diag(board: Board) -> str:
    return f"boots: {board.boots}\nconsole tail:\n{board.console_log()[-1500:]}"


def test_boot_knobs_once_in_effect_then_the_original(board: Board,
                                                     ssh_env: dict[str, str]) -> None:
    r = rebooter(board)
    original = r.original()
    assert normalise(original) == normalise(board.original_append)
    with open_target(board.alias) as t:
        before = read_boot_files(t)
        assert [c.in_effect for c in verify_boot(KNOBS, before)] == [False] * 4
        board.sh(SPIN, timeout=60)
        busy = read_boot_files(t)
    assert tasks_on([1], busy), "an ordinary task should run on CPU 1 before isolation"

    asked = compose(original, set=KNOBS)
    res = r.boot(asked)
    assert res.rebooted and normalise(res.cmdline) == normalise(asked), diag(board)
    assert board.boots[-1] == ("once", asked)
    with open_target(board.alias) as t:
        board.sh(SPIN, timeout=60)
        after = read_boot_files(t)
    checks = verify_boot(KNOBS, after)
    assert [(c.param, c.in_effect, c.source) for c in checks] == [
        (p, True, "state") for p in KNOBS], checks
    assert tasks_on([1], after) == [], [t.describe() for t in tasks_on([1], after)]

    back = r.restore()
    assert back.rebooted and back.boot_id != res.boot_id
    assert cmdline_and_boot(board)[0] == original
    assert board.boots[-1] == ("original", board.original_append)
    assert not r.restore().rebooted  # on the original already: nothing done


def test_a_boot_that_never_comes_back_is_one_line_and_the_original_is_back(
        board: Board, ssh_env: dict[str, str]) -> None:
    r = rebooter(board, timeout_s=30.0, restore_timeout_s=240.0)
    original = r.original()
    _, boot_before = cmdline_and_boot(board)
    # no init to run and no reboot on the panic: the kernel hangs, SSH never answers
    asked = compose(original, set={"rdinit": "/nonexistent", "init": "/nonexistent",
                                   "panic": "0"})
    with pytest.raises(RtlabError) as err:
        r.boot(asked)
    msg = err.value.one_line()
    assert "\n" not in msg
    assert msg.startswith(f"the board {board.alias} did not come back within 30 s after "
                          "booting 'panic=0 rdinit=/nonexistent init=/nonexistent -panic=1'; "
                          "booted the original command line through the reboot command"), msg
    cmd, boot_now = cmdline_and_boot(board)
    assert cmd == original and boot_now != boot_before
    assert [why for why, _ in board.boots[-2:]] == ["once", "original"], diag(board)


def test_after_kill_9_mid_way_the_next_reboot_boots_the_original(
        board: Board, ssh_env: dict[str, str], tmp_path: Path) -> None:
    original, _ = cmdline_and_boot(board)
    asked = compose(original, set={"isolcpus": "1", "nowatchdog": None})
    script = textwrap.dedent(f"""
        import sys, time
        from rtlab.tune.reboot import Rebooter
        r = Rebooter({board.alias!r}, {board.reboot_command!r}, timeout_s=240)
        r.boot({asked!r})
        print("booted", flush=True)
        time.sleep(600)
        r.restore()  # never reached: killed before
    """)
    host = subprocess.Popen([sys.executable, "-c", script], env=ssh_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert host.stdout is not None
        line = host.stdout.readline()
        assert line == "booted\n", (line, host.stderr.read() if host.poll() is not None else "")
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait(30)
    cmd, boot_once = cmdline_and_boot(board)
    assert cmd == asked  # the host is gone, the one-shot boot still runs

    # the next reboot, by anyone (here: the board itself) boots the original
    with contextlib.suppress(subprocess.TimeoutExpired):  # the session ends with the board
        board.ssh("reboot", timeout=60)
    cmd = wait_for(lambda: (lambda c, b: c if b != boot_once else None)(*cmdline_and_boot(board)),
                   240, "the board back after its own reboot", poll=2.0,
                   diag=lambda: diag(board), ignore=(AssertionError, ValueError,
                                                     subprocess.TimeoutExpired))
    assert cmd == original, diag(board)
    assert board.boots[-1] == ("reboot", board.original_append), diag(board)
