# SPDX-License-Identifier: MIT
"""`--target labgrid:PLACE` against a real labgrid coordinator and exporter
(tests/labgrid/conftest.py): rtlab run, doctor and monitor go through the place, which
nobody else can acquire meanwhile; a killed exporter or coordinator stops the run with
one line and the board restored; a kill -9 of rtlab releases the place; bad input gets
one line; the place's power control power-cycles the board (rtlab's reboot interface).
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.lab.boards import Board, board_facts
from tests.lab.test_rtlab_on_boards import same_state
from tests.support.cli_errors import one_error_line

from .conftest import EMPTY, PLACE, Farm, _free_port

TARGET = f"labgrid:{PLACE}"


def _journals(board: Board) -> str:
    return board.sh("ls /run/rtlab/*.journal 2>/dev/null; true", timeout=60).stdout.strip()


def _run(farm: Farm, tmp: Path, duration: str) -> subprocess.Popen[str]:
    return farm.popen_rtlab("run", "--probe", "timer", "--duration", duration,
                            "--no-progress", "--no-report", "--store", str(tmp / "store.db"),
                            "--target", TARGET)


def _until_measuring(farm: Farm, run: subprocess.Popen[str]) -> None:
    """Until the run holds the place and its journal is on the board."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if run.poll() is not None:
            _out, err = run.communicate()
            pytest.fail(f"the run ended early ({run.returncode}): {err[-2000:]}")
        if ".journal" in _journals(farm.board):
            return
        time.sleep(0.3)
    pytest.fail("the run never journaled on the board")


def _restored(board: Board, before: Any) -> None:
    deadline = time.monotonic() + 60
    while _journals(board) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _journals(board), "the board kept a journal: it was not restored"
    diff = same_state(before, board_facts(board))
    assert not diff, diff


def _me(farm: Farm) -> str:
    """The holder name labgrid gives this user on this host (host/user)."""
    return (f"{os.environ.get('LG_HOSTNAME', socket.gethostname())}/"
            f"{os.environ.get('LG_USERNAME', getpass.getuser())}")


def test_run_doctor_monitor_go_through_the_place(up: Farm, tmp_path: Path) -> None:
    """doctor and monitor acquire the place and release it at the end; a run holds it,
    and meanwhile neither another labgrid user nor rtlab as another user gets it."""
    doc = up.rtlab("doctor", "--target", TARGET, "--json")
    assert doc.returncode in (0, 3), doc.stderr
    assert "Traceback" not in doc.stderr
    assert json.loads(doc.stdout), doc.stdout
    assert up.state() == (None, True)

    run = _run(up, tmp_path, "8s")
    _until_measuring(up, run)
    holder, _ = up.state()
    assert holder == _me(up)
    other = up.client("-p", PLACE, "acquire", user="rtlab-other-team")
    assert other.returncode != 0, other.stdout
    refused = up.rtlab("doctor", "--target", TARGET, user="rtlab-other-team")
    assert refused.returncode == 1, refused.stderr
    line = one_error_line(refused)
    assert f"labgrid place {PLACE} is held by {holder.split('/')[0]}/" in line, line
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err
    assert "stored" in out + err
    assert up.state() == (None, True)

    mon = up.rtlab("monitor", "--target", TARGET, "--duration", "6s", "--segment", "3s",
                   "--store", str(tmp_path / "mon.db"), "--state-dir", str(tmp_path / "mon"))
    assert mon.returncode == 0, mon.stderr
    assert f"{TARGET}: stored segment" in mon.stderr, mon.stderr
    assert up.state() == (None, True)


def test_a_place_this_user_holds_is_used_and_kept(up: Farm) -> None:
    got = up.client("-p", PLACE, "acquire")
    assert got.returncode == 0, got.stderr
    try:
        doc = up.rtlab("doctor", "--target", TARGET)
        assert doc.returncode in (0, 3), doc.stderr
        assert up.state()[0] == _me(up)  # still held: it was the user's
    finally:
        up.client("-p", PLACE, "release")


