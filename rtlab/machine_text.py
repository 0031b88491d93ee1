# SPDX-License-Identifier: MIT
"""A run's recorded machine in words: its preemption model and where it was read, its
CPU model and which CPUs are which core (docs/engine-output.md#cpu-model); used by the
terminal and HTML reports, the exporters and the doctor."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab.cpulist import format_cpulist


def preemption(system: Mapping[str, Any]) -> str | None:
    """The recorded preemption model with where the engine read it, e.g.
    "none (kernel config default: /proc/config.gz (CONFIG_PREEMPT_NONE=y); live mode
    unreadable: debugfs not mounted)"; None when nothing was recorded."""
    model = system.get("preempt")
    if not model:
        return None
    why = [str(system["preempt_source"])] if system.get("preempt_source") else []
    if system.get("preempt_live_error"):
        why.append(f"live mode unreadable: {system['preempt_live_error']}")
    return f"{model} ({'; '.join(why)})" if why else str(model)


def core_groups(system: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The recorded cores as (CPU list, name) pairs, e.g. [("0-3", "Cortex-A55"),
    ("4-7", "Cortex-A76")], from `cpu_models` (docs/engine-output.md#cpu-model); [] when
    not recorded (an older engine) or malformed."""
    out: list[tuple[str, str]] = []
    for g in system.get("cpu_models") or []:
        if isinstance(g, Mapping) and isinstance(g.get("model"), str) and isinstance(
                g.get("cpus"), list):
            out.append((format_cpulist(int(c) for c in g["cpus"]), g["model"]))
    return out


def processor(system: Mapping[str, Any]) -> str | None:
    """The recorded CPU model, and which CPUs are which core when they differ:
    "Cortex-A53", "4x Cortex-A55 + 4x Cortex-A76 (CPUs 0-3 Cortex-A55, 4-7 Cortex-A76)";
    None when nothing was recorded."""
    model = system.get("cpu_model")
    if not model:
        return None
    groups = core_groups(system)
    if len(groups) < 2:
        return str(model)
    return f"{model} (CPUs " + ", ".join(f"{c} {m}" for c, m in groups) + ")"
