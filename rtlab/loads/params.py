# SPDX-License-Identifier: MIT
"""Load parameters, declared once per kind: name, type, default, allowed range, help.

Scenario validation (`validate`), the documentation table and any CLI flags
(`add_arguments`) are all derived from these tables, so a parameter is never
described in two places. Values coming from TOML or a command line are
coerced by `Param.coerce`, which returns the value or raises `ValueError` with
a message that says what is allowed.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rtlab import cpulist
from rtlab.cpulist import format_cpulist

_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_DUR_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000,
              "h": 3_600_000_000_000}

TYPES = ("int", "size", "duration", "choice", "str", "bool", "cpulist")


def parse_size(text: str) -> int:
    """'20M' -> 20971520 (binary units, as stress-ng reads them)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgtb]?)\s*", text.lower())
    if not m:
        raise ValueError(f"{text!r} is not a size (a number with an optional unit K, M, G)")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2)]


def format_size(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        size = _SIZE_UNITS[unit.lower()]
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def parse_duration(text: str) -> int:
    """'500us' -> 500000 (ns)."""
    m = re.fullmatch(r"\s*(\d+)\s*(ns|us|ms|s|m|h)\s*", text)
    if not m:
        raise ValueError(f"{text!r} is not a duration (a number with a unit ns, us, ms, s, m, h)")
    return int(m.group(1)) * _DUR_UNITS[m.group(2)]


def format_duration(ns: int) -> str:
    for unit in ("h", "m", "s", "ms", "us"):
        if ns >= _DUR_UNITS[unit] and ns % _DUR_UNITS[unit] == 0:
            return f"{ns // _DUR_UNITS[unit]}{unit}"
    return f"{ns}ns"


def parse_cpulist(text: str) -> tuple[int, ...]:
    """'0-2,5' -> (0, 1, 2, 5); ValueError in the load parameters' wording."""
    try:
        cpus = cpulist.parse_cpulist(text)
    except cpulist.CpuListError as exc:
        if exc.reason == "reversed":
            raise ValueError(f"{text!r} is not a CPU list (range {exc.item} goes backwards)"
                             ) from None
        cpus = []
    if not cpus:
        raise ValueError(f"{text!r} is not a CPU list (e.g. 0-3,6)")
    return tuple(cpus)


@dataclass(frozen=True)
class Param:
    """One parameter of a load kind."""

    name: str
    type: str  # one of TYPES
    default: Any
    help: str
    min: int | None = None
    max: int | None = None
    choices: tuple[str, ...] = ()

    def allowed(self) -> str:
        """What is allowed, in words (used in errors, help and docs)."""
        if self.type == "bool":
            return "true or false"
        if self.type == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.type == "str":
            return "a string"
        if self.type == "cpulist":
            return "a CPU list such as \"0-1,3\" or a list of integers"
        fmt: Any = {"size": format_size, "duration": format_duration}.get(self.type, str)
        what = {"int": "an integer", "size": "a size such as \"20M\"",
                "duration": "a duration such as \"1ms\""}[self.type]
        if self.min is not None and self.max is not None:
            return f"{what} {fmt(self.min)}..{fmt(self.max)}"
        return what

    def coerce(self, value: Any) -> Any:
        """The value in its canonical type (int for int/size/duration), or ValueError."""
        t = self.type
        if t == "bool":
            if isinstance(value, bool):
                return value
            raise ValueError(f"{value!r} is not {self.allowed()}")
        if t == "str":
            if isinstance(value, str):
                return value
            raise ValueError(f"{value!r} is not {self.allowed()}")
        if t == "choice":
            if isinstance(value, str) and value in self.choices:
                return value
            raise ValueError(f"{value!r} is not {self.allowed()}")
        if t == "cpulist":
            if isinstance(value, str):
                return parse_cpulist(value)
            if isinstance(value, list | tuple) and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
            ) and value:
                return tuple(sorted(set(value)))
            raise ValueError(f"{value!r} is not {self.allowed()}")
        # int, size, duration
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not {self.allowed()}")
        if isinstance(value, int):
            n = value
        elif isinstance(value, str) and t == "size":
            n = parse_size(value)
        elif isinstance(value, str) and t == "duration":
            n = parse_duration(value)
        elif isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            n = int(value)
        else:
            raise ValueError(f"{value!r} is not {self.allowed()}")
        if (self.min is not None and n < self.min) or (self.max is not None and n > self.max):
            raise ValueError(f"{value!r} is out of range; allowed: {self.allowed()}")
        return n

    def show_default(self) -> str:
        if self.default is None:
            return "-"
        if self.type == "size":
            return format_size(self.default)
        if self.type == "duration":
            return format_duration(self.default)
        if self.type == "bool":
            return "true" if self.default else "false"
        if self.type == "cpulist":
            return format_cpulist(self.default)
        if isinstance(self.default, str):
            return repr(self.default)
        return str(self.default)


def check_params(prefix: str, table: Sequence[Param], given: Mapping[str, Any]
                 ) -> tuple[dict[str, Any], list[str]]:
    """Coerce `given` against `table`: (values for the given keys, errors naming each key)."""
    by_name = {p.name: p for p in table}
    values: dict[str, Any] = {}
    errors: list[str] = []
    for key, value in given.items():
        p = by_name.get(key)
        if p is None:
            errors.append(f"{prefix}: unknown key {key!r}; allowed keys: "
                          + ", ".join(p.name for p in table))
            continue
        try:
            values[key] = p.coerce(value)
        except ValueError as e:
            errors.append(f"{prefix}.{key}: {e}")
    return values, errors


def add_arguments(parser: argparse.ArgumentParser | Any, table: Sequence[Param],
                  prefix: str) -> None:
    """Add `--PREFIX-NAME` flags for every parameter (strings; coerce them with `check_params`)."""
    for p in table:
        flag = f"--{prefix}-{p.name.replace('_', '-')}"
        dest = f"{prefix}_{p.name}".replace("-", "_")
        help_text = f"{p.help} [{p.allowed()}; default {p.show_default()}]"
        if p.type == "bool":
            parser.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction,
                                default=None, help=help_text)
        else:
            parser.add_argument(flag, dest=dest, default=None, metavar=p.type.upper(),
                                help=help_text)


def from_namespace(ns: argparse.Namespace, table: Sequence[Param], prefix: str) -> dict[str, Any]:
    """The flags of `add_arguments` that were given, keyed by parameter name."""
    out: dict[str, Any] = {}
    for p in table:
        value = getattr(ns, f"{prefix}_{p.name}".replace("-", "_"), None)
        if value is not None:
            out[p.name] = value
    return out


def markdown_table(table: Sequence[Param]) -> str:
    rows = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    for p in table:
        rows.append(f"| `{p.name}` | {p.type} | {p.show_default()} | {p.allowed()} | {p.help} |")
    return "\n".join(rows)


def preset_values(table: Sequence[Param], presets: Mapping[str, Mapping[str, Any]],
                  given: Mapping[str, Any]) -> dict[str, Any]:
    """A kind's values: its defaults, then the values of the preset named by `preset`
    (if any), then the given keys."""
    values = {p.name: p.default for p in table}
    values.update(presets.get(given.get("preset", "none"), {}))
    values.update(given)
    return values
