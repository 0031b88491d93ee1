# SPDX-License-Identifier: MIT
"""The latency ledger: what each knob bought, built from a tune's state
(rtlab.tune.state) and shown by `rtlab tune`, `rtlab tune --show ID` and the HTML
report (docs/tune.md, "Reading the ledger").

Per knob: its verdict against the baseline (helps, hurts, trade-off, no effect,
inconclusive; or skipped / not tested / failed, with why) and per statistic the change
with its interval; where it was tested on top of other knobs, that verdict too and the
interaction it shows. Then the recommended configuration, what it costs, and the
confirmed before/after figures.
"""

from __future__ import annotations

from typing import Any

from rtlab.tune import knobs as catalogue
from rtlab.tune.design import FAMILY_ALPHA, StatResult

LEDGER_VERSION = 1


def _experiments(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in state.get("experiments", [])}


def _stats(e: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if e is None else e.get("stats")


def interaction(alone: str | None, on_top: str | None, base: list[str]) -> str | None:
    """What the verdicts alone and on top of `base` say about the knobs together."""
    if alone is None or on_top is None or alone == on_top or not base:
        return None
    others = "+".join(base)
    if alone == "helps" and on_top in ("no effect", "inconclusive"):
        return (f"helps alone, {on_top} on top of {others}: its gain overlaps theirs "
                "(redundant there)")
    if alone in ("no effect", "inconclusive") and on_top == "helps":
        return f"{alone} alone, helps on top of {others}: it needs them"
    if alone == "helps" and on_top == "hurts":
        return f"helps alone, hurts on top of {others}: they conflict"
    return f"{alone} alone, {on_top} on top of {others}"


def build(state: dict[str, Any]) -> dict[str, Any]:
    """The ledger as data (JSON-ready)."""
    exps = _experiments(state)
    rows: list[dict[str, Any]] = []
    final = list(state.get("final") or [])
    for name in state.get("candidates", []):
        k = catalogue.BY_NAME[name]
        scr = exps.get(f"screen:{name}")
        top = exps.get(f"combine:{name}") or exps.get(f"retest:{name}")
        row: dict[str, Any] = {
            "knob": name, "title": k.title, "kind": k.kind, "changes": k.changes,
            "proposed_by": state.get("proposed", {}).get(name, []),
            "verdict": scr["verdict"] if scr and scr["verdict"] else "not measured",
            "stats": _stats(scr), "blocks": len(scr["blocks"]) if scr else 0,
            "stopped": scr.get("stopped") if scr else None,
            "error": scr.get("error") if scr else None,
            "why": scr.get("error") if scr and scr["verdict"] in ("skipped", "failed") else None,
            "on_top": None, "interaction": None, "in_final": name in final,
            "cost": k.cost, "gives_up_cpus": k.gives_up_cpus,
        }
        if top is not None:
            row["on_top"] = {"of": top["a"], "verdict": top["verdict"], "stats": top["stats"],
                             "blocks": len(top["blocks"])}
            row["interaction"] = interaction(row["verdict"], top["verdict"], top["a"])
        rows.append(row)
    for name, why in (state.get("skipped") or {}).items():
        k = catalogue.BY_NAME[name]
        rows.append({"knob": name, "title": k.title, "kind": k.kind, "changes": k.changes,
                     "proposed_by": state.get("proposed", {}).get(name, []),
                     "verdict": "skipped", "why": why, "stats": None, "blocks": 0,
                     "in_final": False, "cost": k.cost, "gives_up_cpus": k.gives_up_cpus})
    for name in state.get("not_tested") or []:
        k = catalogue.BY_NAME[name]
        rows.append({"knob": name, "title": k.title, "kind": k.kind, "changes": k.changes,
                     "proposed_by": state.get("proposed", {}).get(name, []),
                     "verdict": "not tested", "why": "the budget does not reach it",
                     "stats": None, "blocks": 0, "in_final": False, "cost": k.cost,
                     "gives_up_cpus": k.gives_up_cpus})
    conf = exps.get("confirm")
    user = state.get("user_cpus") or []
    boot = catalogue.boot_params(final, user, state.get("system_cpus") or [])
    costs = [f"{catalogue.BY_NAME[n].title}: {catalogue.BY_NAME[n].cost}"
             for n in final if catalogue.BY_NAME[n].cost]
    gives_up = any(catalogue.BY_NAME[n].gives_up_cpus for n in final)
    interactions = [f"{r['knob']}: {r['interaction']}" for r in rows if r.get("interaction")]
    blocks = sum(len(e["blocks"]) for e in state.get("experiments", []))
    seconds = sum(b["seconds"] for e in state.get("experiments", []) for b in e["blocks"])
    return {
        "version": LEDGER_VERSION, "tune": state["id"], "target": state.get("target"),
        "scenario": state.get("scenario"), "statistics": state.get("stats"),
        "slo": state.get("slo"), "family_alpha": FAMILY_ALPHA,
        "stage": state.get("stage"), "knobs": rows, "interactions": interactions,
        "recommended": {
            "knobs": final, "label": catalogue.label(final),
            "kernel_parameters": boot,
            "cpus_given_up": user if gives_up else [],
            "costs": costs,
            "energy": power(conf),
        },
        "confirmation": None if conf is None else {
            "verdict": conf["verdict"], "stats": conf["stats"], "blocks": len(conf["blocks"]),
            "stopped": conf.get("stopped"),
            "runs": {"baseline": [b["run_id"] for b in conf["blocks"] if b["side"] == "A"],
                     "final": [b["run_id"] for b in conf["blocks"] if b["side"] == "B"]}},
        "blocks": blocks, "seconds": round(seconds, 1),
        "runs": [b["run_id"] for e in state.get("experiments", []) for b in e["blocks"]],
        "kept": state.get("kept"),
        "reboots": reboots(state.get("reboot")),
    }


def reboots(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The boot knobs' side: the original command line, each boot with its time, and
    each booted line's parameters checked in effect (None: no reboot interface)."""
    if not spec:
        return None
    boots = spec.get("boots") or []
    return {"original": spec.get("original"), "count": len(boots),
            "seconds": [b.get("seconds") for b in boots],
            "back_on_original": not spec.get("booted"),
            "checks": spec.get("checks") or {}}


def power(conf: dict[str, Any] | None) -> dict[str, Any] | None:
    """Mean power of each side of the confirmation (powercap energy over the blocks' wall
    time), where the target exposed its counters; None otherwise."""
    if conf is None:
        return None
    out: dict[str, Any] = {"source": "powercap (RAPL)"}
    for side, name in (("A", "baseline_w"), ("B", "final_w")):
        blocks = [b for b in conf["blocks"] if b["side"] == side and "energy_j" in b]
        secs = sum(b["seconds"] for b in blocks)
        if not blocks or secs <= 0:
            return None
        out[name] = round(sum(b["energy_j"] for b in blocks) / secs, 2)
    out["change_w"] = round(out["final_w"] - out["baseline_w"], 2)
    return out


def _stat_line(stats: dict[str, Any] | None) -> str:
    if not stats:
        return ""
    return "; ".join(f"{StatResult.from_dict(v).text()} ({v['verdict']})"
                     for v in stats.values())


_EFFECT = {True: "in effect", False: "NOT in effect", None: "cannot tell"}


def _us(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1000:.1f} µs"


def text(ledger: dict[str, Any]) -> list[str]:
    """The ledger as lines for a terminal."""
    out = [f"latency ledger of {ledger['tune']} ({ledger['scenario']} on "
           f"{ledger['target'] or 'this machine'}; statistics: "
           f"{', '.join(ledger['statistics'])}; lower is better)"]
    for r in ledger["knobs"]:
        head = f"  {r['knob']:<22} {r['verdict'].upper():<13}"
        if r["verdict"] in ("skipped", "not tested", "failed"):
            out.append(f"{head} {r.get('why', '')}")
            continue
        line = f"{head} {_stat_line(r['stats'])}"
        if r.get("stopped") == "budget":
            line += " [budget ran out]"
        if r.get("error"):
            line += f" [failed: {r['error']}]"
        out.append(line)
        if r.get("on_top"):
            top = r["on_top"]
            out.append(f"  {'':<22} on top of {'+'.join(top['of'])}: {top['verdict']}: "
                       f"{_stat_line(top['stats'])}")
        if r.get("proposed_by"):
            out.append(f"  {'':<22} proposed by the doctor: {'; '.join(r['proposed_by'])}")
    for i in ledger["interactions"]:
        out.append(f"interaction: {i}")
    rec = ledger["recommended"]
    if rec["knobs"]:
        out.append(f"recommended: {rec['label']}")
        if rec["kernel_parameters"]:
            params = " ".join(k if v is None else f"{k}={v}"
                              for k, v in rec["kernel_parameters"].items())
            out.append(f"  kernel command line: add {params}")
        if rec["cpus_given_up"]:
            out.append(f"  gives up CPUs {','.join(map(str, rec['cpus_given_up']))} "
                       "to the real-time work alone")
        for c in rec["costs"]:
            out.append(f"  cost: {c}")
        e = rec.get("energy")
        out.append(f"  power: {e['baseline_w']:.1f} W -> {e['final_w']:.1f} W "
                   f"({e['change_w']:+.1f} W, {e['source']})" if e else
                   "  power: not measured (the target has no powercap/RAPL counters)")
    else:
        out.append("recommended: the baseline (no knob helped on these statistics)")
    conf = ledger["confirmation"]
    if conf is not None:
        out.append(f"confirmed ({conf['blocks']} interleaved blocks, final against baseline): "
                   f"{conf['verdict']}")
        for v in (conf["stats"] or {}).values():
            out.append(f"  {v['statistic']}: {_us(v['baseline_ns'])} -> {_us(v['value_ns'])}"
                       f"  {StatResult.from_dict(v).text()} ({v['verdict']})")
    rb = ledger.get("reboots")
    if rb:
        secs = [x for x in rb["seconds"] if isinstance(x, int | float)]
        out.append(f"reboots: {rb['count']}" + (f", {min(secs):.0f}-{max(secs):.0f} s each"
                                                if secs else "")
                   + ("; the board is back on its original command line"
                      if rb["back_on_original"] else "; NOT back on its original line"))
        for line, checks in rb["checks"].items():
            words = [str(c.get("evidence")) if c.get("param") == "tasks" else
                     f"{c['param']}: {_EFFECT[c['in_effect']]}" for c in checks]
            out.append(f"  {line}: {'; '.join(words)}")
    out.append(f"{ledger['blocks']} blocks, {ledger['seconds']:.0f} s measured")
    return out
