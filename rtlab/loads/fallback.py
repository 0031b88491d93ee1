# SPDX-License-Identifier: MIT
"""The engine's own load standing in for stress-ng where a scenario allows it.

A `[[load]]` of kind `stress` with `fallback = "builtin"` runs as kind `builtin` (the
engine's `rtlab-probe load`) on a target without stress-ng: its CPU workers, memory
workers, memory size, CPUs and a fifo/rr policy with its priority (the seed's hog at
SCHED_FIFO 97) carry over; what the engine's load cannot do (other stressors, a partial
CPU load, the batch/idle policies, ...) is left out and named. The substitute is never
silent: it carries a `fallback` description that the run's notes, the stored result,
the report and `rtlab compare` show (docs/loads.md#fallback).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab.errors import MissingToolError
from rtlab.loads.engine_loads import BUILTIN_MAX_WORKERS, BUILTIN_POLICIES, BuiltinLoad
from rtlab.loads.kinds import LOAD_KINDS
from rtlab.loads.lifecycle import Load, Placement
from rtlab.loads.params import format_size
from rtlab.loads.stress import STRESSORS

FALLBACKS = ("builtin",)
FALLBACK_KINDS = ("stress",)  # the kinds that may name a fallback


def check_fallback(kind: str, value: object) -> str | None:
    """Why `fallback = value` is wrong for a load of this kind (None: it is fine)."""
    if not isinstance(value, str) or value not in FALLBACKS:
        return f"{value!r} is not a fallback; allowed: " + ", ".join(repr(f) for f in FALLBACKS)
    if kind not in FALLBACK_KINDS:
        return (f"a load of kind {kind!r} has no fallback; only "
                + ", ".join(FALLBACK_KINDS) + " loads can fall back to the engine's load")
    return None


def _left_out(params: Mapping[str, Any], placement: Placement) -> list[str]:
    """What of a stress load the engine's load does not do."""
    out = [f"{s} {params[s]}" for s in STRESSORS if s not in ("cpu", "vm") and params.get(s)]
    if params.get("cpu") and params.get("cpu_load", 100) != 100:
        out.append(f"cpu_load {params['cpu_load']} %")
    if params.get("vm") and params.get("vm_hang"):
        out.append(f"vm_hang {params['vm_hang']} s")
    if params.get("ionice", "none") != "none":
        out.append(f"ionice {params['ionice']}")
    if placement.policy not in BUILTIN_POLICIES:
        out.append(f"policy {placement.policy} (runs as SCHED_OTHER)")
    return out


def _placement(placement: Placement) -> Placement:
    """The stress load's placement as the engine's load can honour it: the same CPUs, and
    its policy and priority where the engine has that policy (other, fifo, rr)."""
    if placement.policy in BUILTIN_POLICIES:
        return placement
    return Placement(placement.cpus, "other", 0)


def builtin_instead(load: Load, missing: MissingToolError) -> Load | None:
    """The engine's load in place of a stress load whose tool is missing, or None when
    nothing of it carries over (no CPU and no memory workers). Its `extra["fallback"]`
    says what it stands in for, why, and what was left out."""
    p = load.params
    cpu = min(int(p.get("cpu") or 0), BUILTIN_MAX_WORKERS)
    vm = min(int(p.get("vm") or 0), BUILTIN_MAX_WORKERS)
    if not cpu and not vm:
        return None
    values, errors = LOAD_KINDS["builtin"].resolve(
        {"cpu": cpu, "vm": vm, "vm_bytes": p.get("vm_bytes", 64 << 20)})
    if errors:
        return None
    placement = _placement(load.placement)
    sub = BuiltinLoad(values, placement, name=load.name)
    left = _left_out(p, load.placement)
    kept = [f"cpu {cpu}"] if cpu else []
    if vm:
        kept.append(f"vm {vm} x {format_size(values['vm_bytes'])}")
    if placement.policy != "other":
        kept.append(f"policy {placement.policy} {placement.priority}")
    sub.extra["fallback"] = {
        "for_kind": load.kind, "reason": missing.message, "missing": list(missing.tools),
        "kept": kept, "left_out": left, "stress_params": dict(p),
    }
    return sub


def fallback_note(load: Load) -> str | None:
    """The one line a run shows and stores for a load that stands in for another."""
    fb = load.extra.get("fallback")
    if not isinstance(fb, dict):
        return None
    text = (f"load {load.name}: {fb.get('reason')}: ran the engine's built-in CPU+memory load "
            f"instead ({', '.join(fb.get('kept') or [])})")
    if fb.get("left_out"):
        text += "; left out: " + ", ".join(fb["left_out"])
    return text + "; compare only with runs of the same load"
