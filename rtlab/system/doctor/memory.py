# SPDX-License-Identifier: MIT
"""Memory: transparent huge pages and swap."""

from __future__ import annotations

import re

from rtlab.system.doctor.check import Check, Code, Context, Finding, Severity

THP = "sys/kernel/mm/transparent_hugepage"


def _bracketed(text: str | None) -> str | None:
    if text is None:
        return None
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip()


class ThpCheck(Check):
    """With THP 'always', page faults may compact memory synchronously and khugepaged collapses
    pages in the background, both causing stalls of milliseconds."""

    id = "thp"
    title = "Transparent huge pages"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        enabled = _bracketed(s.read(f"{THP}/enabled"))
        defrag = _bracketed(s.read(f"{THP}/defrag"))
        facts = {"enabled": enabled, "defrag": defrag}
        if enabled is None:
            if s.exists("sys/kernel/mm") or s.exists("sys/kernel"):
                return self.ok("THP not built in", facts)
            return self.unknown("sys/kernel/mm not readable", facts)
        summary = f"enabled={enabled}, defrag={defrag}"
        if enabled == "always" or defrag == "always":
            return self.problem(
                Severity.WARNING, Code.THP_ALWAYS, summary,
                advice="echo madvise > /sys/kernel/mm/transparent_hugepage/enabled; echo "
                "madvise > /sys/kernel/mm/transparent_hugepage/defrag (boot: "
                "transparent_hugepage=madvise)",
                facts=facts)
        return self.ok(summary, facts)


class SwapCheck(Check):
    """A page that was swapped out costs a disk read to fault back in; mlockall protects the
    probe, not the tasks it interacts with."""

    id = "swap"
    title = "Swap"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        swaps = s.read("proc/swaps")
        if swaps is None:
            return self.unknown("proc/swaps not readable")
        devices = [line.split()[0] for line in swaps.splitlines()[1:] if line.split()]
        facts = {"devices": devices, "swappiness": s.read_int("proc/sys/vm/swappiness")}
        if devices:
            return self.problem(
                Severity.WARNING, Code.SWAP_ON, f"swap on: {', '.join(devices)}",
                advice="swapoff -a (or at least sysctl vm.swappiness=0) on a real-time system",
                facts=facts)
        return self.ok("no swap", facts)
