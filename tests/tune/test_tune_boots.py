# SPDX-License-Identifier: MIT
"""The tune's boot control (rtlab.tune.boots.BootControl) against the fake board of
test_reboot.py: a fake reboot command and a fake kernel whose files say what it
applied. Every boot is verified in effect and kept in the tune's state; a parameter
not in effect is one error naming it; a resumed tune passes its stored original on and
first sets right a board that runs what the state does not expect. The real thing:
tests/lab/test_tune_on_board.py."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rtlab.errors import RtlabError
from rtlab.tune.bootcheck import CMDLINE, ISOLATED, BootFiles
from rtlab.tune.boots import BootControl, params_key
from rtlab.tune.reboot import compose, split_cmdline

from .test_reboot import ORIGINAL, FakeBoard

ISO = {"isolcpus": "managed_irq,domain,1"}


def kernel_files(board: FakeBoard, *, honours: bool = True,
                 stray_on_1: bool = False) -> BootFiles:
    """What the fake board's kernel shows: /proc/cmdline, the isolated CPUs (only when it
    `honours` isolcpus) and one task (on CPU 1 when `stray_on_1`)."""
    cmd = board.state["cmdline"]
    iso = ""
    for w in split_cmdline(cmd):
        if w.startswith("isolcpus=") and honours:
            iso = w.rsplit(",", 1)[-1]
    # /proc/PID/task/TID/stat: field 9 flags (0: a user task), field 39 its last CPU
    fields = ["S"] + ["0"] * 36
    fields[36] = "1" if stray_on_1 else "0"
    stat = "42 (busybox) " + " ".join(fields)
    return BootFiles({CMDLINE: cmd + "\n", ISOLATED: iso + "\n",
                      "/proc/42/task/42/stat": stat,
                      "/proc/42/task/42/status": "Name:\tbusybox\nCpus_allowed_list:\t0-1\n"})


def tune_state(board: FakeBoard, **reboot: Any) -> dict[str, Any]:
    return {"id": "tune-x", "target": "board7", "engine_dir": None,
            "reboot": {"command": board.command, "timeout_s": 1.5, **reboot}}


class Locks:
    """The board's owner lock as the tune takes it again after each reboot."""

    def __init__(self) -> None:
        self.log: list[str] = []

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        self.log.append("take")
        try:
            yield
        finally:
            self.log.append("release")


def control(board: FakeBoard, state: dict[str, Any], saved: list[dict[str, Any]],
            events: list[str], locks: Locks | None = None, **files: bool) -> BootControl:
    return BootControl(state, on_event=events.append,
                       save=lambda s: saved.append(json.loads(json.dumps(s))),
                       rebooter=board.rebooter(original=state["reboot"].get("original")),
                       read_files=lambda: kernel_files(board, **files),
                       hold=(locks or Locks()).hold)


def test_a_boot_verified_in_effect_is_kept_and_the_original_is_back(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path)
    state = tune_state(board)
    saved: list[dict[str, Any]] = []
    events: list[str] = []
    locks = Locks()
    bc = control(board, state, saved, events, locks)

    bc.boot_params(ISO)
    assert locks.log == ["take"]  # the reboot ended the tune's hold: taken again
    key = params_key(ISO)
    spec = state["reboot"]
    assert spec["booted"] == ISO and spec["reboots"] == 1
    assert [c["in_effect"] for c in spec["checks"][key]] == [True, True]
    assert spec["checks"][key][1]["evidence"] == "no ordinary task on isolated CPUs 1"
    assert saved[-1]["reboot"]["booted"] == ISO  # saved at once, not at the next block
    assert any(e.startswith("booted isolcpus=managed_irq,domain,1 (rebooted in ") for e in events)

    bc.boot_params(ISO)  # the next block on the same line: no reboot, a look at CPU 1
    assert len(board.state["calls"]) == 1
    assert [t["when"] for t in spec["tasks"][key]] == ["boot", "blocks"]

    bc.boot_params({})  # the baseline: the original booted
    assert board.state["cmdline"] == ORIGINAL and spec["booted"] == {}
    assert [c["boot"] for c in board.state["calls"]] == ["once", "original"]
    assert [b["params"] for b in spec["boots"]] == [key, "original"]
    assert all(b["rebooted"] and b["seconds"] >= 0 for b in spec["boots"])

    assert locks.log == ["take", "release", "take"]
    bc.back(state, lambda s: None)  # on the original already: nothing to boot
    assert len(board.state["calls"]) == 2
    assert locks.log == ["take", "release", "take", "release"]


