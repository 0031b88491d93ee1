# SPDX-License-Identifier: MIT
"""Summary of a `rtlab-probe udp` run: packet counters and where the round trip goes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rtlab.probes.description import Channel, Phase, ProbeInfo, RunResult, TwoEnded
from rtlab.results.shape import ResultShape
from rtlab.textfmt import human

# the counters people look at first, in this order; any others follow
_FIRST = ("sent", "received", "lost", "late", "reordered", "duplicates", "invalid")


def lines(extras: Mapping[str, Any], channels: Sequence[Channel]) -> list[str]:
    udp = dict(extras.get("udp") or {})
    out: list[str] = []
    mode = udp.pop("mode", None)
    counters = {k: v for k, v in udp.items() if isinstance(v, int)}
    if counters:
        keys = [k for k in _FIRST if k in counters] + sorted(k for k in counters
                                                              if k not in _FIRST)
        out.append(f"udp {mode or ''} packets: ".replace("  ", " ")
                   + ", ".join(f"{k} {counters[k]:,}" for k in keys))
    thread = udp.get("socket_thread")
    if isinstance(thread, Mapping) and isinstance(thread.get("cpu_ns"), int):
        # how the socket thread used its CPU (--pace, --wait): a spinning thread's
        # CPU time is close to the run's and it switches out only when preempted
        out.append(f"socket thread: CPU time {human(thread['cpu_ns'])}, "
                   f"{thread.get('voluntary_switches', 0):,} voluntary and "
                   f"{thread.get('involuntary_switches', 0):,} involuntary switches")
    split = []
    for ch in channels:
        if ch.name == "rtt" or not ch.samples:
            continue
        s = ch.summary((50.0, 99.0))
        split.append(f"{ch.name} {human(s.p(50.0))} (p99 {human(s.p(99.0))})")
    if split:
        out.append("where the round trip goes (median): " + "; ".join(split))
    return out


def phase_lines(_result: RunResult, phase: Phase) -> list[str]:
    return lines(phase.extras or {}, phase.channels)


def why_nothing(phase: Phase) -> str:
    """What a phase that measured nothing lost: " (3 of 3 round trips lost)"."""
    udp = (phase.extras or {}).get("udp")
    if not isinstance(udp, dict) or not isinstance(udp.get("sent"), int):
        return ""
    return f" ({udp.get('lost', 0)} of {udp['sent']} round trips lost)"


# The pinger measures against a reflector that rtlab starts alike (same path): the
# options the host acts on, checked when a scenario is loaded; the engine checks the
# others (`rtlab-probe udp --help`).
HOST_CHOICES: dict[str, tuple[str, ...]] = {
    "mode": ("ping", "reflect"),
    "path": ("socket", "xdp"),
    "xdp_mode": ("auto", "native", "generic"),
}

# The round trip is the headline, never merged with its own parts; the reflector has
# no `rtt`: its headline is its `wakeup`.
INFO = ProbeInfo("udp", ResultShape(measures="round trip", headline=("rtt", "wakeup"),
                                    owns_its_cpus=True, why_nothing=why_nothing),
                 single_cpu=True, phase_lines=phase_lines,
                 two_ended=TwoEnded(host_choices=HOST_CHOICES))
