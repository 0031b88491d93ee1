# SPDX-License-Identifier: MIT
"""The host's side of `rtlab-probe hwnoise`: time stolen from a CPU with interrupts off
(hardware, firmware/SMI, hypervisor), measured by the kernel's osnoise (interrupts off)
or hwlat tracer. Its channels are the noise samples per CPU; its `hwnoise` extras carry
the tracer's own counters (docs/probes/hwnoise.md)."""

from __future__ import annotations

from typing import Any

from rtlab.probes.description import Phase, ProbeInfo, RunResult
from rtlab.results.shape import ResultShape
from rtlab.textfmt import human


def _stolen(nc: dict[str, Any]) -> str:
    ppm = nc.get("stolen_ppm")
    return f"{ppm / 10_000:.4f} %" if isinstance(ppm, int) else "n/a"


def phase_lines(_result: RunResult, phase: Phase) -> list[str]:
    """One line per CPU: the tracer, its samples, their total and max, the share stolen."""
    hw = (phase.extras or {}).get("hwnoise") or {}
    by_name = {c.name: c for c in phase.channels}
    tracer = f"{hw.get('tracer', '?')} ({hw.get('mode', '?')})"
    out = []
    for nc in hw.get("channels", []):
        ch = by_name.get(nc.get("channel"))
        extra = (f"{nc.get('windows', 0)} windows, {nc.get('above_threshold', 0)} above the "
                 "threshold" if hw.get("tracer") == "hwlat"
                 else f"{nc.get('periods', 0)} periods, hw {nc.get('hw_count', 0)}")
        out.append(f"hwnoise {nc.get('channel')}: {ch.samples if ch is not None else 0} "
                   f"samples, total {human(nc.get('noise_ns'))}, max "
                   f"{human(ch.max_ns if ch is not None else None)}, stolen {_stolen(nc)} of "
                   f"{human(nc.get('measured_ns'))} measured, NMIs {nc.get('nmi_count', 0)}; "
                   f"{extra}; tracer {tracer}, threshold {human(hw.get('threshold_ns'))}")
    return out


# A quiet CPU gives no sample at all: the tracer measured when its time counted.
INFO = ProbeInfo("hwnoise", ResultShape(measures="hardware noise (interrupts off)",
                                        work_counter="measured_ns"),
                 phase_lines=phase_lines)