def test_a_parameter_not_in_effect_is_named(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path)
    state = tune_state(board)
    bc = control(board, state, [], [], honours=False)
    with pytest.raises(RtlabError) as err:
        bc.boot_params(ISO)
    assert err.value.message == (
        "boot parameter isolcpus=managed_irq,domain,1 is not in effect on board7 after "
        f"its boot: {ISOLATED} = none: CPUs 1 missing")
    assert "\n" not in err.value.one_line()
    assert state["reboot"]["checks"][params_key(ISO)][0]["in_effect"] is False
    # the board runs that line: the tune's end boots the original
    assert state["reboot"]["booted"] == ISO
    bc.back(state, lambda s: None)
    assert board.state["cmdline"] == ORIGINAL and state["reboot"]["booted"] == {}


def test_an_ordinary_task_on_the_isolated_cpu_is_kept_as_evidence(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path)
    state = tune_state(board)
    events: list[str] = []
    bc = control(board, state, [], events, stray_on_1=True)
    bc.boot_params(ISO)
    tasks = state["reboot"]["checks"][params_key(ISO)][-1]
    assert tasks["in_effect"] is False
    assert tasks["evidence"] == ("1 ordinary task(s) on isolated CPUs 1: busybox (pid 42, "
                                 "tid 42) on CPU 1, allowed 0-1")


def test_a_boot_that_fails_leaves_the_state_on_what_runs(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path, "hang")
    state = tune_state(board)
    bc = control(board, state, [], [])
    with pytest.raises(RtlabError, match=r"did not come back within 1\.5 s"):
        bc.boot_params(ISO)
    spec = state["reboot"]
    assert board.state["cmdline"] == ORIGINAL  # the reboot interface booted it
    assert spec["booted"] == {} and "booting" not in spec
    bc.back(state, lambda s: None)
    assert [c["boot"] for c in board.state["calls"]] == ["once", "original"]


def test_resume_passes_the_stored_original_and_takes_the_board_as_it_is(
        tmp_path: Path) -> None:
    """Killed after a once-boot; the board rebooted by itself meanwhile (its one-shot
    ended): the resumed tune finds the original running, reboots nothing for it."""
    board = FakeBoard(tmp_path)
    state = tune_state(board, original=ORIGINAL, booted=ISO)
    events: list[str] = []
    bc = BootControl(state, on_event=events.append, read_files=lambda: kernel_files(board))
    # the stored original is the one used: reading it from the board (through SSH to
    # board7, which does not exist) would fail
    assert bc.rebooter.original() == ORIGINAL

    bc = control(board, state, [], events)
    bc.boot_params({})
    assert "calls" not in board.state  # nothing booted: the original runs
    assert state["reboot"]["booted"] == {}
    assert "the one-shot boot of isolcpus=managed_irq,domain,1 ended with a reboot" in \
        " ".join(events)


def test_resume_boots_back_a_line_the_state_does_not_expect(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path)
    other = compose(ORIGINAL, set={"nosmt": None})
    board.path.write_text(json.dumps({**board.state, "cmdline": other, "boot_id": "b1"}))
    state = tune_state(board, original=ORIGINAL, booted={})
    events: list[str] = []
    bc = control(board, state, [], events)
    bc.boot_params({})
    assert [c["boot"] for c in board.state["calls"]] == ["original"]
    assert board.state["cmdline"] == ORIGINAL
    assert "a command line this tune did not boot: booting the original first" in \
        " ".join(events)


def test_resume_after_a_kill_mid_boot_takes_the_line_being_booted(tmp_path: Path) -> None:
    """Killed while a boot was under way: the state says what was being booted."""
    board = FakeBoard(tmp_path)
    asked = compose(ORIGINAL, set=ISO)
    board.path.write_text(json.dumps({**board.state, "cmdline": asked, "boot_id": "b1"}))
    state = tune_state(board, original=ORIGINAL, booted={}, booting=asked,
                       booting_params=ISO)
    bc = control(board, state, [], [])
    bc.boot_params(ISO)
    assert "calls" not in board.state  # it runs already
    assert state["reboot"]["booted"] == ISO and "booting" not in state["reboot"]
    bc.back(state, lambda s: None)
    assert board.state["cmdline"] == ORIGINAL
