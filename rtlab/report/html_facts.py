# SPDX-License-Identifier: MIT
"""What a run ran on, in the HTML report: configuration and provenance, the doctor's
findings and the shield (what was moved, what stayed on the measured CPUs)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rtlab.machine_text import preemption, processor
from rtlab.report.html_blocks import (
    cpus_text,
    esc,
    kv_table,
    records_table,
    value_html,
)
from rtlab.textfmt import NA

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.results.model import RunResult


def provenance_section(result: RunResult) -> str:
    prov = result.provenance or {}
    eng = prov.get("engine") or {}
    host = prov.get("host") or {}
    system = result.system
    eff = eng.get("effective") or {}
    parts = ["<h3>Configuration and provenance</h3>"]
    parts.append(kv_table([
        ("host", system.get("hostname") or host.get("hostname")),
        ("kernel", " ".join(str(x) for x in (system.get("release"), system.get("version"))
                            if x)),
        ("preemption model", preemption(system)),
        ("kernel command line", system.get("cmdline")),
        ("CPU model", processor(system)),
        ("CPUs online / isolated / nohz_full",
         " / ".join(cpus_text(system.get(k)) for k in ("cpus_online", "cpus_isolated", "nohz_full"))
         if system else None),
        ("clocksource", system.get("clocksource")),
        ("sched_rt_runtime_us", system.get("sched_rt_runtime_us")),
        ("probe", result.probe),
        ("scenario", f"{result.scenario.get('name') or NA} (hash "
                     f"{str(result.scenario.get('hash') or NA)[:12]})"),
        ("real-time valid", result.rt_valid),
        ("engine", f"{eng.get('engine_version') or NA}: {' '.join(map(str, eng.get('argv') or []))}"
         if eng else None),
        ("requested configuration", eng.get("config")),
        ("memory locking (requested / effect)", eff.get("mlock")),
        ("cpu_dma_latency", eff.get("dma_latency")),
        ("started / ended (UTC)", f"{host.get('start_wall') or NA} / {host.get('end_wall') or NA}"
         if host else None),
        ("rtlab command", " ".join(map(str, host.get("command_line") or [])) or None),
        ("transport", host.get("transport")),
        ("imported", prov.get("imported")),
    ]))
    threads = eff.get("threads")
    if threads:
        parts.append("<p><b>Measuring threads as read back from the kernel</b></p>")
        parts.append(records_table(threads, ("channel", "cpu", "tid", "policy", "priority",
                                              "affinity", "errors")))
    shield = prov.get("shield") or host.get("shield")
    if shield:
        parts.append("<p><b>Shield: requested vs in effect</b></p>")
        parts.append(shield_html(shield))
    doctor = prov.get("doctor")
    if doctor:
        parts.append("<p><b>Doctor findings before the run</b></p>")
        parts.append(doctor_html(doctor))
    loads = prov.get("loads")
    if not loads:
        loads = [{"phase": ph.get("name"), **ld} for ph in host.get("phases") or []
                 if isinstance(ph, dict) for ld in ph.get("loads") or [] if isinstance(ld, dict)]
        loads = [{k: ld.get(k) for k in ("phase", "name", "kind", "argv", "cpus", "status",
                                         "exit_status", "died_early") if k in ld}
                 for ld in loads]
    if loads:
        parts.append("<p><b>Loads</b></p>")
        if isinstance(loads, list):
            parts.append(records_table(loads, ("phase", "kind", "name", "argv", "command",
                                                "cpus")))
        else:
            parts.append(value_html(loads))
    return "".join(parts)


_SEVERITY = ("critical", "warning", "unknown", "info", "ok")


def doctor_findings(doctor: Any) -> list[dict[str, Any]]:
    items = doctor.get("findings") if isinstance(doctor, dict) else doctor
    items = [d for d in items or [] if isinstance(d, dict)]
    rank = {s: i for i, s in enumerate(_SEVERITY)}
    return sorted(items, key=lambda d: rank.get(str(d.get("severity") or d.get("status")), 2))


def doctor_html(doctor: Any) -> str:
    out = []
    summary = doctor.get("summary") if isinstance(doctor, dict) else None
    if isinstance(summary, dict) and isinstance(summary.get("counts"), dict):
        counts = ", ".join(f"{n} {k}" for k in _SEVERITY
                           if (n := summary["counts"].get(k)))
        out.append(f"<p>{esc(counts)} (worst: {esc(summary.get('worst') or NA)})</p>")
    elif summary:
        out.append(f"<p>{value_html(summary)}</p>")
    if isinstance(doctor, dict) and doctor.get("error"):
        out.append(f"<p>doctor failed: {esc(doctor['error'])}</p>")
    items = doctor_findings(doctor)
    ok = [d for d in items if (d.get("severity") or d.get("status")) == "ok"]
    shown = [{k: d.get(k) for k in ("check", "severity", "status", "title", "summary",
                                    "message", "advice") if k in d}
             for d in items if d not in ok]
    if shown:
        out.append(records_table(shown, ("check", "severity", "status", "title")))
    if ok:
        names = ", ".join(str(d.get("title") or d.get("check")) for d in ok)
        out.append(f"<p class='sub'>ok: {esc(names)}</p>")
    return "".join(out)


def _own_on_shield(cpus: Any) -> str:
    """"CPU 1: rtlab runner (...) [pid 812]; ..." from the check's own_tasks."""
    if not isinstance(cpus, dict):
        return ""
    parts = []
    for cpu, c in cpus.items():
        seen: dict[Any, str] = {}
        for t in (c.get("own_tasks") or []) if isinstance(c, dict) else []:
            if isinstance(t, dict):
                seen.setdefault(t.get("pid"), f"{t.get('what')} [pid {t.get('pid')}]")
        if seen:
            parts.append(f"CPU {cpu}: " + ", ".join(seen.values()))
    return "; ".join(parts)


