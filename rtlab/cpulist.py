# SPDX-License-Identifier: MIT
"""Kernel-style CPU list text ("0-3,6"), shared by every layer (no dependencies)."""

from __future__ import annotations

from collections.abc import Iterable


def format_cpulist(cpus: Iterable[int]) -> str:
    """Format CPUs as a compact kernel CPU list: [0, 1, 2, 3, 6] -> "0-3,6"."""
    out: list[str] = []
    items = sorted(set(cpus))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)