def test_a_bare_connection_goes_through_the_place(up: Farm,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`rtlab board clean` of a board no engine build exists for (e.g. a MIPS board)
    uses a bare connection: it holds the place and reaches its NetworkService (it once
    dialled the spec itself)."""
    from rtlab.engine.board import connection

    for key in ("LG_COORDINATOR", "RTLAB_SSH_CONFIG"):
        monkeypatch.setenv(key, up.env()[key])
    with connection(TARGET) as conn:
        assert up.state()[0] == _me(up)
        got = conn.run(["uname", "-m"], input="", timeout_s=60, what="uname")
        assert got.stdout.strip() == "x86_64", got
    assert up.state() == (None, True)


@pytest.mark.parametrize("kill", ["exporter", "coordinator"])
def test_a_killed_farm_stops_the_run_with_one_line(up: Farm, tmp_path: Path,
                                                   kill: str) -> None:
    before = board_facts(up.board)
    run = _run(up, tmp_path, "120s")
    _until_measuring(up, run)
    up.stop(kill)
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if "labgrid" in ln]
    assert len(lines) == 1, err
    assert ("exporter" if kill == "exporter" else "coordinator") in lines[0], lines[0]
    assert "can no longer be confirmed" in lines[0], lines[0]
    _restored(up.board, before)
    if kill == "exporter":  # the coordinator saw the release
        assert up.state()[0] is None


def test_kill9_of_rtlab_releases_the_place(up: Farm, tmp_path: Path) -> None:
    before = board_facts(up.board)
    run = _run(up, tmp_path, "120s")
    _until_measuring(up, run)
    assert up.state()[0] == _me(up)
    os.kill(run.pid, signal.SIGKILL)
    run.communicate(timeout=60)
    up.wait(lambda s: s[0] is None, "the place to be released after kill -9", timeout=60)
    _restored(up.board, before)  # the board restores itself (its engine's lifeline)


def test_bad_input_gets_one_line(up: Farm, tmp_path: Path) -> None:
    store = tmp_path / "bad.db"
    cases = [
        (["--target", "labgrid:no-such-place"], {}, 1, "has no place 'no-such-place'"),
        (["--target", f"labgrid:{EMPTY}"], {}, 1, "has no NetworkService"),
        (["--target", TARGET], {"LG_COORDINATOR": f"127.0.0.1:{_free_port()}"}, 1,
         "cannot reach the labgrid coordinator"),
        (["--target", "labgrid:"], {}, 2, "expected labgrid:PLACE"),
        (["--target", "labgrid:a b"], {}, 2, "expected labgrid:PLACE"),
    ]
    silent = socket.socket()  # accepts connections and never answers: the bounded wait
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    cases.append((["--target", TARGET],
                  {"LG_COORDINATOR": f"127.0.0.1:{silent.getsockname()[1]}"}, 1,
                  "did not answer within 5 s"))
    run = ["run", "--probe", "timer", "--duration", "1s", "--store", str(store)]
    for i, (args, env, code, words) in enumerate(cases):
        # every case with doctor; a run too for a place (refused before its store is
        # made) and for a spec (refused before anything connects)
        for cmd in (["doctor"], run) if i in (0, 3) else (["doctor"],):
            t0 = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "rtlab", *cmd, *args],
                                  env=up.env(**env), capture_output=True, text=True,
                                  timeout=120, check=False)
            assert proc.returncode == code, (args, proc.stderr)
            assert words in one_error_line(proc), (args, proc.stderr)
            assert time.monotonic() - t0 < 90
    silent.close()
    assert not store.exists()
    assert up.state() == (None, True)


def test_scenario_and_monitor_targets_accept_a_place(up: Farm, tmp_path: Path) -> None:
    """A scenario's targets and monitor's --target read labgrid:PLACE as a target and
    refuse a malformed one as any malformed target (usage, one line)."""
    bad = up.rtlab("monitor", "--target", "labgrid:x/y", "--duration", "1s",
                   "--store", str(tmp_path / "m.db"), "--state-dir", str(tmp_path / "m"))
    assert bad.returncode == 2, bad.stderr
    assert "expected labgrid:PLACE" in one_error_line(bad)
    assert not (tmp_path / "m.db").exists()


def test_tune_reboots_through_the_place(up: Farm, monkeypatch: pytest.MonkeyPatch) -> None:
    """rtlab's reboot interface (rtlab.tune.reboot.Rebooter, what `rtlab tune` drives)
    through the place's power port: a one-shot command line that the command arranged
    first (the test's "bootloader") is booted by a power cycle and read back through the
    place, and the original comes back by a power cycle. Without --after-one-shot a
    one-shot boot is refused in one line, labgrid having no interface for it. Last: the
    board reboots."""
    from rtlab.tune.reboot import Rebooter, compose, normalise

    env = up.env(RTLAB_TARGET=TARGET, RTLAB_BOOT="once", RTLAB_CMDLINE="quiet")
    once = subprocess.run([sys.executable, "-m", "rtlab.engine.labgrid_reboot"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert once.returncode == 1, once.stderr
    assert "no interface that boots a kernel command line once" in one_error_line(once)

    for k, v in up.env().items():  # the Rebooter reads the board in this process
        monkeypatch.setenv(k, v)
    arrange = ("import os, urllib.parse, urllib.request; urllib.request.urlopen("
               f"'http://127.0.0.1:{up.power_port}/oneshot?' + urllib.parse.urlencode("
               "{'cmdline': os.environ['RTLAB_CMDLINE']}), timeout=30).read()")
    command = (f'if [ "$RTLAB_BOOT" = once ]; then "$RTLAB_PYTHON" -c {shlex.quote(arrange)}; '
               'fi; "$RTLAB_PYTHON" -m rtlab.engine.labgrid_reboot --after-one-shot')
    rebooter = Rebooter(TARGET, command, timeout_s=300)
    original = rebooter.original()
    wanted = compose(original, {"rtlab_labgrid_once": "1"})
    booted = rebooter.boot(wanted)
    assert booted.rebooted and normalise(booted.cmdline) == normalise(wanted)
    back = rebooter.restore()
    assert back.rebooted and normalise(back.cmdline) == normalise(original)
    assert back.boot_id != booted.boot_id
    assert up.state() == (None, True)
