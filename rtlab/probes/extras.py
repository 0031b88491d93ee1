# SPDX-License-Identifier: MIT
"""The short per-probe section under the latency table (`rtlab run`, `results show`).

Built from what a stored result keeps: its channels and each phase's `extras`
(the probe's own objects of the engine's final record).
"""

from __future__ import annotations

from typing import Any

from rtlab.report.format import human
from rtlab.results.model import Phase, RunResult


def _noise(phase: Phase) -> list[str]:
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


def _interfere(phase: Phase) -> list[str]:
    from rtlab.probes import interfere

    x = (phase.extras or {}).get("interfere") or {}
    mode = x.get("mode")
    record: dict[str, Any] = {"type": "result", "interfere": x,
                              "channels": [c.to_dict() for c in phase.channels]}
    for c in record["channels"]:
        c["max_ns"] = c.get("max_ns") or 0
    try:
        if mode == "amdahl":
            a = interfere.summarize_amdahl([record])
            speed = ", ".join(f"{r.n}: {r.speedup:.2f}x" for r in a.rows)
            inj = (f" (injected serial {a.serial_injected:.3f})"
                   if a.serial_injected is not None else "")
            return [f"Amdahl fit: parallel fraction {a.p_fit:.3f}, serial "
                    f"{a.serial_fit:.3f}{inj}; speed-up by CPUs {speed}"]
        if mode == "pairs":
            rows, missing = interfere.summarize_pairs([record])
            txt = "; ".join(f"{r.workload} {r.pair_class} {r.ratio:.2f}x" for r in rows
                            if r.pair_class != "solo")
            more = f" (not on this machine: {', '.join(missing)})" if missing else ""
            return [f"interference ratio (paired/solo median): {txt or 'n/a'}{more}"]
        if mode == "sharing":
            rows2 = interfere.summarize_sharing([record])
            return ["sharing cost per op (median/p99): " + "; ".join(
                f"{r.variant}x{r.threads} {_ns(r.median_ns_per_op)}/{_ns(r.p99_ns_per_op)} ns"
                for r in rows2)]
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:
        return [f"interfere summary unavailable: {exc}"]
    return []


def phase_lines(probe: str, phase: Phase) -> list[str]:
    from rtlab.probes import event, overhead, switch, udp

    extras = phase.extras or {}
    if probe == "noise":
        return _noise(phase)
    if probe == "interfere":
        return _interfere(phase)
    if probe == "switch":
        return switch.lines(extras)
    if probe == "event":
        return event.lines(extras)
    if probe == "udp":
        return udp.lines(extras, phase.channels)
    if probe == "overhead":
        return overhead.lines(phase.channels)
    return []


def extra_lines(result: RunResult) -> list[str]:
    """Lines per phase (prefixed with the phase name when there are several)."""
    out: list[str] = []
    many = len(result.phases) > 1
    for phase in result.phases:
        for line in phase_lines(result.probe, phase):
            out.append(f"phase {phase.name}: {line}" if many else line)
    return out


def extras_dict(result: RunResult) -> dict[str, Any]:
    """Phase name -> the probe's extras, for exports that want them beside the channels."""
    return {p.name: p.extras for p in result.phases if p.extras}


def _ns(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"
