# SPDX-License-Identifier: MIT
"""`labgrid:PLACE` as written: every command's target check (rtlab.engine.ssh.SshTarget)
accepts a place name and refuses anything else in one usage line, before anything
connects; the coordinator's address follows labgrid's $LG_COORDINATOR."""

from __future__ import annotations

import pytest

from rtlab.engine.labgrid import DEFAULT_COORDINATOR, coordinator_address
from rtlab.engine.place_spec import parse_place
from rtlab.engine.ssh import SshTarget
from rtlab.errors import UsageError


@pytest.mark.parametrize("name", ["rpi4-7", "lg_x86", "a", "board.7", "rack1+b2",
                                  "x" * 128])
def test_a_place_name_is_a_target(name: str) -> None:
    t = SshTarget.parse(f"labgrid:{name}")
    assert str(t) == f"labgrid:{name}"  # its name in results and messages, unbracketed
    assert parse_place(f"labgrid:{name}") == name


@pytest.mark.parametrize("text", ["labgrid:", "labgrid:a b", "labgrid:-oProxyCommand=x",
                                  "labgrid:.hidden", "labgrid:a/b", "labgrid:a;touch x",
                                  "labgrid:$(id)", "labgrid:" + "x" * 129, "labgrid:a\nb"])
def test_anything_else_is_one_usage_line(text: str) -> None:
    with pytest.raises(UsageError) as exc:
        SshTarget.parse(text, "--reflector")
    msg = exc.value.message
    assert msg.startswith("--reflector ") and "expected labgrid:PLACE" in msg
    assert "\n" not in msg


def test_the_coordinator_is_labgrids_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LG_COORDINATOR", raising=False)
    assert coordinator_address() == DEFAULT_COORDINATOR
    monkeypatch.setenv("LG_COORDINATOR", "lab.example.org:20408")
    assert coordinator_address() == "lab.example.org:20408"
    monkeypatch.setenv("LG_COORDINATOR", "lab example")
    with pytest.raises(UsageError) as exc:
        coordinator_address()
    assert "$LG_COORDINATOR" in exc.value.message
