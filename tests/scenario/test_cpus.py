# SPDX-License-Identifier: MIT
"""CPU expressions resolve the same words to the right CPUs on 1, 2 and 8 CPUs."""

from __future__ import annotations

import pytest

from rtlab.scenario.cpus import CpuExprError, expand

ONE, TWO, EIGHT = [0], [0, 1], list(range(8))


@pytest.mark.parametrize(
    ("online", "expr", "user", "system", "want"),
    [
        (ONE, "all", None, None, [0]),
        (ONE, "last", None, None, [0]),
        (ONE, "others", None, None, [0]),  # one CPU: the others are that CPU
        (ONE, "system", None, None, [0]),
        (TWO, "all", None, None, [0, 1]),
        (TWO, "first", None, None, [0]),
        (TWO, "last", None, None, [1]),
        (TWO, "others", None, None, [0]),
        (TWO, "user", None, None, [1]),
        (TWO, "system", None, None, [0, 1]),  # no shield: the system is everything
        (TWO, "1", None, None, [1]),
        (TWO, [1, 0], None, None, [0, 1]),
        (EIGHT, "others", None, None, list(range(7))),
        (EIGHT, "others", [6, 7], [0, 1, 2, 3, 4, 5], list(range(6))),
        (EIGHT, "user", [6, 7], [0, 1, 2, 3, 4, 5], [6, 7]),
        (EIGHT, "isolated", [6, 7], [0, 1], [6, 7]),
        (EIGHT, "system", [6, 7], [0, 1], [0, 1]),
        (EIGHT, "0-2,5", None, None, [0, 1, 2, 5]),
        (EIGHT, "last", None, None, [7]),
    ],
)
def test_expand(online: list[int], expr: object, user: list[int] | None,
                system: list[int] | None, want: list[int]) -> None:
    assert expand(expr, online, user, system) == want


@pytest.mark.parametrize(
    ("online", "expr", "needle"),
    [
        (TWO, "2", "CPU 2 is not online on this machine (online CPUs: 0-1)"),
        (EIGHT, "0-9", "CPU 8,9 is not online"),
        (TWO, "middle", "allowed: a CPU list"),
        (TWO, "3-1", "reversed"),
        (TWO, [], "allowed"),
        (TWO, True, "allowed"),
        (TWO, "", "empty CPU expression"),
    ],
)
def test_expand_errors(online: list[int], expr: object, needle: str) -> None:
    with pytest.raises(CpuExprError) as info:
        expand(expr, online)
    assert needle in str(info.value)
