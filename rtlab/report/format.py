# SPDX-License-Identifier: MIT
"""Number formatting shared by the terminal report and the exporters."""

from __future__ import annotations

NA = "n/a"


def us(ns: float | None) -> str:
    """ns -> µs text with sensible precision: 3.21, 45.6, 2410."""
    if ns is None:
        return NA
    v = ns / 1000.0
    if v < 10:
        return f"{v:.2f}"
    if v < 100:
        return f"{v:.1f}"
    return f"{v:.0f}"


def human(ns: float | None) -> str:
    """ns -> '850 ns', '12.3 µs', '2.41 ms', '1.20 s'."""
    if ns is None:
        return NA
    if ns < 1_000:
        return f"{ns:.0f} ns"
    for unit, size in (("µs", 1e3), ("ms", 1e6), ("s", 1e9)):
        v = ns / size
        if v < 1000 or unit == "s":
            prec = 2 if v < 10 else 1 if v < 100 else 0
            return f"{v:.{prec}f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def seconds(ns: int | None) -> str:
    return NA if ns is None else f"{ns / 1e9:.1f} s"
