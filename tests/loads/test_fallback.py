# SPDX-License-Identifier: MIT
"""The engine's load standing in for stress-ng (rtlab.loads.fallback): what carries
over (CPU and memory workers, CPUs, a fifo/rr policy and its priority), what is left out
and named, and when there is nothing to stand in with."""

from __future__ import annotations

import pytest

from rtlab.errors import MissingToolError
from rtlab.loads.engine_loads import BuiltinLoad
from rtlab.loads.fallback import builtin_instead, check_fallback, fallback_note
from rtlab.loads.kinds import LOAD_KINDS, from_spec
from rtlab.loads.lifecycle import Placement
from rtlab.scenario import builtins, load_file

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
    load = _stress(Placement((1,), "batch", 0), cpu=1, io=1, hdd=2, cpu_load=50,
                   vm=1, vm_hang=2)
    load.name = "bg"
    sub = builtin_instead(load, MISSING)
    assert sub is not None
    left = sub.extra["fallback"]["left_out"]
    assert left == ["io 1", "hdd 2", "cpu_load 50 %", "vm_hang 2 s",
                    "policy batch (runs as SCHED_OTHER)"]
    assert sub.placement == Placement((1,), "other", 0)  # the engine has no SCHED_BATCH
    assert "--policy" not in sub.load_args()
    note = fallback_note(sub)
    assert note is not None and "\n" not in note
    assert note.startswith("load bg: stress-ng is not installed on board7: ran the engine's "
                           "built-in CPU+memory load instead (cpu 1, vm 1 x 64M)")
    assert "left out: io 1, hdd 2, cpu_load 50 %, vm_hang 2 s, policy batch" in note


@pytest.mark.parametrize(("policy", "priority"), [("fifo", 97), ("rr", 5)])
def test_the_rt_policy_and_priority_carry_over(policy: str, priority: int) -> None:
    """The seed's UDP background hog: stress at SCHED_FIFO 97 stays at FIFO 97 as the
    engine's load (its workers get --policy/--priority), and the note says it kept it."""
    load = _stress(Placement((0,), policy, priority), cpu=1)
    load.name = "background"
    sub = builtin_instead(load, MISSING)
    assert sub is not None
    assert sub.placement == Placement((0,), policy, priority)
    assert sub.load_args() == ["load", "--cpu", "1", "--cpus", "0", "--policy", policy,
                               "--priority", str(priority)]
    fb = sub.extra["fallback"]
    assert fb["kept"] == ["cpu 1", f"policy {policy} {priority}"] and fb["left_out"] == []
    assert sub.describe()["policy"] == policy and sub.describe()["priority"] == priority
    note = fallback_note(sub)
    assert note is not None and "left out" not in note
    assert f"instead (cpu 1, policy {policy} {priority}); compare only" in note


def test_the_seed_udp_background_load_keeps_fifo_97() -> None:
    """udp-pingpong's own `background` load (scenarios/udp-pingpong.toml), as a board
    without stress-ng runs it."""
    (sc,) = load_file(builtins()["udp-pingpong"], online=[0, 1]).variants
    (spec,) = [ld for ld in sc.loads if ld.name == "background"]
    assert spec.fallback == "builtin"
    load = from_spec(spec.to_spec())
    load.name = spec.name
    sub = builtin_instead(load, MISSING)
    assert sub is not None and sub.kind == "builtin"
    assert (sub.placement.policy, sub.placement.priority) == ("fifo", 97)
    assert sub.load_args()[-4:] == ["--policy", "fifo", "--priority", "97"]
    assert "SCHED_OTHER" not in (fallback_note(sub) or "")


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


def test_the_scheduling_in_effect_is_taken_from_the_engine() -> None:
    """The `load` record's workers (the policy the engine read back from each) go into
    the description beside the `load_result`, one entry per distinct scheduling."""
    load = LOAD_KINDS["builtin"].build({"cpu": 2, "vm": 1}, Placement(None, "fifo", 97))
    load.take_records([
        {"type": "load", "workers": [{"kind": "cpu", "pid": 7, "policy": "fifo", "priority": 97},
                                     {"kind": "cpu", "pid": 8, "policy": "fifo", "priority": 97},
                                     {"kind": "vm", "pid": 9, "policy": "fifo", "priority": 97}]},
        {"type": "load_result", "status": "interrupted", "exit_code": 130, "elapsed_ns": 5,
         "loops": {"cpu": 3}, "error": None},
    ])
    b = load.extra["builtin"]
    assert b["workers_sched"] == [{"policy": "fifo", "priority": 97}]
    assert b["status"] == "interrupted" and b["loops"] == {"cpu": 3}
    # a killed engine that printed only its `load` record: what ran is still known
    early = LOAD_KINDS["builtin"].build({"cpu": 1})
    early.take_records([{"type": "load", "workers": [
        {"kind": "cpu", "pid": 7, "policy": "other", "priority": 0}]}])
    assert early.extra["builtin"] == {"workers_sched": [{"policy": "other", "priority": 0}]}