def _phase_check_text(chk: dict[str, Any]) -> str:
    """One line: the shield re-checked at the end of a phase (docs/system.md)."""
    if chk.get("error"):
        return f"not possible: {chk['error']}"
    new, problems = chk.get("new_tasks") or [], chk.get("problems") or []
    if new:
        more = int(chk.get("new_tasks_total") or len(new)) - 5
        head = "NEW tasks that may run on shielded CPUs: " + ", ".join(
            f"{t.get('comm')}[{t.get('tid')}] (CPU {t.get('cpu')})" for t in new[:5]) + (
            f" and {more} more" if more > 0 else "")
    elif problems:
        head = (f"{len(problems)} problem(s), no task new since the start: "
                + "; ".join(map(str, problems[:2])))
    else:
        head = "still in effect"
    parts = [head]
    fired = chk.get("irqs_fired") or {}
    if fired:
        parts.append("IRQs handled there during the phase: " + "; ".join(
            f"CPU {c}: " + ", ".join(f"IRQ {i} ×{n}" for i, n in sorted(
                irqs.items(), key=lambda kv: -int(kv[1]))[:5])
            for c, irqs in fired.items()))
    return "; ".join(parts)


def shield_html(shield: Any) -> str:
    """What was asked for and what the kernel reported afterwards, in words; the full
    record folded below it."""
    if not isinstance(shield, dict):
        return value_html(shield)
    req, eff = shield.get("requested"), shield.get("in_effect")
    if not req and not eff:
        return "<p>no shield: the scenario asks for none (or the run used --no-shield)</p>"
    rows: list[tuple[str, Any]] = []
    if isinstance(req, dict):
        asked = [k for k in ("cpuset", "tasks", "kthreads", "irqs", "default_smp_affinity")
                 if req.get(k)]
        rows += [("measured (shielded) CPUs", cpus_text(req.get("user"))),
                 ("system CPUs", cpus_text(req.get("system"))),
                 ("moves asked for", ", ".join(asked) or "none")]
    if isinstance(eff, dict):
        inner = eff.get("in_effect") if isinstance(eff.get("in_effect"), dict) else {}
        plan = eff.get("plan") if isinstance(eff.get("plan"), dict) else {}
        ok = inner.get("ok")
        rows.append(("in effect", "yes, verified" if ok else "not completely (see below)"
                     if ok is False else NA))
        own = _own_on_shield(inner.get("cpus"))
        if own:
            rows.append(("the run's own processes there (not leaks)", own))
        if plan:
            rows.append(("plan", f"{plan.get('backend') or ''} cpuset "
                         f"{plan.get('shield_cgroup') or ''}: {plan.get('tasks_moved', 0)} "
                         f"tasks, {plan.get('kthreads_moved', 0)} kthreads and "
                         f"{len(plan.get('irqs_planned') or [])} IRQs to move"))
    for chk in shield.get("phase_checks") or []:
        if isinstance(chk, dict):
            rows.append((f"checked again after phase {chk.get('phase', '?')}",
                         _phase_check_text(chk)))
    released = shield.get("released")
    if isinstance(released, dict):
        rows.append(("restored after the run",
                     f"{released.get('restored', 0)} change(s) undone, "
                     f"{released.get('failed', 0)} failed" + (
                         f" ({released['error']})" if released.get("error") else "")))
    out = [kv_table(rows)]
    problems = eff.get("problems") if isinstance(eff, dict) else None
    if problems:
        out.append("<ul class='warn-list'>" + "".join(f"<li>{esc(p)}</li>" for p in problems)
                   + "</ul>")
    refused = eff.get("refused") if isinstance(eff, dict) else None
    if refused:
        out.append("<p class='sub'>refused by the kernel: " + esc("; ".join(
            str(r.get("error") if isinstance(r, dict) else r) for r in refused)) + "</p>")
    out.append("<details><summary>the complete shield record</summary>"
               f"<pre>{esc(json.dumps(shield, indent=1, default=str))}</pre></details>")
    return "".join(out)


