# SPDX-License-Identifier: MIT
"""The reboot interface's logic (rtlab.tune.reboot) against a fake board: a state file
that a fake reboot command changes as a board's bootloader would, read back by an
injected reader instead of the SSH transport. The real thing, on an emulated board:
tests/lab/test_reboot_on_board.py.

Run as a program, this file is the fake reboot command: `python3 test_reboot.py STATE`
with RTLAB_BOOT, RTLAB_CMDLINE and RTLAB_TARGET set; the state's "mode" says how the
fake board behaves.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import uuid
from pathlib import Path

import pytest

from rtlab.errors import RtlabError, UsageError
from rtlab.tune.reboot import (
    BootResult,
    Rebooter,
    RebootEvent,
    compose,
    describe_change,
    normalise,
    split_cmdline,
)

REPO = Path(__file__).resolve().parents[2]
ORIGINAL = "BOOT_IMAGE=/vmlinuz console=ttyS0 quiet panic=1 -- single"


def fake_reboot(state_path: Path) -> int:
    """The fake board's reboot command. Modes: ok (boots what is asked), ignore (a
    bootloader that ignores the one-shot line), other (boots another line), hang (a
    one-shot boot never comes back; the original does), dead (nothing comes back),
    stay (the once-command does nothing), fail (exits 3), slow (never ends)."""
    state = json.loads(state_path.read_text())
    boot, cmdline = os.environ["RTLAB_BOOT"], os.environ.get("RTLAB_CMDLINE", "")
    state.setdefault("calls", []).append(
        {"boot": boot, "cmdline": cmdline, "target": os.environ.get("RTLAB_TARGET")})
    mode = state["mode"]
    if mode == "fail":
        print("resetting the board", flush=True)
        print("warming up\nboard7: no such board in the farm", file=sys.stderr)
        state_path.write_text(json.dumps(state))
        return 3
    if mode == "slow":
        import time

        time.sleep(60)
    up = True
    if boot == "once":
        if mode == "stay":
            state_path.write_text(json.dumps(state))
            return 0
        booted = {"ok": cmdline, "ignore": state["original"],
                  "other": cmdline + " extra=1"}.get(mode, cmdline)
        up = mode not in ("hang", "dead")
    else:
        booted = state["original"]
        up = mode != "dead"
    state.update(boot_id=str(uuid.uuid4()), cmdline=booted, up=up)
    state_path.write_text(json.dumps(state))
    return 0




class FakeBoard:
    def __init__(self, tmp_path: Path, mode: str = "ok") -> None:
        self.path = tmp_path / "board.json"
        self.path.write_text(json.dumps({"mode": mode, "original": ORIGINAL,
                                         "cmdline": ORIGINAL, "boot_id": "b0", "up": True}))
        self.command = shlex.join(["env", f"PYTHONPATH={REPO}", sys.executable, __file__,
                                   str(self.path)])
        self.reads = 0

    @property
    def state(self) -> dict:
        return json.loads(self.path.read_text())

    def read(self, target: str) -> tuple[str, str]:
        self.reads += 1
        s = self.state
        if not s["up"]:
            raise RtlabError(f"cannot reach {target}: connection refused")
        return s["boot_id"], s["cmdline"]

    def rebooter(self, **kw: object) -> Rebooter:
        opts: dict = {"timeout_s": 1.5, "poll_s": 0.05, "reader": self.read, **kw}
        return Rebooter("board7", self.command, **opts)


ASKED = compose(ORIGINAL, set={"isolcpus": "1", "nohz_full": "1"}, remove=["quiet"])


# ---------------------------------------------------------------- compose
def test_compose_replaces_in_place_appends_before_init_args_and_keeps_quoting() -> None:
    orig = 'BOOT_IMAGE=/v console=ttyS0  quiet a="x y" isolcpus=2 nohz-full=3 isolcpus=3 -- s'
    got = compose(orig, set={"isolcpus": "1", "nohz_full": "1", "nosmt": None,
                             "rtlab.x": "a b"}, remove=["quiet"])
    assert got == ('BOOT_IMAGE=/v console=ttyS0 a="x y" isolcpus=1 nohz_full=1 nosmt '
                   'rtlab.x="a b" -- s')
    assert split_cmdline(got)[2] == 'a="x y"'  # a quoted word stays one word
    assert compose(orig) == " ".join(orig.split())  # nothing asked: the same words
    assert compose("a=1", remove=["b"]) == "a=1"


@pytest.mark.parametrize(("kw", "wording"), [
    ({"set": {"bad name": "1"}}, "expected a name without blanks"),
    ({"set": {"a=b": "1"}}, "expected a name without blanks"),
    ({"set": {"x": 'say "hi"'}}, "cannot hold a double quote"),
    ({"set": {"isolcpus": "1"}, "remove": ["isolcpus"]}, "both set and removed"),
])
def test_compose_refuses_what_no_kernel_reads(kw: dict, wording: str) -> None:
    with pytest.raises(UsageError, match=wording):
        compose(ORIGINAL, **kw)


def test_normalise_ignores_spacing_and_the_bootloaders_image_word() -> None:
    assert normalise(" console=ttyS0   quiet ") == normalise("BOOT_IMAGE=/x console=ttyS0 quiet")
    assert normalise("a b") != normalise("b a")
    assert describe_change(ORIGINAL, ASKED) == "isolcpus=1 nohz_full=1 -quiet"


# ---------------------------------------------------------------- boots
def test_boot_once_then_restore(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path)
    events: list[RebootEvent] = []
    r = board.rebooter(on_event=events.append)
    assert r.original() == ORIGINAL
    res = r.boot(ASKED)
    assert isinstance(res, BootResult) and res.rebooted
    assert res.cmdline == ASKED and res.boot_id != "b0"
    call = board.state["calls"][-1]
    assert call == {"boot": "once", "cmdline": ASKED, "target": "board7"}
    assert [e.kind for e in events][:2] == ["command", "up"]
    assert "isolcpus=1 nohz_full=1 -quiet" in events[0].text

    back = r.restore()
    assert back.rebooted and back.cmdline == ORIGINAL
    assert board.state["calls"][-1] == {"boot": "original", "cmdline": ORIGINAL,
                                        "target": "board7"}
    # already on the original: nothing is run
    again = r.restore()
    assert not again.rebooted and len(board.state["calls"]) == 2


def test_a_stored_original_is_used_as_is(tmp_path: Path) -> None:
    """A resumed tune gives the original it stored: the board may run a one-shot line
    now, which must not be taken for the original."""
    board = FakeBoard(tmp_path)
    r = board.rebooter(original=ORIGINAL)
    r.boot(ASKED)
    resumed = board.rebooter(original=ORIGINAL)
    assert resumed.original() == ORIGINAL
    assert resumed.restore().cmdline == ORIGINAL


def test_a_failing_command_says_its_exit_code_and_last_stderr_line(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path, "fail")
    with pytest.raises(RtlabError) as err:
        board.rebooter().boot(ASKED)
    assert err.value.message == ("the reboot command failed (RTLAB_BOOT=once, exit 3): "
                                 "board7: no such board in the farm")
    assert "\n" not in err.value.one_line()
    assert board.state["cmdline"] == ORIGINAL


def test_a_command_that_never_ends_is_stopped(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path, "slow")
    with pytest.raises(RtlabError, match=r"the reboot command \(RTLAB_BOOT=once\) did not "
                                         r"end within 1.5 s"):
        board.rebooter().boot(ASKED)


def test_a_boot_that_does_not_come_back_boots_the_original(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path, "hang")
    events: list[RebootEvent] = []
    with pytest.raises(RtlabError) as err:
        board.rebooter(on_event=events.append).boot(ASKED)
    msg = err.value.message
    assert msg.startswith("the board board7 did not come back within 1.5 s after booting "
                          "'isolcpus=1 nohz_full=1 -quiet'; booted the original command line "
                          "through the reboot command (back after "), msg
    assert [c["boot"] for c in board.state["calls"]] == ["once", "original"]
    assert board.state["cmdline"] == ORIGINAL and board.state["up"]
    assert [e.kind for e in events] == ["command", "down", "restore", "command", "up"]


def test_a_board_that_does_not_go_down(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path, "stay")
    with pytest.raises(RtlabError, match=r"did not go down within 1.5 s after booting "
                                         r"'isolcpus=1 nohz_full=1 -quiet'; booted the "
                                         r"original command line"):
        board.rebooter().boot(ASKED)
    assert [c["boot"] for c in board.state["calls"]] == ["once", "original"]


def test_when_nothing_comes_back_both_failures_are_said(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path, "dead")
    with pytest.raises(RtlabError) as err:
        board.rebooter().boot(ASKED)
    assert "did not come back within 1.5 s after booting" in err.value.message
    assert ("booting the original command line through the reboot command failed too: "
            "the board board7 did not come back with its original command line within "
            "1.5 s") in err.value.message
    assert "power-cycle the board by hand" in (err.value.hint or "")


def test_a_bootloader_that_ignores_the_line_is_named(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path, "ignore")
    with pytest.raises(RtlabError) as err:
        board.rebooter().boot(ASKED)
    assert err.value.message == ("the board board7 came back with its original command "
                                 "line instead of booting 'isolcpus=1 nohz_full=1 -quiet'")
    assert "RTLAB_CMDLINE" in (err.value.hint or "")
    assert [c["boot"] for c in board.state["calls"]] == ["once"]  # on the original already


def test_another_line_is_named_and_the_original_booted(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path, "other")
    with pytest.raises(RtlabError) as err:
        board.rebooter().boot(ASKED)
    assert err.value.message.startswith(
        "the board board7 came back with another command line ('extra=1' against the one "
        "asked) instead of booting 'isolcpus=1 nohz_full=1 -quiet'; booted the original "
        "command line through the reboot command"), err.value.message
    assert "booted the original command line through the reboot command" in err.value.message
    assert board.state["cmdline"] == ORIGINAL


@pytest.mark.parametrize(("target", "command", "wording"), [
    ("local", "reboot-it", "boot knobs need a board"),
    ("board7", "  ", "--reboot-cmd is empty"),
])
def test_refused_before_anything_runs(tmp_path: Path, target: str, command: str,
                                      wording: str) -> None:
    board = FakeBoard(tmp_path)
    with pytest.raises(UsageError, match=wording):
        Rebooter(target, command, reader=board.read)
    assert board.reads == 0


def test_an_empty_command_line_is_refused(tmp_path: Path) -> None:
    board = FakeBoard(tmp_path)
    with pytest.raises(UsageError, match="command line to boot is empty"):
        board.rebooter().boot("   ")
    assert "calls" not in board.state


if __name__ == "__main__":
    sys.exit(fake_reboot(Path(sys.argv[1])))
