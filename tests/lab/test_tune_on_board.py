# SPDX-License-Identifier: MIT
"""`rtlab tune` on the emulated x86_64 PREEMPT_RT board, as a user runs it (a
subprocess over SSH with the lab's ssh config). Latency under emulation means
nothing and is never asserted; behaviour is:

- runtime knobs on the session board: the tune completes with a ledger, every block is
  a stored run of the board, the board is as before; while the tune holds the board
  another rtlab is refused in one line naming it; kill -9 of the host in a shielded
  block leaves the board restored at once, and --resume finishes the tune;
- boot knobs on a rebootable board of this module's own: reboots happen, each boot is
  verified in effect (isolated CPUs, nohz_full, no ordinary task on the isolated CPU),
  kill -9 of the host after a one-shot boot leaves the runtime state restored and the
  board's next reboot boots the original, --resume finishes and the board ends on its
  original command line; a reboot command that fails and a boot that never comes back
  are one line each in the ledger and the original is back.
The logic in detail: tests/tune/test_tune_boots.py, tests/tune/test_reboot*.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_errors import one_error_line
from tests.support.store_reading import stored_dicts
from tests.support.waiting import wait_for

from .boards import Board, board_facts
from .conftest import record_boot
from .test_rtlab_on_boards import same_state

REPO = Path(__file__).resolve().parents[2]
# The runtime tune of part a and the boot tune of part b: short blocks, one pair, a
# budget that lets each knob be screened once or twice (the module takes minutes)
RUNTIME_KNOBS = "cpuset-shield,timer-migration-off,watchdogs-off"
BOOT_KNOBS = "isolcpus,nohz_full"
COMMON = ("--block", "3s", "--pairs", "1", "--stats", "max", "--budget", "2m")
ISO = "isolcpus=managed_irq,domain,1"


def env_for(board: Board, tmp: Path) -> dict[str, str]:
    return {**os.environ, "RTLAB_SSH_CONFIG": str(board.ssh_config), "PYTHONPATH": str(REPO),
            "XDG_DATA_HOME": str(tmp / "xdg"), "COLUMNS": "200"}


def rtlab(board: Board, tmp: Path, *args: str, timeout: float = 900
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rtlab", *args], capture_output=True,
                          text=True, env=env_for(board, tmp), timeout=timeout, check=False)


class Tune:
    """`rtlab tune ...` running in the background, its own process group; its output
    lines collected as they come."""

    def __init__(self, board: Board, tmp: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rtlab", "tune", *args], env=env_for(board, tmp),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, pattern: str, timeout: float) -> str:
        rx = re.compile(pattern)

        def seen() -> str | None:
            if self.proc.poll() is not None and not self._reader.is_alive():
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"the tune ended ({self.proc.returncode}) before "
                                     f"{pattern!r}:\n" + "\n".join(self.lines) + "\n" + err)
            return next((ln for ln in self.lines if rx.search(ln)), None)

        return wait_for(seen, timeout, f"a tune line {pattern!r}", poll=0.2,
                        diag=lambda: "\n".join(self.lines[-20:]))

    def tune_id(self) -> str:
        m = re.match(r"tune (tune-\S+):", self.wait_line(r"^tune tune-", 300))
        assert m
        return m.group(1)

    def kill9(self) -> None:
        """rtlab and its ssh processes at once, as a host that dies."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)
        self._reader.join(10)


def facts(board: Board) -> Any:
    """The board's `sys facts`, read there by its engine (a watcher thread reads too)."""
    return board_facts(board)


def board_journals(board: Board) -> list[str]:
    return board.sh("ls /run/rtlab/*.journal 2>/dev/null").stdout.split()


def engines_running(board: Board) -> list[str]:
    """The board's rtlab-probe processes (probes, loads, appliers)."""
    return [ln for ln in board.sh("ps").stdout.splitlines() if "rtlab-probe" in ln]


def wait_restored(board: Board) -> None:
    """The board restored by itself: no journal left, no engine running (the appliers,
    probes and loads saw their controller gone)."""
    wait_for(lambda: not board_journals(board) and not engines_running(board), 90,
             "the board to restore by itself", poll=0.5,
             ignore=(subprocess.TimeoutExpired,),
             diag=lambda: "\n".join(board_journals(board) + engines_running(board)))


