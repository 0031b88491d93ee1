# SPDX-License-Identifier: MIT
"""The latency ledger of a tune (rtlab.tune.ledger.build) as a section of the HTML
report: what each knob bought per statistic with its interval, on top of which knobs
it was re-tested and the interaction that showed, the recommended configuration and
what it costs, the confirmed before/after figures, and the knobs not measured with
why (docs/tune.md, "Reading the ledger"). Everything from the ledger is escaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rtlab import __version__
from rtlab.report.html_blocks import esc
from rtlab.textfmt import NA

# the report's colours (html.py's CSS) of each verdict: "inconclusive" is never the
# colour of "no effect"
VERDICT_CLASS = {"helps": "ok", "hurts": "bad", "trade-off": "warn", "no effect": "info",
                 "inconclusive": "warn"}
_NOT_MEASURED = ("skipped", "not tested", "not measured")


def _cls(verdict: object) -> str:
    return VERDICT_CLASS.get(str(verdict), "")


def _pct(r: float) -> str:
    return f"{(r - 1) * 100:+.1f} %"


def _us(ns: object) -> str:
    if not isinstance(ns, int | float) or isinstance(ns, bool):
        return NA
    return f"{ns / 1000:.1f} µs"


def stat_cell(st: Mapping[str, Any] | None) -> str:
    """One statistic's change, its interval and confidence, its verdict (a table cell)."""
    if not st:
        return f"<td class='muted'>{NA}</td>"
    verdict = str(st.get("verdict") or "")
    ratio = st.get("ratio")
    if isinstance(ratio, int | float) and not isinstance(ratio, bool):
        text = esc(_pct(float(ratio)))
    else:
        text = NA
    ci = st.get("ratio_ci")
    conf = st.get("confidence")
    sub: list[str] = []
    if isinstance(ci, Sequence) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
        at = f" at {float(conf) * 100:.4g} %" if isinstance(conf, int | float) else ""
        sub.append(f"[{_pct(float(ci[0]))}, {_pct(float(ci[1]))}]{at}")
    if st.get("baseline_ns") is not None or st.get("value_ns") is not None:
        sub.append(f"{_us(st.get('baseline_ns'))} → {_us(st.get('value_ns'))}")
    note = st.get("note")
    if verdict == "inconclusive":  # why it cannot tell, and what would decide it
        if note:
            sub.append(str(note))
        if isinstance(st.get("needs"), int | float):
            sub.append(f"about {float(st['needs']):.3g}× the data would decide")
    title = f" title='{esc(note)}'" if note else ""
    return (f"<td class='{_cls(verdict)}'{title}>{text} <b>{esc(verdict)}</b>"
            + "".join(f"<span class='ci'>{esc(s)}</span>" for s in sub) + "</td>")


def _knob_cell(r: Mapping[str, Any]) -> str:
    out = f"<td class='l'><b>{esc(r.get('knob'))}</b><span class='ci'>{esc(r.get('title'))}"
    if r.get("kind") == "boot":
        out += " (boot)"
    out += "</span>"
    if r.get("proposed_by"):
        out += ("<span class='ci'>proposed by the doctor: "
                f"{esc('; '.join(map(str, r['proposed_by'])))}</span>")
    return out + "</td>"


def _verdict_cell(r: Mapping[str, Any]) -> str:
    v = r.get("verdict")
    extra = []
    if r.get("stopped") == "budget":
        extra.append("the budget ran out")
    elif r.get("stopped") == "looks":
        extra.append("its looks were spent")
    if r.get("error"):
        extra.append(f"failed: {r['error']}")
    if r.get("blocks"):
        extra.append(f"{r['blocks']} blocks")
    if r.get("in_final"):
        extra.append("recommended")
    return (f"<td class='l {_cls(v)}'><b>{esc(v)}</b>"
            + "".join(f"<span class='ci'>{esc(e)}</span>" for e in extra) + "</td>")


