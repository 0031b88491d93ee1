# SPDX-License-Identifier: MIT
"""Kernel text symbols for the addresses a capture holds (hrtimer callbacks).

The recording engine keeps addresses; the host names them from the traced machine's
`/proc/kallsyms` (this machine's, or a board's copied through its engine), and a
capture keeps only the names it uses (`TraceCapture.save`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

KALLSYMS = "/proc/kallsyms"
TEXT_TYPES = frozenset("tTwW")


def parse_kallsyms(lines: Iterable[str]) -> dict[int, str]:
    """address -> name of every text symbol (the first name of an address wins); zero
    addresses (kptr_restrict without root) are left out."""
    table: dict[int, str] = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[1] in TEXT_TYPES:
            try:
                addr = int(parts[0], 16)
            except ValueError:
                continue
            if addr:
                table.setdefault(addr, parts[2])
    return table


class LocalSymbols(dict[int, str]):
    """This machine's text symbols, read from /proc/kallsyms once, when first asked."""

    _table: dict[int, str] | None = None

    def _load(self) -> dict[int, str]:
        if LocalSymbols._table is None:
            table: dict[int, str] = {}
            with contextlib.suppress(OSError), open(KALLSYMS) as f:
                table = parse_kallsyms(f)
            LocalSymbols._table = table
        return LocalSymbols._table

    def get(self, key: int, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._load().get(key, default)

    def __bool__(self) -> bool:
        return True

    def items(self):  # type: ignore[override]
        return {}.items()  # never persisted wholesale; see TraceCapture.save
