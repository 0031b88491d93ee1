# SPDX-License-Identifier: MIT
"""Energy a configuration costs, where the target exposes it: the kernel's powercap
interface (Intel/AMD RAPL: /sys/class/powercap/<zone>/energy_uj, a counter in µJ that
wraps at max_energy_range_uj). Read through the engine before and after each block, so
the ledger can say what the recommended configuration costs in watts. Only top-level
zones count (`intel-rapl:0`, not its sub-zone `intel-rapl:0:0`, which the package
zone contains already). Targets without powercap (this VM, the emulated boards, most
ARM boards) give None: the ledger then says "not measured"."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rtlab.errors import RtlabError

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

PATTERNS = ("/sys/class/powercap/*/energy_uj", "/sys/class/powercap/*/max_energy_range_uj")
_ZONE = re.compile(r"^/sys/class/powercap/([a-z0-9-]+:\d+)/(energy_uj|max_energy_range_uj)$")

Counters = dict[str, tuple[int, int]]  # zone -> (energy µJ, wrap range µJ)


def parse(records: list[dict[str, object]]) -> Counters:
    """The top-level zones' counters from `sys snapshot` records."""
    values: dict[str, dict[str, int]] = {}
    for rec in records:
        m = _ZONE.match(str(rec.get("path", "")))
        text = rec.get("text")
        if m is None or rec.get("type") != "file" or not isinstance(text, str):
            continue
        try:
            values.setdefault(m.group(1), {})[m.group(2)] = int(text.strip())
        except ValueError:
            continue
    return {z: (v["energy_uj"], v.get("max_energy_range_uj", 0))
            for z, v in values.items() if "energy_uj" in v}


def read(transport: Transport) -> Counters:
    from rtlab.engine.snapshot import snapshot

    try:
        return parse(snapshot(transport, PATTERNS))
    except RtlabError:
        return {}


def joules(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]
           ) -> float | None:
    """Energy used between two readings (J), over the zones both have; one wrap of a
    counter is undone with its range; None when there is nothing to compare."""
    zones = set(before) & set(after)
    if not zones:
        return None
    total = 0
    for z in zones:
        e0, rng = before[z]
        e1, _ = after[z]
        d = e1 - e0
        if d < 0:
            if rng <= 0:
                return None
            d += rng
        total += d
    return total / 1e6
