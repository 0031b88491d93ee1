# SPDX-License-Identifier: MIT
"""What a stored result says ran on some CPUs besides the probe during a phase."""

from __future__ import annotations

from rtlab.cpulist import format_cpulist
from rtlab.probes.description import Phase, RunResult


def probe_cpus(result: RunResult) -> list[int]:
    """The CPUs the engine's configuration names."""
    cpus = ((result.provenance.get("engine") or {}).get("config") or {}).get("cpus") or []
    return [int(c) for c in cpus if isinstance(c, int)]


def what_ran(result: RunResult, phase: Phase, cpus: list[int]) -> list[str]:
    """What a stored result says ran on `cpus` besides the probe during `phase`: the
    scenario's loads placed there (or anywhere), tasks the shield check saw appear there,
    CPUs neither isolated nor shielded, a virtual machine (the doctor's finding)."""
    host = result.provenance.get("host") or {}
    info = next((p for p in host.get("phases") or [] if p.get("name") == phase.name), {})
    out = []
    for ld in info.get("loads") or []:
        where = ld.get("cpus")
        if where is None or set(where) & set(cpus):
            place = "any CPU" if where is None else f"CPUs {format_cpulist(where)}"
            out.append(f"load {ld.get('name')} ({ld.get('kind')}, on {place})")
    shield = host.get("shield") or {}
    for chk in shield.get("phase_checks") or []:
        if chk.get("phase") == phase.name:
            out += [f"task {t.get('comm')}[{t.get('tid')}] on CPU {t.get('cpu')}"
                    for t in chk.get("new_tasks") or [] if t.get("cpu") in cpus][:3]
    quiet = set(result.system.get("cpus_isolated") or [])
    quiet |= set((shield.get("requested") or {}).get("user") or [])
    open_cpus = [c for c in cpus if c not in quiet]
    if open_cpus:
        s = "s" if len(open_cpus) > 1 else ""
        out.append(f"CPU{s} {format_cpulist(open_cpus)} neither isolated nor shielded (any "
                   "task may run there)")
    virt = [f for f in (result.provenance.get("doctor") or {}).get("findings") or []
            if f.get("check") == "virt" and f.get("severity") not in (None, "ok")]
    out += [str(f.get("summary")) for f in virt[:1]]
    return out
