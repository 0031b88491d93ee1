# SPDX-License-Identifier: MIT
"""Reading typed fields out of a scenario's TOML document: each failure is one
`ScenarioError` that names the file, the line (found in the text), the key path and what
is allowed."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rtlab.errors import UsageError
from rtlab.scenario.cpus import CpuExprError, expand
from rtlab.scenario.units import format_duration as fd
from rtlab.scenario.units import parse_duration


class ScenarioError(UsageError):
    """A problem of a scenario file, one line "FILE[:LINE]: DETAIL" (exit 2), with its
    parts kept for machine-readable output (`rtlab scenarios check --json`)."""

    def __init__(self, source: str, line: int | None, detail: str,
                 message: str | None = None) -> None:
        where = f"{source}:{line}" if line else source
        super().__init__(message or f"{where}: {detail}")
        self.source, self.line, self.detail = source, line, detail




class Ctx:
    """Where we are: the file name and text, for errors with line numbers."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.lines = text.splitlines()
        self.headers = self._headers()

    def _headers(self) -> list[tuple[int, str, bool]]:
        out = []
        rx = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-]+)\s*\]\]?\s*(#.*)?$")
        for i, line in enumerate(self.lines):
            m = rx.match(line)
            if m:
                out.append((i, m.group(2), m.group(1) == "[["))
        return out

    def line_of(self, table: str | None, index: int | None, key: str | None) -> int | None:
        """1-based line of `key` in `[table]` (or the index-th `[[table]]`)."""
        if table is None:
            start, end = 0, self.headers[0][0] if self.headers else len(self.lines)
            if key is not None:
                for h, name, _ in self.headers:
                    if name == key:
                        return h + 1
        else:
            found = [h for h, name, arr in self.headers
                     if name == table and arr == (index is not None)]
            pos = index or 0
            if pos >= len(found):
                return None
            start = found[pos] + 1
            later = [h for h, name, _ in self.headers
                     if h >= start and not name.startswith(f"{table}.")]
            end = later[0] if later else len(self.lines)
            if key is None:
                return start
        key_rx = re.compile(rf"^\s*(\"?){re.escape(key)}\1\s*=") if key else None
        for i in range(start, end):
            if key_rx is not None and key_rx.match(self.lines[i]):
                return i + 1
        if table is not None and key is not None:
            for h, name, _ in self.headers:
                if start <= h < end and name == f"{table}.{key}":
                    return h + 1
            return start
        return None

    def fail(self, path: str, message: str, table: str | None = None,
             index: int | None = None, key: str | None = None) -> UsageError:
        return ScenarioError(self.source, self.line_of(table, index, key),
                             f"{path}: {message}")


def type_name(v: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "a table"}.get(type(v), type(v).__name__)


def check_keys(ctx: Ctx, d: Mapping[str, Any], allowed: Sequence[str], path: str,
                table: str | None, index: int | None) -> None:
    for key in d:
        if key not in allowed:
            raise ctx.fail(f"{path}.{key}" if path else key,
                           f"unknown key; allowed: {', '.join(allowed)}", table, index, key)


def sub_table(ctx: Ctx, doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    v = doc.get(key, {})
    if not isinstance(v, dict):
        raise ctx.fail(key, f"must be a table [{key}], not {type_name(v)}", None, None, key)
    return v


def table_array(ctx: Ctx, doc: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    v = doc.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise ctx.fail(key, f"must be an array of tables [[{key}]]", None, None, key)
    return v


class Getter:
    """Typed access to one table of the file, failing with the key's line."""

    def __init__(self, ctx: Ctx, d: Mapping[str, Any], path: str, table: str | None,
                 index: int | None) -> None:
        self.ctx, self.d, self.path, self.table, self.index = ctx, d, path, table, index

    def fail(self, key: str, message: str) -> UsageError:
        return self.ctx.fail(f"{self.path}.{key}", message, self.table, self.index, key)

    def tables(self, key: str, raw: object, allowed: str) -> list[dict[str, Any]]:
        """`raw` (the value of `key`) as a list of inline tables; `allowed` says what the
        list holds when it is not one."""
        if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
            raise self.fail(key, f"{raw!r} is not allowed; allowed: {allowed}")
        return raw

    def known_keys(self, path: str, item: Mapping[str, Any], keys: Sequence[str]) -> None:
        """An inline table (`path`, e.g. "irqs[0]") with no key outside `keys`."""
        unknown = sorted(set(item) - set(keys))
        if unknown:
            raise self.fail(path, f"unknown key {unknown[0]!r}; allowed: " + ", ".join(keys))

    def str(self, key: str, default: str | None = None, pattern: re.Pattern[str] | None = None,
            what: str = "a string") -> str | None:
        v = self.d.get(key, default)
        if v is None:
            return None
        if not isinstance(v, str) or (pattern is not None and not pattern.fullmatch(v)):
            raise self.fail(key, f"{v!r} is not allowed; allowed: {what}")
        return v

    def bool(self, key: str, default: bool) -> bool:
        v = self.d.get(key, default)
        if not isinstance(v, bool):
            raise self.fail(key, f"{v!r} is not allowed; allowed: true or false")
        return v

    def int(self, key: str, lo: int, hi: int, default: int | None = None) -> int | None:
        v = self.d.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise self.fail(key, f"{v!r} is out of range; allowed: an integer {lo}..{hi}")
        return v

    def duration(self, key: str, lo: int, hi: int, default: int | None = None) -> int | None:
        v = self.d.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise self.fail(key, f"{v!r} is not a duration; allowed: a string with a unit "
                            "ns, us, ms, s, m or h, e.g. \"10s\"")
        try:
            ns = parse_duration(v, "duration")
        except UsageError as exc:
            raise self.fail(key, f"{exc.message}; allowed: a number with a unit "
                            "ns, us, ms, s, m or h, e.g. \"10s\"") from None
        if not lo <= ns <= hi:
            raise self.fail(key, f"{v!r} is out of range; allowed: {fd(lo)}..{fd(hi)}")
        return ns

    def cpus(self, key: str, online: Sequence[int], default: object,
             user: Sequence[int] | None = None, system: Sequence[int] | None = None) -> list[int]:
        v = self.d.get(key, default)
        try:
            return expand(v, online, user, system)
        except CpuExprError as exc:
            raise self.fail(key, str(exc)) from None

    def names(self, key: str, known: Sequence[str], what: str) -> list[str] | None:
        v = self.d.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(key, f"{v!r} is not allowed; allowed: an array of {what} names")
        for name in v:
            if name not in known:
                raise self.fail(key, f"no {what} named {name!r}; defined: "
                                + (", ".join(known) if known else "none"))
        return list(v)

