# SPDX-License-Identifier: MIT
"""CPU expressions of scenario files, so one file fits 2 CPUs and 64 CPUs alike.

A CPU value in a scenario is either a list of integers, a CPU list string
(`"0,2-3"`), or one of these words (resolved against the online CPUs):

| word      | means                                                                 |
|-----------|-----------------------------------------------------------------------|
| `all`     | every online CPU                                                      |
| `first`   | the lowest-numbered online CPU                                        |
| `last`    | the highest-numbered online CPU                                       |
| `user`    | the shield's user (isolated) CPUs; without a shield: `last`            |
| `system`  | the shield's system CPUs; without a shield: every online CPU            |
| `others`  | every online CPU not in `user`; on a one-CPU machine: that CPU         |

`isolated` is a synonym of `user`. The words cannot be combined with numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from rtlab.cpulist import CpuListError, format_cpulist, parse_cpulist

WORDS = ("all", "first", "last", "user", "isolated", "system", "others")


class CpuExprError(ValueError):
    """The value is not a CPU expression; the message says what is allowed."""


ALLOWED = ('a CPU list such as "0,2-3", a list of integers, or one of '
           + ", ".join(f'"{w}"' for w in WORDS))


def _parse_list(text: str) -> list[int]:
    try:
        cpus = parse_cpulist(text)
    except CpuListError as exc:
        if exc.reason == "reversed":
            raise CpuExprError(f"{text!r}: range {exc.item!r} is reversed") from None
        cpus = []
    if not cpus:
        raise CpuExprError(f"{text!r} is not a CPU expression; allowed: {ALLOWED}")
    return cpus


def default_user(online: Sequence[int]) -> list[int]:
    """The user (measured, shielded) set when the scenario names none: the last CPU."""
    return [max(online)]


def expand(value: object, online: Sequence[int], user: Sequence[int] | None = None,
           system: Sequence[int] | None = None) -> list[int]:
    """Resolve a CPU expression to a sorted list of CPUs; CpuExprError if it is not one
    or names a CPU that is not online.

    `user`/`system`: the shield's sets (None: no shield, the defaults of the module doc).
    """
    online = sorted(set(online))
    if not online:
        raise CpuExprError("no online CPUs")
    user_set = sorted(user) if user is not None else default_user(online)
    system_set = sorted(system) if system is not None else list(online)
    if isinstance(value, bool):
        raise CpuExprError(f"{value!r} is not a CPU expression; allowed: {ALLOWED}")
    if isinstance(value, int):
        cpus = [value]
    elif isinstance(value, list):
        if not value or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                for v in value):
            raise CpuExprError(f"{value!r} is not a CPU expression; allowed: {ALLOWED}")
        cpus = sorted(set(value))
    elif isinstance(value, str):
        word = value.strip().lower()
        if word == "all":
            return list(online)
        if word == "first":
            return [online[0]]
        if word == "last":
            return [online[-1]]
        if word in ("user", "isolated"):
            return list(user_set)
        if word == "system":
            return list(system_set)
        if word == "others":
            return [c for c in online if c not in user_set] or list(online)
        if not word:
            raise CpuExprError(f"empty CPU expression; allowed: {ALLOWED}")
        cpus = _parse_list(word)
    else:
        raise CpuExprError(f"{value!r} is not a CPU expression; allowed: {ALLOWED}")
    missing = [c for c in cpus if c not in online]
    if missing:
        raise CpuExprError(
            f"CPU {','.join(map(str, missing))} is not online on this machine "
            f"(online CPUs: {format_cpulist(online)})")
    return cpus