def ledger_table(ledger: Mapping[str, Any]) -> str:
    stats = [str(s) for s in ledger.get("statistics") or []]
    heads = ["knob", "verdict", *stats, "on top of", "interaction"]
    head = "".join(f"<th class='l'>{esc(h)}</th>" if i < 2 or i >= len(heads) - 2 else
                   f"<th>{esc(h)}</th>" for i, h in enumerate(heads))
    rows = []
    for r in ledger.get("knobs") or []:
        if r.get("verdict") in _NOT_MEASURED:
            continue
        cells = [_knob_cell(r), _verdict_cell(r)]
        cells += [stat_cell((r.get("stats") or {}).get(s)) for s in stats]
        top = r.get("on_top")
        if top:
            inner = "".join(f"<span class='ci'>{esc(s)}: {esc(_brief(v))}</span>"
                            for s, v in (top.get("stats") or {}).items())
            cells.append(f"<td class='l {_cls(top.get('verdict'))}'>"
                         f"{esc('+'.join(map(str, top.get('of') or [])))}: "
                         f"<b>{esc(top.get('verdict'))}</b>{inner}</td>")
        else:
            cells.append("<td class='l muted'>-</td>")
        cells.append(f"<td class='l'>{esc(r.get('interaction') or '-')}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    if not rows:
        return "<p class='sub'>No knob was measured.</p>"
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _brief(st: Mapping[str, Any]) -> str:
    ratio = st.get("ratio")
    ch = _pct(float(ratio)) if isinstance(ratio, int | float) else NA
    return f"{ch} ({st.get('verdict')})"


def recommended_block(ledger: Mapping[str, Any]) -> str:
    rec = ledger.get("recommended") or {}
    knobs = [str(k) for k in rec.get("knobs") or []]
    if not knobs:
        return ("<div class='verdict info'>Recommended: the baseline (no knob helped on "
                "these statistics).</div>")
    items = []
    params = rec.get("kernel_parameters") or {}
    if params:
        words = " ".join(str(k) if v is None else f"{k}={v}" for k, v in params.items())
        items.append(f"<li>kernel command line: add <code>{esc(words)}</code></li>")
    if rec.get("cpus_given_up"):
        cpus = ",".join(map(str, rec["cpus_given_up"]))
        items.append(f"<li>gives up CPUs {esc(cpus)} to the real-time work alone</li>")
    items += [f"<li>cost: {esc(c)}</li>" for c in rec.get("costs") or []]
    if rec.get("energy") is not None:
        items.append(f"<li>energy: {esc(rec['energy'])}</li>")
    conf = ledger.get("confirmation") or {}
    cls = _cls(conf.get("verdict")) or "info"
    return (f"<div class='verdict {cls}'>Recommended: {esc(rec.get('label') or '+'.join(knobs))}"
            + (f" · confirmed: {esc(conf['verdict'])}" if conf.get("verdict") else
               " · not confirmed")
            + "</div>" + (f"<ul>{''.join(items)}</ul>" if items else ""))


def confirmation_block(ledger: Mapping[str, Any]) -> str:
    conf = ledger.get("confirmation")
    if not conf:
        return ("<p class='sub'>No confirmation: no knob was recommended, or the tune "
                "stopped before it.</p>")
    rows = []
    for name, st in (conf.get("stats") or {}).items():
        rows.append(f"<tr><td class='l'>{esc(name)}</td><td>{esc(_us(st.get('baseline_ns')))}"
                    f"</td><td>{esc(_us(st.get('value_ns')))}</td>{stat_cell(st)}</tr>")
    runs = conf.get("runs") or {}
    stopped = " (stopped: the budget ran out)" if conf.get("stopped") == "budget" else ""
    return (f"<p>{esc(conf.get('blocks'))} interleaved blocks, the final configuration "
            f"against the baseline{esc(stopped)}: <b class='{_cls(conf.get('verdict'))}'>"
            f"{esc(conf.get('verdict'))}</b></p>"
            "<table><tr><th class='l'>statistic</th><th>baseline</th><th>final</th>"
            f"<th>change</th></tr>{''.join(rows)}</table>"
            f"<p class='sub'>runs: baseline {esc(', '.join(map(str, runs.get('baseline') or [])))}"
            f"; final {esc(', '.join(map(str, runs.get('final') or [])))}</p>")


def not_measured_block(ledger: Mapping[str, Any]) -> str:
    items = [f"<li><b>{esc(r.get('knob'))}</b> ({esc(r.get('title'))}): "
             f"{esc(r.get('verdict'))}: {esc(r.get('why') or 'no reason recorded')}</li>"
             for r in ledger.get("knobs") or [] if r.get("verdict") in _NOT_MEASURED]
    if not items:
        return ""
    return f"<h3>Not measured</h3><ul class='warn-list'>{''.join(items)}</ul>"


def html_section(ledger: Mapping[str, Any]) -> str:
    """The ledger as one section of the HTML report."""
    stats = ", ".join(map(str, ledger.get("statistics") or []))
    alpha = ledger.get("family_alpha")
    head = (f"tune {ledger.get('tune')} · scenario {ledger.get('scenario')} · target "
            f"{ledger.get('target') or 'this machine'} · statistics {stats} (lower is better)"
            f" · {ledger.get('blocks', 0)} blocks, {float(ledger.get('seconds') or 0):.0f} s "
            "measured")
    out = ["<section class='tune-ledger'><h2>Latency ledger</h2>",
           f"<p class='sub'>{esc(head)}</p>", recommended_block(ledger),
           "<h3>What each knob bought</h3>",
           "<p class='sub'>Each change is the ratio of the knob's configuration to the one "
           "it was tested against (the baseline; for “on top of”, the knobs named), with its "
           "interval: <b>helps</b> / <b>hurts</b> (significant), <b>no effect</b> (the "
           "interval excludes a change that matters), <b>inconclusive</b> (the data cannot "
           "tell: the change it could not judge is shown), <b>trade-off</b> (helps one "
           "statistic, hurts another)"
           + (f"; a knob without effect is called “helps” in at most {float(alpha) * 100:.3g} % "
              "of tunes (family-wise)" if isinstance(alpha, int | float) else "")
           + ".</p>",
           ledger_table(ledger)]
    inter = ledger.get("interactions") or []
    if inter:
        out.append("<h3>Interactions</h3><ul>" + "".join(f"<li>{esc(i)}</li>" for i in inter)
                   + "</ul>")
    out += ["<h3>Confirmation</h3>", confirmation_block(ledger), not_measured_block(ledger),
            "</section>"]
    return "".join(out)


def render_tune_html(ledger: Mapping[str, Any]) -> str:
    """A whole page (the report's frame and style) of the ledger alone."""
    from rtlab.report.html import _CSS as CSS

    title = f"rtlab tune {ledger.get('tune')}: latency ledger"
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{esc(title)}</h1><p class='sub'>generated by rtlab {esc(__version__)} on "
            f"{now}</p>{html_section(ledger)}</body></html>\n")
