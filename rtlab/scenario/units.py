# SPDX-License-Identifier: MIT
"""Parsing of durations and CPU lists, with the same rules as rtlab-probe.

Durations: a number (optionally with up to 9 decimals) followed by a unit
`ns`, `us`, `ms`, `s`, `m` or `h`, no spaces, e.g. `500us`, `1.5ms`, `10s`;
the unit is required; it must come to a positive whole number of nanoseconds.
CPU lists: comma-separated CPU numbers and ranges `a-b` (a <= b), e.g. `0,2-3`;
every CPU must be online (usable by this process).
"""

from __future__ import annotations

import os
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

from rtlab.cpulist import MAX_CPUS as _MAX_CPUS
from rtlab.cpulist import CpuListError, parse_cpulist
from rtlab.errors import UsageError
from rtlab.textfmt import shown

_UNITS_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
             "m": 60_000_000_000, "h": 3_600_000_000_000}
_DUR_RE = re.compile(r"([0-9]+(?:\.[0-9]{1,9})?|\.[0-9]{1,9})(ns|us|ms|s|m|h)")
_MAX_NS = (1 << 63) - 1
MAX_CPUS = _MAX_CPUS


def parse_duration(text: str, what: str = "duration") -> int:
    """'10s' -> 10_000_000_000. Raises UsageError (one line) on anything else."""
    m = _DUR_RE.fullmatch(text or "")
    if not m:
        if (text or "").strip().startswith("-"):
            raise UsageError(f"{what} must be positive: {shown(text)}")
        raise UsageError(
            f"invalid {what} {shown(text)}",
            hint="use a number with a unit ns, us, ms, s, m or h, e.g. 10s",
        )
    try:
        value = Decimal(m.group(1)) * _UNITS_NS[m.group(2)]
    except InvalidOperation as exc:  # pragma: no cover - regex guarantees a number
        raise UsageError(f"invalid {what} {shown(text)}") from exc
    if value != value.to_integral_value():
        raise UsageError(f"{what} {shown(text)} is not a whole number of nanoseconds")
    ns = int(value)
    if ns <= 0:
        raise UsageError(f"{what} must be positive: {shown(text)}")
    if ns > _MAX_NS:
        longest = _MAX_NS // _UNITS_NS["h"] * _UNITS_NS["h"]
        raise UsageError(f"{what} {shown(text)} is too long",
                         hint=f"at most {format_duration(longest)}")
    return ns


def format_duration(ns: int) -> str:
    """The shortest exact spelling the parser accepts: 1_000_000 -> '1ms'."""
    for unit in ("h", "m", "s", "ms", "us"):
        if ns % _UNITS_NS[unit] == 0:
            return f"{ns // _UNITS_NS[unit]}{unit}"
    return f"{ns}ns"


def online_cpus() -> list[int]:
    """CPUs this process may run on (falls back to sysfs, then os.cpu_count)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except OSError:  # pragma: no cover
        pass
    try:  # pragma: no cover
        return parse_cpu_list(Path("/sys/devices/system/cpu/online").read_text().strip(), None)
    except (OSError, UsageError):  # pragma: no cover
        return list(range(os.cpu_count() or 1))


def parse_cpu_list(text: str, available: list[int] | None = None,
                   what: str = "--cpus") -> list[int]:
    """'0,2-3' -> [0, 2, 3]; checks against `available` CPUs when given. Errors name
    `what` (the option)."""
    spec = text or ""
    if not spec.strip():
        raise UsageError(f"{what}: empty CPU list", hint=f"e.g. {what} 0,2-3")
    try:
        cpus = parse_cpulist(spec, limit=MAX_CPUS)
    except CpuListError as exc:
        head = f"{what}: invalid CPU list {shown(text)}"
        if exc.reason == "reversed":
            raise UsageError(f"{head}: range {shown(exc.item)} is reversed") from None
        if exc.reason == "too_big":
            cpu = str(exc.cpu) if exc.cpu is not None else exc.item
            raise UsageError(f"{head}: CPU {cpu if len(cpu) <= 20 else shown(cpu)} is out of "
                             f"range (0-{MAX_CPUS - 1})") from None
        if exc.reason == "negative":
            raise UsageError(f"{head}: CPU {shown(exc.item)} is negative",
                             hint="CPUs are numbered from 0, e.g. 0,2-3") from None
        if exc.reason == "empty_item":
            raise UsageError(f"{head}: an empty item",
                             hint="leave no empty item between commas, e.g. 0,2-3") from None
        raise UsageError(f"{head}: bad item {shown(exc.item)}",
                         hint="use numbers and ranges, e.g. 0,2-3") from None
    if available is not None:
        missing = [c for c in cpus if c not in available]
        if missing:
            online = ",".join(str(c) for c in sorted(available))
            raise UsageError(
                f"{what}: CPU {missing[0]} is not online or not allowed here "
                f"(usable CPUs: {online})"
            )
    return sorted(cpus)
