# SPDX-License-Identifier: MIT
"""A `[shield]` table as TOML text, from a ShieldSpec: the profile `rtlab tune` exports
and `rtlab run`/`rtlab shield --scenario` apply. The text loads back (rtlab.scenario.
loader) into the same ShieldSpec on a machine with the same online CPUs."""

from __future__ import annotations

import json

from rtlab.cpulist import format_cpulist
from rtlab.scenario.model import KNOB_FIELDS, ShieldSpec

_FLAGS = ("cpuset", "tasks", "kthreads", "irqs", "default_smp_affinity")


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return json.dumps(str(v))  # a TOML basic string: JSON's escapes are TOML's


def shield_toml(spec: ShieldSpec, *, comment: str | None = None) -> str:
    """`[shield]` with every key of `spec` (CPU sets as lists, e.g. "2-3"); `comment`:
    lines put above the table as TOML comments."""
    lines = [f"# {c}".rstrip() for c in (comment.splitlines() if comment else [])]
    lines.append("[shield]")
    lines.append(f"user = {_value(format_cpulist(spec.user))}")
    lines.append(f"system = {_value(format_cpulist(spec.system))}")
    lines += [f"{k} = {_value(getattr(spec, k))}" for k in _FLAGS]
    if spec.sched_rt_runtime_us is not None:
        lines.append(f"sched_rt_runtime_us = {spec.sched_rt_runtime_us}")
    if spec.dma_latency is not None:
        lines.append(f"dma_latency = {spec.dma_latency}")
    if spec.thread_priorities:
        items = ", ".join(f"{{match = {_value(m)}, policy = {_value(pol)}, priority = {pr}}}"
                          for m, pol, pr in spec.thread_priorities)
        lines.append(f"thread_priorities = [{items}]")
    lines += [f"{k} = {_value(v)}" for k in KNOB_FIELDS
              if (v := getattr(spec, k)) is not None]
    return "\n".join(lines) + "\n"
