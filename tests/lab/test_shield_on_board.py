# SPDX-License-Identifier: MIT
"""Every fact of a board is read on the board: `rtlab shield` reports what is in effect
there (its cpuset, not a path of this machine), `rtlab board clean` removes the target
lock and its directory (or refuses while a run holds the board), and a board whose
cpuset controller is bound to a cgroup v1 hierarchy beside cgroup v2 is shielded there
or refused with one line. Each leaves the board as it found it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.cli_errors import one_error_line

from .boards import Board
from .test_rtlab_on_boards import board_facts, rtlab, same_state

__all__ = ["board_facts"]  # the fixture, shared with test_rtlab_on_boards

SHIELD = "/sys/fs/cgroup/rtlab-shield"


def _shield(board: Board, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return rtlab(board.ssh_config, tmp, "shield", *args, "--target", board.alias, store=False)


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def _engine(board: Board) -> str:
    """The engine rtlab keeps on the board (after any rtlab command there)."""
    found = board.sh("ls /tmp/rtlab.0/rtlab-probe-* 2>/dev/null").stdout.split()
    assert len(found) == 1, found
    return found[0]


def test_shield_in_effect_is_read_on_the_board(x86_board: Board, tmp_path: Path,
                                              board_facts: Callable[[Board], Any]) -> None:
    """The cgroup v2 board's shield, applied and shown: its cpuset is in effect there
    (this machine's cgroups are not asked), and the reset restores the board exactly."""
    before = board_facts(x86_board)
    assert before.cgroup.v2_cpuset and before.cgroup.cpuset(SHIELD) is None
    try:
        out = _ok(_shield(x86_board, tmp_path, "--cpus", "1", "--irqs", "--kthreads"))
        assert "does not exist" not in out, out
        assert f"cpuset {SHIELD}: CPU 1 in effect, partition isolated" in out, out
        status = _ok(_shield(x86_board, tmp_path, "--status"))
        assert "does not exist" not in status, status
        assert f"cpuset {SHIELD}: CPU 1 in effect, partition isolated" in status, status
        doc = json.loads(_ok(_shield(x86_board, tmp_path, "--status", "--json")))
        cg = doc["in_effect"]["cgroup"]
        assert cg == {"backend": "v2", "path": SHIELD, "cpus_effective": "1",
                      "partition": "isolated", "known": True}, cg
        assert not [p for p in doc["problems"] if "cgroup" in p or "partition" in p]
        during = board_facts(x86_board).cgroup.cpuset(SHIELD)
        assert during is not None and during.cpus_effective == "1"
    finally:
        off = _shield(x86_board, tmp_path, "--reset")
    _ok(off)
    after = board_facts(x86_board)
    assert same_state(before, after) == []
    assert after.cgroup.cpuset(SHIELD) is None


def test_board_clean_removes_the_lock_unless_it_is_held(
        x86_board: Board, tmp_path: Path, board_facts: Callable[[Board], Any]) -> None:
    """`board clean` refuses while a holder owns the board (one line naming it, nothing
    removed), keeps the lock and its directory while a journal is pending, and else
    removes them with the engine: /run/rtlab is gone, the rest of the board unchanged."""
    before = board_facts(x86_board)  # the engine is on the board now
    engine = _engine(x86_board)
    run_before = x86_board.sh("ls -a /run").stdout.split()

    def clean() -> subprocess.CompletedProcess[str]:
        return rtlab(x86_board.ssh_config, tmp_path, "board", "clean", "--target",
                     x86_board.alias, store=False)

    # another owner of the board: an applier holding the lock while its stdin is open
    holder = subprocess.Popen(
        ["ssh", "-F", str(x86_board.ssh_config), x86_board.alias, "--",
         f"{engine} sys apply --journal /run/rtlab/lab-holder.journal "
         "--lock /run/rtlab/target.lock --owner 'lab test holder'"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        assert b'"ready"' in holder.stdout.readline()  # it holds the lock now
        busy = clean()
        assert busy.returncode == 1, busy.stderr
        line = one_error_line(busy)
        assert "lab test holder" in line and "nothing was removed" in line, line
        assert _engine(x86_board) == engine
        assert x86_board.sh("test -f /run/rtlab/target.lock").returncode == 0
    finally:
        holder.communicate(timeout=60)  # stdin closed: it restores (nothing) and exits
    assert holder.returncode == 0

    # a pending journal (a detached applier's, as `rtlab shield` leaves one) keeps both
    x86_board.ssh(engine, "sys", "apply", "--journal", "/run/rtlab/lab-pending.journal",
                  "--detach", input='{"op":"write","path":"/proc/sys/kernel/'
                  f'sched_rt_runtime_us","value":"{before.sysctl["kernel.sched_rt_runtime_us"]}"}}'
                  "\n", check=True)
    kept = clean()
    assert kept.returncode == 0, kept.stderr
    assert "lab-pending.journal" in kept.stdout and "rtlab restore" in kept.stdout, kept.stdout
    assert x86_board.sh("ls /run/rtlab").stdout.split() == ["lab-pending.journal",
                                                            "target.lock"]
    restored = rtlab(x86_board.ssh_config, tmp_path, "restore", "--target", x86_board.alias,
                     store=False)
    assert restored.returncode == 0, restored.stderr

    gone = clean()
    assert gone.returncode == 0, gone.stderr
    assert "/run/rtlab/target.lock and /run/rtlab" in gone.stdout, gone.stdout
    assert x86_board.sh("ls /run/rtlab").returncode != 0
    assert x86_board.sh("ls /tmp/rtlab.0").returncode != 0
    assert x86_board.sh("ls -a /run").stdout.split() == [n for n in run_before
                                                         if n != "rtlab"]
    after = board_facts(x86_board)  # puts the engine back, which the next tests use
    assert same_state(before, after) == []


def test_cpuset_bound_to_cgroup_v1_beside_v2(fresh_board: Callable[..., Board],
                                            tmp_path: Path,
                                            board_facts: Callable[[Board], Any]) -> None:
    """cgroup v1 and v2 both mounted, cpuset bound to the v1 hierarchy (v2 cannot have it
    then). Mounted outside /sys/fs/cgroup: refused with one line naming where cpuset is
    and how to give it back, nothing changed. Mounted below it: the shield is made in
    that v1 hierarchy, in effect there, and the reset restores the board exactly."""
    board = fresh_board("aarch64-rt", cpus=2, mem_mb=256)
    before = board_facts(board)
    assert before.cgroup.v2_cpuset and before.cgroup.v1_cpuset is None
    board.sh("mkdir -p /tmp/cpuset && mount -t cgroup -o cpuset none /tmp/cpuset", check=True)
    try:
        bound = board_facts(board)
        assert bound.cgroup.v1_cpuset == "/tmp/cpuset" and not bound.cgroup.v2_cpuset
        proc = _shield(board, tmp_path, "--cpus", "1", "--irqs", "--kthreads")
        assert proc.returncode == 4, proc.stderr
        line = one_error_line(proc)
        assert "cgroup v1 hierarchy mounted at /tmp/cpuset" in line, line
        assert "umount /tmp/cpuset" in line, line
        assert not board.sh("ls /run/rtlab/*.journal 2>/dev/null").stdout.strip()
        assert same_state(bound, board_facts(board)) == []
    finally:
        board.sh("umount /tmp/cpuset; rmdir /tmp/cpuset")
    v1 = "/sys/fs/cgroup/lab-v1-cpuset"
    board.sh(f"mkdir {v1} && mount -t cgroup -o cpuset none {v1}", check=True)
    try:
        bound = board_facts(board)
        assert bound.cgroup.v1_cpuset == v1
        out = _ok(_shield(board, tmp_path, "--cpus", "1", "--irqs", "--kthreads"))
        assert f"v1 cpuset {v1}/rtlab-shield" in out, out
        assert f"cpuset {v1}/rtlab-shield: CPU 1 in effect" in out, out
        assert "does not exist" not in _ok(_shield(board, tmp_path, "--status"))
        _ok(_shield(board, tmp_path, "--reset"))
        assert same_state(bound, board_facts(board)) == []
    finally:
        board.sh(f"umount {v1}; rmdir {v1}")
    assert same_state(before, board_facts(board)) == []
