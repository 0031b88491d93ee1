# SPDX-License-Identifier: MIT
"""Kernel-style CPU lists ("0-3,6") and hex CPU masks ("ff,ffffffff"): the one parser
and formatter of both, shared by every layer (no dependencies). Callers word their
own errors from `CpuListError` (what was wrong, and in which item)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from rtlab.textfmt import shown

_ITEM = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*(?::\s*([0-9]+)\s*)?)?")
_SIGNED = re.compile(r"\s*-\s*[0-9]")

# the kernel's largest NR_CPUS: no CPU number of any machine reaches it, and a list
# ("0-99999999999") is refused before a set that size is built
MAX_CPUS = 8192


class CpuListError(ValueError):
    """`reason`: "empty_item" (",,"), "negative" ("-1"), "bad_item" (not N or N-M),
    "reversed" (M < N), "too_big" (`cpu` at or above the caller's limit); `item`: the
    item, stripped. Its text is the kernel-list wording ("bad CPU list element '1-'"),
    every value quoted short (rtlab.textfmt.shown: a 10-MB list is one short line)."""

    _TEXT: ClassVar[dict[str, str]] = {
             "empty_item": "empty element in CPU list {text}",
             "negative": "negative CPU {item} in CPU list {text}",
             "bad_item": "bad CPU list element {item}",
             "reversed": "descending CPU range {item}",
             "too_big": "CPU {cpu} is out of range in CPU list {text} (CPUs are 0-{top})"}

    def __init__(self, reason: str, item: str, text: str, cpu: int | None = None,
                 limit: int = MAX_CPUS) -> None:

        self.reason = reason
        self.item = item.strip()
        self.text = text.strip()
        self.cpu = cpu
        self.limit = limit
        super().__init__(self._TEXT[reason].format(
            item=shown(self.item), text=shown(self.text),
            cpu=shown(self.item) if cpu is None else cpu, top=limit - 1))


def parse_cpulist(text: str, *, strides: bool = False, limit: int = MAX_CPUS
                  ) -> list[int]:
    """'0-2,5' -> [0, 1, 2, 5] (sorted, unique); blanks around numbers are ignored and an
    empty or blank text is []. `strides`: also the kernel's "0-7:2" form (some boot
    parameters). `limit`: CPUs must be below it (MAX_CPUS unless the caller knows
    better). Items are checked in order; the first bad one raises CpuListError."""
    cpus: set[int] = set()
    if not text.strip():
        return []
    for part in text.split(","):
        if not part.strip():
            raise CpuListError("empty_item", part, text)
        m = _ITEM.fullmatch(part)
        if not m and _SIGNED.match(part):
            raise CpuListError("negative", part, text, limit=limit)
        if not m or (m.group(3) is not None and (not strides or int(m.group(3)) < 1)):
            raise CpuListError("bad_item", part, text)
        if any(g is not None and len(g) > 9 for g in m.groups()):  # no int() of 10 MB
            raise CpuListError("too_big", part, text, None, limit)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise CpuListError("reversed", part, text)
        if hi >= limit:
            raise CpuListError("too_big", part, text, hi, limit)
        cpus.update(range(lo, hi + 1, int(m.group(3) or 1)))
    return sorted(cpus)


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


def parse_cpumask(text: str) -> list[int]:
    """A hex CPU mask as the kernel prints it ("ff,ffffffff" or "3") -> sorted CPUs.
    ValueError when it is not hex."""
    value = int(text.strip().replace(",", "") or "0", 16)
    return [bit for bit in range(value.bit_length()) if value >> bit & 1]


def format_cpumask(cpus: Iterable[int], *, full_words: bool = False) -> str:
    """CPUs -> the kernel's mask text: comma-separated 32-bit hex words, most significant
    first. A single word is written short ("3") unless `full_words` ("00000003", as
    tracing_cpumask prints it)."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    words: list[str] = []
    while True:
        words.append(f"{mask & 0xFFFFFFFF:08x}")
        mask >>= 32
        if not mask:
            break
    text = ",".join(reversed(words))
    if len(words) == 1 and not full_words:
        return text.lstrip("0") or "0"
    return text