def load_state(tunes: Path, tune_id: str) -> dict[str, Any]:
    return json.loads((tunes / tune_id / "state.json").read_text())


def block_runs(state: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(experiment, side's label, run id) of every block of a tune's state."""
    out = []
    for e in state["experiments"]:
        for b in e["blocks"]:
            out.append((e["name"], e["a_label"] if b["side"] == "A" else e["b_label"],
                        b["run_id"]))
    return out


def check_blocks_stored(state: dict[str, Any], store: Path, board: Board
                        ) -> dict[str, dict[str, Any]]:
    """Every block is a stored run of the board, of its configuration; the runs by id."""
    runs = {r["run_id"]: r for r in stored_dicts(store)}
    blocks = block_runs(state)
    assert blocks
    for name, label, run_id in blocks:
        run = runs.get(run_id)
        assert run is not None, f"block {run_id} of {name} is not in the store"
        target = run["provenance"]["host"]["target"]
        assert target["machine"] == "x86_64", target
        assert run["provenance"]["engine"]["system"]["preempt"] == "rt"
        assert run["scenario"]["variant"] == label, (run["scenario"]["variant"], label)
        assert run["scenario"]["comparison"] == state["id"]
        assert all(c["samples"] > 0 for c in run["phases"][0]["channels"])
    return runs


def cmdline(board: Board) -> str:
    r = board.sh("cat /proc/cmdline", timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def diag(board: Board) -> str:
    return f"boots: {board.boots}\nconsole tail:\n{board.console_log()[-1500:]}"


# ------------------------------------------------------------------ a: runtime knobs
def test_runtime_knobs_tune_survives_kill_9_refuses_others_and_leaves_the_board_as_before(
        x86_board: Board, tmp_path: Path) -> None:
    before = facts(x86_board)
    tunes, store = tmp_path / "tunes", tmp_path / "store.db"
    args = ("--target", x86_board.alias, "--knobs", RUNTIME_KNOBS, *COMMON,
            "--dir", str(tunes), "--store", str(store))
    # kill -9 of the host in a shielded block: a watcher on the board says when the
    # cpuset shield is up (it polls there, so a 3-s block is not missed)
    watcher = subprocess.Popen(
        ["ssh", "-F", str(x86_board.ssh_config), x86_board.alias, "sh", "-c",
         shlex.quote("i=0; while [ $i -lt 6000 ]; do for d in /sys/fs/cgroup/rtlab-shield "
                     "/sys/fs/cgroup/*/rtlab-shield; do [ -d $d ] && { echo up; exit 0; }; "
                     "done; i=$((i+1)); sleep 0.1; done; echo never")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tune = Tune(x86_board, tmp_path, *args)
    try:
        tune_id = tune.tune_id()
        assert watcher.stdout is not None
        assert watcher.stdout.readline().strip() == "up", "\n".join(tune.lines)
        tune.kill9()
    finally:
        if tune.proc.poll() is None:
            tune.kill9()
        watcher.kill()
        watcher.wait(30)
    assert any("(cpuset-shield); " in ln for ln in tune.lines), tune.lines
    wait_restored(x86_board)  # at once: the board's applier saw its controller gone
    assert same_state(before, facts(x86_board)) == []
    assert load_state(tunes, tune_id)["stage"] != "done"

    resumed = Tune(x86_board, tmp_path, "--resume", tune_id, "--dir", str(tunes))
    try:
        resumed.wait_line(r"^\[(screen|combine|confirm)\] .*: block \d+/", 600)
        # while the tune holds the board, another rtlab is refused in one line naming it
        other = rtlab(x86_board, tmp_path, "run", "--probe", "timer", "--duration", "2s",
                      "--no-report", "--target", x86_board.alias, "--store",
                      str(tmp_path / "other.db"), timeout=300)
        assert other.returncode == 1, (other.returncode, other.stderr)
        line = one_error_line(other)
        assert f"{x86_board.alias} is in use by rtlab tune pid {resumed.proc.pid} on " \
            in line, line
        assert f"rtlab tune --resume {tune_id}" in line, line
        assert not (tmp_path / "other.db").exists()
        resumed.proc.wait(900)
        resumed._reader.join(30)
    finally:
        if resumed.proc.poll() is None:
            resumed.kill9()
    out = "\n".join(resumed.lines)
    err = resumed.proc.stderr.read() if resumed.proc.stderr else ""
    assert resumed.proc.returncode == 0, out + err
    assert "Traceback" not in err
    assert f"latency ledger of {tune_id}" in out, out
    state = load_state(tunes, tune_id)
    assert state["stage"] == "done"
    ledger = out[out.index("latency ledger of"):]
    for knob in RUNTIME_KNOBS.split(","):
        assert re.search(rf"^  {re.escape(knob)}\s+[A-Z]", ledger, re.M), (knob, ledger)
    check_blocks_stored(state, store, x86_board)
    assert same_state(before, facts(x86_board)) == []
    assert not board_journals(x86_board)


# ------------------------------------------------------------------ b: boot knobs
@pytest.fixture(scope="module")
def rb() -> Iterator[Board]:
    """A rebootable x86_64 board of this module's own (the session's boards are not)."""
    b = Board.boot("lab-tune", "x86_64-rt", rebootable=True)
    record_boot(b)
    try:
        yield b
    finally:
        b.stop()


def test_boot_knobs_through_reboots_kill_9_after_a_once_boot_then_resume(
        rb: Board, tmp_path: Path) -> None:
    original = cmdline(rb)
    before = facts(rb)
    tunes, store = tmp_path / "tunes", tmp_path / "store.db"
    args = ("--target", rb.alias, "--knobs", BOOT_KNOBS, "--reboot-cmd", rb.reboot_command,
            *COMMON, "--dir", str(tunes), "--store", str(store))
    boots_before = len(rb.boots)
    tune = Tune(rb, tmp_path, *args)
    try:
        tune_id = tune.tune_id()
        tune.wait_line(rf"^    {re.escape(ISO)}: in effect \(/sys/devices/system/cpu/"
                       r"isolated = 1\)", 600)
        # the first block on the isolcpus line starts: its probe runs on the board (a
        # watcher there polls, so a 3-s block is not missed on a loaded host)
        watch = rb.sh("i=0; while [ $i -lt 1200 ]; do grep -q isolcpus= /proc/cmdline && "
                      "ps | grep -q '[r]tlab-probe.* timer ' && { echo up; exit 0; }; "
                      "i=$((i+1)); sleep 0.1; done; echo never", timeout=300)
        assert watch.stdout.strip() == "up", "\n".join(tune.lines)
        tune.kill9()
    finally:
        if tune.proc.poll() is None:
            tune.kill9()
    # restored at once: no journal, no probe, load or applier left (the boot's own
    # tasks are not those of `before`: the board's state is compared on the original
    # line at the end); the one-shot line still runs
    wait_restored(rb)
    assert ISO in cmdline(rb).split(), diag(rb) + "\n" + "\n".join(tune.lines)
    assert rb.boots[-1][0] == "once", diag(rb)
    killed = load_state(tunes, tune_id)["reboot"]
    assert killed["original"] == original
    assert killed["booted"] == {"isolcpus": "managed_irq,domain,1"}
    assert [c["in_effect"] for c in killed["checks"][ISO]] == [True, True]

    # the board's own next reboot boots the original (the one-shot)
    with contextlib.suppress(subprocess.TimeoutExpired):
        rb.ssh("reboot", timeout=60)
    wait_for(lambda: len(rb.boots) > boots_before + 1 and rb.boots[-1][0] == "reboot"
             and cmdline(rb) == original, 300, "the board back on its original",
             poll=2.0, diag=lambda: diag(rb),
             ignore=(AssertionError, subprocess.TimeoutExpired))
    assert rb.boots[-1] == ("reboot", rb.original_append)

    done = rtlab(rb, tmp_path, "tune", "--resume", tune_id, "--dir", str(tunes))
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "Traceback" not in done.stderr
    assert (f"the board runs its original command line again (the one-shot boot of {ISO} "
            "ended with a reboot)") in out, out
    state = load_state(tunes, tune_id)
    assert state["stage"] == "done"
    spec = state["reboot"]
    # every boot of a knob's line was verified in effect from the board's files
    assert spec["original"] == original and spec["booted"] == {}
    assert {b["params"] for b in spec["boots"]} >= {ISO, "original"}, spec["boots"]
    assert spec["checks"][ISO] == [
        {"param": "isolcpus", "value": "managed_irq,domain,1", "in_effect": True,
         "evidence": "/sys/devices/system/cpu/isolated = 1", "source": "state"},
        {"param": "tasks", "value": "1", "in_effect": True,
         "evidence": "no ordinary task on isolated CPUs 1", "source": "tasks"}]
    if "nohz_full=1" in spec["checks"]:
        assert spec["checks"]["nohz_full=1"] == [
            {"param": "nohz_full", "value": "1", "in_effect": True,
             "evidence": "/sys/devices/system/cpu/nohz_full = 1", "source": "state"}]
    # no ordinary task on the isolated CPU after its boots nor after its blocks
    looks = spec["tasks"][ISO]
    assert {t["when"] for t in looks} == {"boot", "blocks"}, looks
    assert all(t["isolated"] == [1] and t["count"] == 0 for t in looks), looks
    # each block ran on the line of its configuration, in effect (the run's provenance)
    runs = check_blocks_stored(state, store, rb)
    for name, label, run_id in block_runs(state):
        system = runs[run_id]["provenance"]["engine"]["system"]
        knobs = label.split("+")
        assert (ISO in system["cmdline"].split()) == ("isolcpus" in knobs), (name, label)
        assert system["cpus_isolated"] == ([1] if "isolcpus" in knobs else []), (name, label)
        assert system["nohz_full"] == ([1] if "nohz_full" in knobs else []), (name, label)
    # and the board ends on its original command line, as before
    assert cmdline(rb) == original
    assert rb.boots[-1][0] in ("original", "reboot"), diag(rb)
    # the settings as before; tasks are not compared: after reboots a task id names
    # another task (the kernel places unbound kthreads of each boot anew)
    assert [d for d in same_state(before, facts(rb)) if not d.startswith("task ")] == []
    led = rtlab(rb, tmp_path, "tune", "--show", tune_id, "--dir", str(tunes))
    assert led.returncode == 0 and f"latency ledger of {tune_id}" in led.stdout


def test_a_failing_reboot_command_and_a_boot_that_never_returns_are_one_line_each(
        rb: Board, tmp_path: Path) -> None:
    """Through `rtlab tune`: isolcpus's boot command fails (exit 3), nohz_full's boot
    hangs (no init, panic=0): each knob is failed with one line, the tune goes on,
    and the board runs its original command line."""
    original = cmdline(rb)
    wrapper = tmp_path / "reboot.sh"
    wrapper.write_text(
        "case \"$RTLAB_BOOT:$RTLAB_CMDLINE\" in\n"
        "  once:*isolcpus=*) echo 'farm: no free power port' >&2; exit 3;;\n"
        "  once:*) RTLAB_CMDLINE=\"$RTLAB_CMDLINE rdinit=/nonexistent init=/nonexistent "
        "panic=0\"; export RTLAB_CMDLINE;;\n"
        "esac\n"
        f"exec {rb.reboot_command}\n")
    tunes = tmp_path / "tunes"
    done = rtlab(rb, tmp_path, "tune", "--target", rb.alias, "--knobs", BOOT_KNOBS,
                 "--reboot-cmd", f"sh {shlex.quote(str(wrapper))}", "--reboot-timeout", "30s",
                 *COMMON, "--dir", str(tunes), "--store", str(tmp_path / "store.db"))
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "Traceback" not in done.stderr
    ledger = out[out.index("latency ledger of"):]
    iso = re.search(r"^  isolcpus\s+FAILED\s+(.*)$", ledger, re.M)
    assert iso and iso.group(1) == ("the reboot command failed (RTLAB_BOOT=once, exit 3): "
                                    "farm: no free power port"), ledger
    nohz = re.search(r"^  nohz_full\s+FAILED\s+(.*)$", ledger, re.M)
    assert nohz and nohz.group(1).startswith(
        f"the board {rb.alias} did not come back within 30 s after booting 'nohz_full=1'; "
        "booted the original command line through the reboot command (back after "), ledger
    assert "recommended: the baseline" in ledger
    assert cmdline(rb) == original
    assert [why for why, _ in rb.boots[-2:]] == ["once", "original"], diag(rb)
    assert "nohz_full=1 rdinit=/nonexistent" in rb.boots[-2][1]
