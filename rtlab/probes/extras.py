# SPDX-License-Identifier: MIT
"""The short per-probe section under the latency table (`rtlab run`, `results show`).

Built from what a stored result keeps: its channels and each phase's `extras`
(the probe's own objects of the engine's final record).
"""

from __future__ import annotations

from typing import Any

from rtlab.cpulist import format_cpulist
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


def _interfere_record(phase: Phase) -> dict[str, Any]:
    """The engine's final record of an interfere phase, rebuilt from the stored phase."""
    x = (phase.extras or {}).get("interfere") or {}
    record: dict[str, Any] = {"type": "result", "interfere": x,
                              "channels": [c.to_dict() for c in phase.channels]}
    for c in record["channels"]:
        c["max_ns"] = c.get("max_ns") or 0
    return record


def _probe_cpus(result: RunResult) -> list[int]:
    cpus = ((result.provenance.get("engine") or {}).get("config") or {}).get("cpus") or []
    return [int(c) for c in cpus if isinstance(c, int)]


def _amdahl_note(result: RunResult, phase: Phase) -> str | None:
    """Why an amdahl phase gets no fit (None: it gets one), naming what the result
    recorded on the CPUs that were not quiet."""
    from rtlab.probes import interfere

    if ((phase.extras or {}).get("interfere") or {}).get("mode") != "amdahl":
        return None
    try:
        a = interfere.summarize_amdahl([_interfere_record(phase)], _probe_cpus(result))
    except (KeyError, ValueError, TypeError, ZeroDivisionError):
        return None  # the summary line says that it is unavailable
    return a.note(what_ran(result, phase, a.busy_cpus() or list(a.cpus)))


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


def _interfere(result: RunResult, phase: Phase) -> list[str]:
    from rtlab.probes import interfere

    mode = ((phase.extras or {}).get("interfere") or {}).get("mode")
    record = _interfere_record(phase)
    try:
        if mode == "amdahl":
            a = interfere.summarize_amdahl([record], _probe_cpus(result))
            speed = ", ".join(f"{r.n}: {r.speedup:.2f}x" for r in a.rows)
            inj = (f" (injected serial {a.serial_injected:.3f})"
                   if a.serial_injected is not None else "")
            if not a.fitted:  # a p outside [0, 1] is no fit: say why instead
                return [f"speed-up by CPUs {speed}{inj}", str(_amdahl_note(result, phase))]
            return [f"Amdahl fit: parallel fraction {a.parallel:.3f}, serial "
                    f"{1 - a.parallel:.3f}{inj}; speed-up by CPUs {speed}"]
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


def phase_lines(result: RunResult, phase: Phase) -> list[str]:
    from rtlab.probes import event, overhead, switch, udp

    probe = result.probe
    extras = phase.extras or {}
    if probe == "noise":
        return _noise(phase)
    if probe == "interfere":
        return _interfere(result, phase)
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
        for line in phase_lines(result, phase):
            out.append(f"phase {phase.name}: {line}" if many else line)
    return out


def probe_notes(result: RunResult) -> list[str]:
    """Notes the probe's own numbers call for, to keep in the result's notes (the runner
    and the importer add them when a result is made): an interfere amdahl phase whose
    Amdahl fit is outside its physical bounds says why no fit is given."""
    if result.probe != "interfere":
        return []
    many = len(result.phases) > 1
    out = []
    for phase in result.phases:
        note = _amdahl_note(result, phase)
        if note is not None:
            out.append(f"phase {phase.name}: {note}" if many else note)
    return out


def extras_dict(result: RunResult) -> dict[str, Any]:
    """Phase name -> the probe's extras, for exports that want them beside the channels."""
    return {p.name: p.extras for p in result.phases if p.extras}


def _ns(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"
