# SPDX-License-Identifier: MIT
"""Which load each run's phases really ran, so that a comparison never mixes two
different loads without saying it: a stress-ng load and the engine's built-in load that
stood in for it where stress-ng was missing (rtlab.loads.fallback) load a machine
differently, and latencies measured under them are not the same experiment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rtlab.results.model import RunResult


def _what_ran(load: dict[str, Any]) -> str:
    kind = str(load.get("kind") or "?")
    if kind == "stress":
        return "stress-ng"
    fb = load.get("fallback")
    if kind == "builtin" and isinstance(fb, dict):
        return f"the engine's built-in load (standing in for {fb.get('for_kind', '?')})"
    if kind == "builtin":
        return "the engine's built-in load"
    net = load.get("network")
    if kind == "osadl-mid" and isinstance(net, dict):  # a board's (rtlab.loads.osadl_board)
        return "osadl-mid as the engine's own load" + (
            " without its network part" if net.get("left_out") else "")
    if kind == "osadl-mid":
        return "osadl-mid (stress-ng and sockperf)"
    return kind


def loads_run(result: RunResult) -> dict[str, str]:
    """Load name -> what ran for it in this run (every phase of the stored run)."""
    out: dict[str, str] = {}
    host = result.provenance.get("host") if isinstance(result.provenance, dict) else None
    phases = host.get("phases") if isinstance(host, dict) else None
    for ph in phases if isinstance(phases, list) else []:
        for load in (ph.get("loads") or []) if isinstance(ph, dict) else []:
            if isinstance(load, dict) and isinstance(load.get("name"), str):
                out[load["name"]] = _what_ran(load)
    return out


def mixed_load_notes(results: Sequence[RunResult]) -> list[str]:
    """One line per load name that ran as different loads in the given runs."""
    seen: dict[str, dict[str, list[str]]] = {}
    for r in results:
        for name, what in loads_run(r).items():
            seen.setdefault(name, {}).setdefault(what, []).append(r.run_id[:8])
    notes = []
    for name, whats in seen.items():
        if len(whats) < 2:
            continue
        parts = "; ".join(f"{what} in {', '.join(ids[:4])}" + (" ..." if len(ids) > 4 else "")
                          for what, ids in whats.items())
        notes.append(f"load {name} differs between the runs: {parts}; latencies under "
                     "different loads are not the same experiment")
    return notes
