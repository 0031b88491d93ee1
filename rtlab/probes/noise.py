# SPDX-License-Identifier: MIT
"""Summary of a `rtlab-probe noise` run: noise per second, % CPU available, gap counts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rtlab.probes.description import Monitored, Phase, ProbeInfo, RunResult
from rtlab.results.histogram import bucket_bounds
from rtlab.results.shape import ResultShape
from rtlab.textfmt import human


def count_at_least(buckets: Iterable[list[int]], value_ns: int) -> int:
    """Gaps whose bucket lies wholly at or above value_ns (a lower bound, <= 0.8 % off)."""
    return sum(c for i, c in buckets if bucket_bounds(i)[0] >= value_ns)


@dataclass(frozen=True)
class NoiseChannel:
    name: str
    cpu: int | None
    measured_ns: int
    loops: int
    gaps: int  # gaps above --gap-threshold
    noise_ns: int  # their total
    max_gap_ns: int | None
    throttle_gaps: int
    gaps_ge: dict[int, int] = field(default_factory=dict)  # threshold ns -> count
    listed_gaps: list[tuple[int, int]] = field(default_factory=list)  # mono start, end
    gaps_dropped: int = 0
    window_max_ns: list[tuple[int, int]] = field(default_factory=list)  # (index, max)

    @property
    def seconds(self) -> float:
        return self.measured_ns / 1e9

    @property
    def noise_ns_per_s(self) -> float:
        return self.noise_ns / self.seconds if self.measured_ns else 0.0

    @property
    def available_pct(self) -> float:
        if not self.measured_ns:
            return 0.0
        return 100.0 * max(0, self.measured_ns - self.noise_ns) / self.measured_ns

    @property
    def loops_per_s(self) -> float:
        return self.loops / self.seconds if self.measured_ns else 0.0

    def per_second(self, threshold_ns: int) -> float:
        return self.gaps_ge.get(threshold_ns, 0) / self.seconds if self.measured_ns else 0.0


DEFAULT_LEVELS = (10_000, 20_000, 50_000, 100_000)


def summarize(records: list[Mapping[str, Any]],
              levels: tuple[int, ...] = DEFAULT_LEVELS) -> list[NoiseChannel]:
    """Per-channel summary of a noise run (the result, else the last snapshot)."""
    header = next((r for r in records if r.get("type") == "header"), None)
    if header is None or header.get("probe") != "noise":
        raise ValueError("not a noise run: no header with probe 'noise'")
    final = next((r for r in reversed(records) if r.get("type") in ("result", "snapshot")),
                 None)
    if final is None:
        return []
    listed: dict[str, list[tuple[int, int]]] = {}
    windows: dict[str, list[tuple[int, int]]] = {}
    for r in records:
        if r.get("type") not in ("snapshot", "result"):
            continue
        for nc in r.get("noise", {}).get("channels", []):
            listed.setdefault(nc["channel"], []).extend((s, e) for s, e in nc["gaps"])
        for ch in r["channels"]:
            windows.setdefault(ch["name"], []).extend((w[0], w[1]) for w in ch["windows"])
    extra = {nc["channel"]: nc for nc in final.get("noise", {}).get("channels", [])}
    out = []
    for ch in final["channels"]:
        nc = extra.get(ch["name"], {})
        buckets = ch["hist"]["buckets"]
        out.append(NoiseChannel(
            name=ch["name"], cpu=ch["cpu"], measured_ns=int(nc.get("measured_ns", 0)),
            loops=int(nc.get("loops", 0)), gaps=int(ch["samples"]),
            noise_ns=int(ch["sum_ns"]), max_gap_ns=ch["max_ns"],
            throttle_gaps=int(nc.get("throttle_gaps", 0)),
            gaps_ge={lv: count_at_least(buckets, lv) for lv in levels},
            listed_gaps=listed.get(ch["name"], []),
            gaps_dropped=int(nc.get("gaps_dropped", 0)),
            window_max_ns=windows.get(ch["name"], []),
        ))
    return out


def phase_lines(_result: RunResult, phase: Phase) -> list[str]:
    nz = (phase.extras or {}).get("noise") or {}
    by_name = {c.name: c for c in phase.channels}
    out = []
    for nc in nz.get("channels", []):
        measured = int(nc.get("measured_ns") or 0)
        ch = by_name.get(nc.get("channel"))
        gaps = ch.samples if ch is not None else 0
        per_s = gaps / (measured / 1e9) if measured else 0.0
        avail = nc.get("available_ppm")
        avail_txt = f"{avail / 10_000:.3f} %" if isinstance(avail, int) else "n/a"
        out.append(f"noise {nc.get('channel')}: CPU available {avail_txt}, noise "
                   f"{human(nc.get('noise_ns_per_s'))}/s, {per_s:,.1f} gaps/s, max gap "
                   f"{human(ch.max_ns if ch is not None else None)} (counter "
                   f"{nz.get('counter', '?')})")
    return out


INFO = ProbeInfo("noise", ResultShape(measures="noise gap", work_counter="loops",
                                      owns_its_cpus=True),
                 lists_gaps=True, phase_lines=phase_lines,
                 monitor=Monitored("OS noise seen by a thread that spins on each CPU (it takes "
                                   "the whole CPU: for CPUs reserved to a polling workload)",
                                   wakes=False, why_not_waking="it spins on each CPU"))
