# SPDX-License-Identifier: MIT
"""The engine's load standing in for stress-ng (rtlab.loads.fallback): what carries
over, what is left out and named, and when there is nothing to stand in with."""

from __future__ import annotations

import pytest

from rtlab.errors import MissingToolError
from rtlab.loads.base import Placement
from rtlab.loads.fallback import builtin_instead, check_fallback, fallback_note
from rtlab.loads.kinds import LOAD_KINDS, BuiltinLoad

MISSING = MissingToolError("stress-ng is not installed on board7", ("stress-ng",))


def _stress(placement: Placement | None = None, **params: object):
    return LOAD_KINDS["stress"].build(params, placement)


def test_cpu_and_memory_carry_over_with_the_placement() -> None:
    load = _stress(Placement((0, 1), "other", 0), cpu=3, vm=2, vm_bytes="20M")
    load.name = "stress"
    sub = builtin_instead(load, MISSING)
    assert isinstance(sub, BuiltinLoad) and sub.name == "stress"
    assert (sub.params["cpu"], sub.params["vm"], sub.params["vm_bytes"]) == (3, 2, 20 << 20)
    assert sub.placement == Placement((0, 1), "other", 0)
    assert sub.load_args() == ["load", "--cpu", "3", "--vm", "2", "--vm-bytes", "20M",
                               "--cpus", "0-1"]
    fb = sub.extra["fallback"]
    assert fb["for_kind"] == "stress" and fb["missing"] == ["stress-ng"]
    assert fb["kept"] == ["cpu 3", "vm 2 x 20M"] and fb["left_out"] == []
    assert fb["reason"] == "stress-ng is not installed on board7"


def test_what_the_engine_cannot_do_is_named() -> None:
    load = _stress(Placement((1,), "fifo", 97), cpu=1, io=1, hdd=2, cpu_load=50,
                   vm=1, vm_hang=2)
    load.name = "bg"
    sub = builtin_instead(load, MISSING)
    assert sub is not None
    left = sub.extra["fallback"]["left_out"]
    assert left == ["io 1", "hdd 2", "cpu_load 50 %", "vm_hang 2 s",
                    "policy fifo 97 (runs as SCHED_OTHER)"]
    assert sub.placement.policy == "other"  # the engine's load has no RT policy
    note = fallback_note(sub)
    assert note is not None and "\n" not in note
    assert note.startswith("load bg: stress-ng is not installed on board7: ran the engine's "
                           "built-in CPU+memory load instead (cpu 1, vm 1 x 64M)")
    assert "left out: io 1, hdd 2, cpu_load 50 %, vm_hang 2 s, policy fifo 97" in note


def test_nothing_to_stand_in_with_keeps_the_error() -> None:
    load = _stress(io=2, hdd=1)
    assert builtin_instead(load, MISSING) is None


def test_a_load_that_is_not_a_fallback_has_no_note() -> None:
    assert fallback_note(_stress(cpu=1)) is None


@pytest.mark.parametrize(("kind", "value", "error"), [
    ("stress", "builtin", None),
    ("stress", "stress-ng", "'stress-ng' is not a fallback; allowed: 'builtin'"),
    ("stress", True, "True is not a fallback"),
    ("rt-competitor", "builtin", "a load of kind 'rt-competitor' has no fallback"),
])
def test_check_fallback(kind: str, value: object, error: str | None) -> None:
    why = check_fallback(kind, value)
    assert (why is None) if error is None else (why is not None and why.startswith(error))
