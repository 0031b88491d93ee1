# SPDX-License-Identifier: MIT
"""A shield that moves nothing, only thread priorities (udp-pingpong's IRQ threads at
FIFO 99 above its FIFO 97 background): it needs no two CPU sets, works on one CPU, and
its check reports only what it asked for."""

from __future__ import annotations

from rtlab.scenario import parse_text

PRIORITIES_ONLY = """\
[scenario]
name = "p"
[shield]
cpuset = false
tasks = false
thread_priorities = [{match = "irq/", policy = "fifo", priority = 99}]
[[probe]]
cpus = "last"
[[phase]]
name = "p"
duration = "1s"
"""


def test_loads_on_one_cpu() -> None:
    (sc,) = parse_text(PRIORITIES_ONLY, online=[0]).variants
    assert sc.shield is not None and sc.shield.thread_priorities == (("irq/", "fifo", 99),)


def test_a_shield_that_moves_tasks_still_needs_two_sets() -> None:
    import pytest

    from rtlab.errors import UsageError

    with pytest.raises(UsageError, match="overlap"):
        parse_text(PRIORITIES_ONLY.replace("tasks = false\n", ""), online=[0])


def test_the_note_names_only_what_was_asked() -> None:
    from rtlab.runner.run import shield_note

    (sc,) = parse_text(PRIORITIES_ONLY, online=[0, 1]).variants
    effect = {"problems": ["CPU 1: 2 user task(s) may still run there, e.g. sshd[100]",
                           "CPU 1: 3 unbound kthread(s) may still run there",
                           "CPU 1: IRQ 25 may be delivered there (refused or kernel-managed)",
                           "2 thread(s) matching 'irq/' do not run as fifo/99: x, y"]}
    assert shield_note(effect, sc.shield) == (
        "shield not wholly in effect: 2 thread(s) matching 'irq/' do not run as fifo/99: x, y")
    assert shield_note({"problems": effect["problems"][:3]}, sc.shield) is None
    # a shield that moves tasks and IRQs names all of it
    (full,) = parse_text(PRIORITIES_ONLY.replace("cpuset = false\ntasks = false\n",
                                                 "irqs = true\n"), online=[0, 1]).variants
    note = shield_note(effect, full.shield)
    assert note is not None and "user task(s)" in note and "IRQ 25" in note
