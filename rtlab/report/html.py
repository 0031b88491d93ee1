# SPDX-License-Identifier: MIT
"""The HTML report: one self-contained file (inline CSS and SVG, no script, no network).

`write_run_report(results, path)` is what `rtlab run` and `rtlab report` call;
`render_html(results, ...)` returns the text. See docs/report.md for what each
section shows and how to read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab import __version__
from rtlab.analysis.compare import compare_configs
from rtlab.analysis.configs import build_configs, mixed_quantities
from rtlab.analysis.evt import BOOT_RESAMPLES, BOOT_SIZE, fit_window_maxima, required_run_ns
from rtlab.analysis.loadmix import mixed_load_notes
from rtlab.analysis.slo import evaluate_slo
from rtlab.analysis.stats import PercentileInterval
from rtlab.analysis.window_maxima import merged_window_maxima
from rtlab.errors import RtlabError
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.html_blocks import esc, figure_html
from rtlab.report.html_compare import comparison_section, side_by_side_section
from rtlab.report.html_facts import doctor_findings, provenance_section
from rtlab.report.kernel_split import html_block as kernel_split_html
from rtlab.report.spikes import spike_row, summary_line
from rtlab.report.terminal import channel_label, interval_us, is_wide, row_intervals, verdict
from rtlab.results.model import RunResult
from rtlab.results.summary import DEFAULT_PERCENTILES, ChannelSummary, percentile_label
from rtlab.textfmt import NA, duration, human, seconds, us

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.analysis.slo import Slo, SloReport
    from rtlab.results.model import Channel, Phase, RunResult

HOUR_NS = 3_600 * 1_000_000_000
DAY_NS = 24 * HOUR_NS

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
 margin:0 auto;max-width:1180px;padding:16px 24px 48px;color:#1d2329;background:#fff;
 line-height:1.45}
h1{font-size:1.55em;margin:.2em 0 .1em}h2{font-size:1.25em;margin-top:1.8em;
 border-bottom:2px solid #e3e7ea;padding-bottom:.2em}h3{font-size:1.05em;margin-top:1.4em}
.sub{color:#5b6670;font-size:.9em}
.verdict{border-radius:6px;padding:12px 16px;margin:14px 0;font-size:1.08em;font-weight:600}
.ok{background:#e7f6ea;border-left:6px solid #2e9d48}
.warn{background:#fff5dc;border-left:6px solid #d99a00}
.bad{background:#fde8e8;border-left:6px solid #c62828}
.info{background:#eef3f8;border-left:6px solid #5b7fa6}
table{border-collapse:collapse;margin:8px 0 14px;font-size:.88em}
th,td{border:1px solid #d9dee2;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f2f4f6}td.l,th.l{text-align:left}tr.all td{font-weight:700;background:#f8f9fa}
td.pass{color:#2e7d32;font-weight:600}td.fail{color:#c62828;font-weight:700}
td.undecided{color:#8a5a00;font-weight:700}
.ci{display:block;font-size:.78em;font-weight:400;color:#6b757d;white-space:nowrap}
.fig svg{max-width:100%;height:auto}.fig{margin:6px 0 18px}
details{margin:10px 0;background:#f8f9fa;border-radius:6px;padding:8px 14px}
summary{cursor:pointer;font-weight:600}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.86em}
pre{white-space:pre-wrap;word-break:break-all;background:#f5f7f8;padding:6px 8px;margin:4px 0}
ul.warn-list li{color:#8a5a00}.muted{color:#6b757d}
td.kv{text-align:left;max-width:820px;overflow-wrap:break-word}
td.struck{text-decoration:line-through;color:#8a9299}
.explain{font-weight:400;font-size:.86em;margin-top:6px}.explain ul{margin:2px 0 0}
"""

_HOWTO = """
<p><b>Latency</b> here is how late a real-time thread ran after the moment it should have
run (for the timer probe: the wake-up latency of a periodic thread). Lower is better; what
matters for real-time work is the <b>worst case</b>, not the average.</p>
<ul>
<li><b>Verdict</b>: the worst value seen, where and when, and whether the run is valid
(real-time scheduling and locked memory really in effect, nothing lost).</li>
<li><b>Table</b>: min, average, mode (most frequent value), percentiles and max per CPU in µs.
p99.99 = 99.99 % of the samples were at or below this value. A percentile shows “n/a” when
the run has too few samples to support it (you need at least 10 000 samples for p99.99).</li>
<li><b>Histograms</b> (one panel per CPU): how often each latency occurred. The y-axis is
logarithmic so that single rare samples (count 1) stay visible next to millions of normal
ones. The dashed line is the mode, the red line the maximum. A tight peak with nothing far
to the right is what you want; isolated bars far to the right are spikes to explain.</li>
<li><b>Complementary CDF</b>: for each latency x, the fraction of samples that were later
than x (log-log). Read it like this: where a line crosses the “p99.99” guide, 1 sample in
10 000 was later. A line that falls steeply is a short tail; a flat shelf is a separate
population of slow events (interrupts, host stalls).</li>
<li><b>Maxima over time</b>: the maximum of every window (e.g. each second) and the running
maximum. If the red running maximum still steps up near the end, the run was too short to
have seen the worst case.</li>
<li><b>Comparison</b> (several runs): each statistic's change against the first
configuration is <i>worse</i> or <i>better</i> (significant), <i>no change</i> (the whole 99 %
interval within ±10 %) or <i>cannot tell</i> (no interval, e.g. single imported runs, or one
wider than that: the change is shown with what would decide it). “Cannot tell” is not “no
change”.</li>
<li><b>Worst-case statistics</b>: an extreme-value model fitted to the window maxima
estimates how likely a budget is exceeded within a day, and how long a run must be to support
a claimed maximum. Read its assumptions and warnings before quoting a number.</li>
</ul>
"""


def _class_for(result: RunResult, slo: SloReport | None) -> str:
    """Red: failed, threshold hit or SLO violated; amber: the measurement is incomplete or
    not valid (partial, not real-time, missed periods) or the SLO undecided (the run too
    short to decide a percentile clause); green: SLO met; else neutral (a
    run without an SLO is a measurement, not a judgement)."""
    if slo is not None and not slo.passed and slo.verdict == "undecided" and \
            result.status not in ("threshold", "failed", "invalid"):
        return "warn"
    if (slo is not None and not slo.passed) or result.status in ("threshold", "failed",
                                                                   "invalid"):
        return "bad"
    if (result.partial or result.rt_valid is False or result.status != "completed"
            or any(ch.missed for _, ch in result.channels())):
        return "warn"
    return "ok" if slo is not None else "info"


def _pct_td(s: ChannelSummary, q: float, ivs: dict[float, PercentileInterval]) -> str:
    """A percentile cell; a tail percentile carries its confidence interval as a tooltip,
    and under the value when the interval is wide."""
    iv = ivs.get(q)
    if iv is None:
        return f"<td>{us(s.p(q))}</td>"
    tip = (f"{iv.level:.0%} confidence interval {interval_us(iv)} µs (distribution-free"
           + (f"; widened: {iv.widened})" if iv.widened else ")"))
    under = f"<span class='ci'>{esc(interval_us(iv))}</span>" if is_wide(iv) else ""
    return f"<td title='{esc(tip)}'>{us(s.p(q))}{under}</td>"


def _summary_row(s: ChannelSummary, label: str, css: str = "",
                 ivs: dict[float, PercentileInterval] | None = None) -> str:
    ivs = ivs or {}
    cells = [f"<td class='l'>{esc(label)}</td>", f"<td>{s.samples:,}</td>",
             f"<td>{us(s.min_ns)}</td>", f"<td>{us(s.mean_ns)}</td>", f"<td>{us(s.mode_ns)}</td>",
             *(_pct_td(s, q, ivs) for q in DEFAULT_PERCENTILES),
             f"<td>{us(s.max_ns)}</td>", f"<td>{seconds(s.max_at_ns)}</td>",
             f"<td>{s.missed:,}</td>"]
    cls = f" class='{css}'" if css else ""
    return f"<tr{cls}>{''.join(cells)}</tr>"


def _summary_table(phase: Phase, probe: str) -> str:
    heads = ["channel", "samples", "min", "avg", "mode",
             *(percentile_label(q) for q in DEFAULT_PERCENTILES), "max", "max at", "missed"]
    out = ["<table><tr>", *(f"<th{' class=l' if i == 0 else ''}>{esc(h)}</th>"
                            for i, h in enumerate(heads)), "</tr>"]
    wide = False
    for ch in phase.channels:
        ivs = row_intervals(ch)
        wide = wide or any(is_wide(iv) for iv in ivs.values())
        out.append(_summary_row(ch.summary(), channel_label(ch), ivs=ivs))
    if (merged := phase.all_row(probe_shape(probe))) is not None:
        ivs = row_intervals(merged, phase.headline(probe_shape(probe)))
        wide = wide or any(is_wide(iv) for iv in ivs.values())
        out.append(_summary_row(merged.summary(), "all", "all", ivs))
    out.append("</table><p class='sub'>latency in µs; n/a = too few samples to support the "
               "percentile; “max at” = run time of the maximum; hover a tail percentile for "
               "its 95 % confidence interval (distribution-free, from the order statistics)"
               + ("; shown under the value when wide (unbounded, or the ends more than 10 % "
                  "apart): the run is short for that percentile, and the true value may lie "
                  "anywhere in it" if wide else "") + "</p>")
    return "".join(out)


def _spike_table(spikes: Sequence[Any], limit: int = 50) -> str:

    dicts = [s for s in spikes if isinstance(s, dict)]
    worst = sorted(dicts, key=lambda s: -int(s.get("latency_ns") or 0))[:limit]
    worst.sort(key=lambda s: int(s.get("at_ns") or 0))
    rows = "".join("<tr>" + "".join(f"<td{' class=kv' if i == 4 else ''}>{esc(c)}</td>"
                                    for i, c in enumerate(spike_row(s))) + "</tr>"
                   for s in worst)
    more = (f"<p class='sub'>the {limit} worst of {len(dicts)} shown</p>"
            if len(dicts) > limit else "")
    return ("<table><tr><th>at (s)</th><th>CPU</th><th>latency</th><th class='l'>class</th>"
            f"<th class='l'>attribution</th></tr>{rows}</table>{more}")


def _phase_spikes(phase: Phase) -> str:
    summary = getattr(phase, "spike_summary", None)
    spikes = getattr(phase, "spikes", None)
    if summary is None and not spikes:
        return ""

    out = [f"<h4>Spike attributions (phase {esc(phase.name)})</h4>"]
    if summary is not None:
        out.append(f"<p>{esc(summary_line(summary, getattr(phase, 'trace', None)))}</p>")
    if spikes:
        out.append("<p class='sub'>what the kernel trace shows was running or pending on the "
                   "CPU while the latency built up</p>")
        out.append(_spike_table(spikes))
    out.append(kernel_split_html((getattr(phase, "trace", None) or {}).get("kernel_split")))
    return "".join(out)


def _spikes(result: RunResult) -> str:
    """Spikes recorded at the result level (`result.spikes` or provenance `spikes`)."""
    spikes = getattr(result, "spikes", None) or result.provenance.get("spikes")
    if not spikes:
        return ""
    return "<h3>Spike attributions</h3>" + _spike_table(spikes)


def _evt_section(channels: Sequence[Channel], budgets: Sequence[int], title: str) -> str:
    from rtlab.report.plots import evt_figure

    maxima, window_ns = merged_window_maxima(channels)
    est = fit_window_maxima(maxima, window_ns)
    out = ["<h3>Worst-case statistics (extreme-value estimate)</h3>"]
    level = f"{est.level * 100:.0f} %"
    out.append(
        "<p class='sub'>Assumptions: the maxima of the windows (worst channel per window) come "
        "from one stationary mechanism; the generalised extreme-value (GEV) and Gumbel models "
        "are fitted by probability-weighted moments and the more pessimistic of the two is "
        "quoted, unless the data show a bounded tail with evidence (then the GEV as fitted). "
        "Extrapolating far beyond the run length multiplies any misfit; a mechanism that did "
        "not occur during the run is invisible to any fit (only the model-free column guards "
        f"against it). Ranges in brackets are {level} intervals from {BOOT_RESAMPLES} "
        "bootstrap resamples of blocks of "
        f"{est.block_windows or 1} consecutive windows (neighbouring windows may be "
        "correlated)"
        + (f", {BOOT_SIZE:,} windows each, spread rescaled to the run"
           if est.n_windows > BOOT_SIZE else "")
        + ". Their upper ends are the higher of the quoted model's and the tail model's (a "
        "generalised Pareto distribution fitted to the largest "
        + (f"{est.tail.m:,} " if est.tail else "")
        + "window maxima alone: it follows a tail that gets heavier beyond the bulk of the "
        "maxima, with a larger spread), so that they hold if either model describes the "
        "tail. Their coverage, measured by simulation from 15 minutes of windows on, is "
        "91–99 % for Gumbel-like, heavy, bounded and lognormal-like tails and for bursts of "
        "dependent windows; a tail that keeps getting heavier beyond the run is "
        "under-estimated by any fit (docs/report.md, “Worst-case statistics”).</p>")
    if est.warnings:
        out.append("<ul class='warn-list'>" + "".join(f"<li>⚠ {esc(w)}</li>"
                                                      for w in est.warnings) + "</ul>")
    if not est.usable:
        return "".join(out)
    run_ns = est.measured_ns
    need = required_run_ns(DAY_NS, 0.95)
    levels = sorted({*budgets, est.observed_max_ns, int(est.observed_max_ns * 1.5),
                     est.observed_max_ns * 2})
    model = "" if est.fit_ok else " class='struck'"
    rows = []
    for lv in levels:
        p1, p24 = est.p_exceed(lv, HOUR_NS), est.p_exceed(lv, DAY_NS)
        iv = est.interval("p", lv, DAY_NS)
        rp = est.return_period_ns(lv)
        seen = int((maxima > lv).sum())
        tag = " (observed max)" if lv == est.observed_max_ns else (
            " (SLO budget)" if lv in budgets else "")
        if seen:
            support = f"no: exceeded in {seen:,} window(s)"
        elif run_ns >= need:
            support = "✓ yes"
        else:
            support = f"not yet: needs {_dur(need)} without exceeding it"
        rows.append(
            f"<tr><td class='l'>{esc(human(lv))}{tag}</td><td{model}>{_pct(p1)}</td>"
            f"<td{model}>{_pct(p24)}"
            + (f" <span class='muted'>[{_pct(iv[0])} – {_pct(iv[1])}]</span>" if iv else "")
            + f"</td><td{model}>{_dur(rp)}</td><td>{seen:,}</td><td class='l'>{support}</td></tr>")
    fit_state = ("acceptable" if est.fit_ok
                 else "POOR: do not trust the model columns") + f"; model: {est.model}"
    typical = esc(human(est.typical_worst_ns(DAY_NS)))
    wi = est.interval("worst", 0, DAY_NS)
    typical += f" [{esc(human(wi[0]))} – {esc(human(wi[1]))}]" if wi else ""
    tail_worst = est.tail_worst_ns(DAY_NS)
    tail_note = ("" if tail_worst is None or est.tail is None else
                 f"; from the largest {est.tail.m:,} maxima alone (tail model): "
                 f"{esc(human(tail_worst))}")
    out.append(
        f"<p>{est.n_windows:,} windows of {est.window_ns / 1e9:g} s ({_dur(run_ns)}); fit "
        f"{fit_state} (KS distance {est.ks_distance:.3f}, limit {est.ks_critical:.3f}"
        + "".join(f"; {esc(c.name)}: {c.z:.1f} s.e." for c in est.checks if c.z is not None)
        + "); "
        + (f"typical (median) worst case within 24 h: <b>{typical}</b>{tail_note}</p>"
           if est.fit_ok else
           f"<s>typical worst case within 24 h: {typical}</s> (model rejected){tail_note}</p>"))
    out.append(
        "<table><tr><th class='l'>budget</th><th>P(exceeded within 1 h)</th>"
        f"<th>P(exceeded within 24 h) [{level} interval]</th><th>mean time between windows "
        "above it</th><th>windows above it in this run</th><th class='l'>supported for 24 h "
        "without a model (95 %)</th></tr>" + "".join(rows) + "</table>")
    out.append(
        f"<p class='sub'>The last column needs no model: a run of {_dur(need)} (−ln 0.05 × "
        "24 h) with no window above a budget shows, at 95 % confidence, that the budget is "
        f"exceeded less than once per 24 h (zero-failure Poisson bound). This run: "
        f"{_dur(run_ns)}.</p>")
    out.append(figure_html(evt_figure(est, maxima, f"{title}: window maxima vs fitted models")))
    return "".join(out)


def _pct(p: float | None) -> str:
    if p is None:
        return NA
    if p >= 0.9995:
        return "≈ 100 %"
    if p < 1e-9:
        return "< 1e-9"
    return f"{p * 100:.3g} %" if p >= 1e-4 else f"{p:.1e}"


def _dur(ns: float | None) -> str:
    if ns == float("inf"):
        return "never (beyond the model's bound)"
    return duration(ns)


def _phase_section(result: RunResult, phase: Phase, budgets: Sequence[int],
                   several: bool) -> str:
    from rtlab.report.plots import ccdf_figure, censored_of, hist_figure, timeline_figure

    out = []
    label = f"phase {phase.name}" + (f" ({duration(phase.elapsed_ns)})"
                                     if phase.elapsed_ns is not None else "")
    if several:
        out.append(f"<h3>{esc(label)}</h3>")
    out.append(_summary_table(phase, result.probe))
    chans = [c for c in phase.channels]
    if not any(c.samples for c in chans):
        out.append("<p>No samples in this phase.</p>")
        return "".join(out)
    # one channel per CPU (timer, noise, ...), or channels of other kinds (udp: rtt, stack...)
    per = "CPU" if all(c.name == f"cpu{c.cpu}" for c in chans) else "channel"
    out.append(f"<h4>Histograms per {per} ({esc(label)})</h4>")
    out.append(figure_html(hist_figure(chans)))
    series = [(channel_label(c), c) for c in chans]
    cuts = [censored_of(result, [c.name]) for c in chans]
    if (merged := phase.all_row(probe_shape(result.probe))) is not None:
        series.append(("all", merged))
        heads = phase.headline(probe_shape(result.probe))
        cuts.append(censored_of(result, [c.name for c in heads]))
    out.append(f"<h4>Complementary CDF ({esc(label)})</h4>")
    out.append(figure_html(ccdf_figure(series, censored=cuts)))
    out.append(f"<h4>Maxima over time ({esc(label)})</h4>")
    out.append(figure_html(timeline_figure(chans, end_ns=phase.elapsed_ns)))
    out.append(_evt_section(phase.headline(probe_shape(result.probe)), budgets,
                            f"run {result.run_id} {phase.name}"))
    out.append(_phase_spikes(phase))
    return "".join(out)


def _explain(result: RunResult) -> str:
    """The doctor's most important findings under the verdict: what may explain it."""
    doctor = result.provenance.get("doctor")
    if not doctor:
        return ""
    top = doctor.get("top") if isinstance(doctor, dict) else None
    items = [d for d in (top or doctor_findings(doctor)) if isinstance(d, dict)
             and (d.get("severity") or d.get("status")) in ("critical", "warning", "warn")][:3]
    if not items:
        return ""
    lines = "".join(
        f"<li>[{esc(d.get('severity') or d.get('status'))}] {esc(d.get('title') or d.get('check'))}"
        f": {esc(d.get('summary') or d.get('message') or '')}"
        + (f" → <i>{esc(d['advice'])}</i>" if d.get("advice") else "") + "</li>"
        for d in items)
    return ("<div class='explain'>what may explain these numbers (rtlab doctor, before the "
            f"run):<ul>{lines}</ul></div>")


_SLO_CELL = {"met": ("pass", "pass"), "undecided": ("undecided", "UNDECIDED"),
             "violated": ("fail", "FAIL"), "invalid": ("fail", "FAIL")}


def _slo_section(report: SloReport) -> str:
    cls = {"met": "ok", "undecided": "warn"}.get(report.verdict, "bad")
    out = [f"<h2>Service-level objective</h2><div class='verdict {cls}'>"
           f"{esc(report.summary())}</div>"]
    if report.undecided:
        out.append("<p class='sub'>UNDECIDED: the 95 % confidence interval of the percentile "
                   "contains the bound (or is unbounded), so this run cannot show the clause "
                   "met or violated; it does not pass the gate (exit code 3). Measure longer: "
                   "the check says roughly how many samples would decide it.</p>")
    order = {"invalid": 0, "violated": 0, "undecided": 1, "met": 2}
    rows = sorted(report.outcomes, key=lambda o: order.get(o.status, 0))
    body = "".join(
        f"<tr><td class='{_SLO_CELL[o.status][0]}'>{_SLO_CELL[o.status][1]}"
        f"</td><td class='l'>{esc(o.run_id)}</td><td class='l'>{esc(o.phase)}</td>"
        f"<td class='l'>{esc(o.channel)}</td><td class='l'>{esc(o.reason)}</td></tr>"
        for o in rows[:500])
    out.append("<table><tr><th>result</th><th class='l'>run</th><th class='l'>phase</th>"
               f"<th class='l'>channel</th><th class='l'>check</th></tr>{body}</table>")
    return "".join(out)


def _budgets(slo: Slo | None) -> list[int]:
    if slo is None:
        return []
    return [c.bound for c in slo.clauses if c.metric == "max" and c.op in ("<", "<=")]


def render_html(results: Sequence[RunResult], *, slo: Slo | None = None,
                slo_report: SloReport | None = None, title: str | None = None,
                compare_by: str = "run") -> str:
    """The whole report as HTML text."""

    if not results:
        raise RtlabError("no runs to report")
    if slo is not None and slo_report is None:
        slo_report = evaluate_slo(slo, results, shape_of=probe_shape)
    ids = ", ".join(r.run_id for r in results)
    title = title or f"rtlab report: run{'s' if len(results) > 1 else ''} {ids}"
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
           "<meta name='viewport' content='width=device-width, initial-scale=1'>",
           f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{esc(title)}</h1><p class='sub'>generated by rtlab {esc(__version__)} on {now}"
           "</p>"]
    for r in results:
        host = r.system.get("hostname") or (r.provenance.get("host") or {}).get("hostname")
        cpu = r.system.get("cpu_model")
        head = (f"run {r.run_id} · {r.probe} · host {host or NA}{f' ({cpu})' if cpu else ''}"
                f" · kernel {r.system.get('release') or NA} ({r.system.get('preempt') or NA})")
        out.append(f"<div class='verdict {_class_for(r, slo_report)}'><div class='sub'>"
                   f"{esc(head)}</div>{esc(verdict(r))}{_explain(r)}</div>")
    if slo_report is not None:
        out.append(_slo_section(slo_report))
    out.append(f"<details><summary>How to read this report</summary>{_HOWTO}</details>")
    unlike = mixed_quantities(results, probe_shape) if len(results) > 1 else None
    if unlike is not None:  # each run is shown, none is compared with another
        out.append(f"<ul class='warn-list'><li>runs not compared: {esc(unlike)}</li></ul>")
    elif len(results) > 1:

        configs = build_configs(results, compare_by, shape_of=probe_shape)
        mixed = mixed_load_notes(results)
        if mixed:
            out.append("<ul class='warn-list'>" + "".join(f"<li>{esc(n)}</li>" for n in mixed)
                       + "</ul>")
        out.append(comparison_section(configs, compare_configs(configs)))
        if compare_by == "host" and len(configs) > 1:
            out.append(side_by_side_section(configs))
    budgets = _budgets(slo)
    for r in results:
        out.append(f"<h2>Run {esc(r.run_id)}</h2>")
        if r.notes:
            out.append("<ul class='warn-list'>" + "".join(f"<li>{esc(n)}</li>" for n in r.notes)
                       + "</ul>")
        several = len(r.phases) > 1
        for phase in r.phases:
            out.append(_phase_section(r, phase, budgets, several))
        out.append(_spikes(r))
        out.append(provenance_section(r))
    out.append("</body></html>\n")
    return "".join(out)


def write_run_report(results: RunResult | Sequence[RunResult], path: str | Path, *,
                     slo: Slo | None = None, slo_report: SloReport | None = None,
                     compare_by: str = "run", option: str = "--output") -> Path | None:
    """Write the self-contained HTML report of one or several runs; returns the path
    (None: standard output, `-`).

    This is what `rtlab run` calls after storing a run (one result) and what
    `rtlab report` calls. The file is written the one safe way (rtlab.fileio: never over
    a device, never half). Raises RtlabError (one line) when the file cannot be written.
    """
    from rtlab.fileio import write_output

    items = [results] if isinstance(results, RunResult) else list(results)
    text = render_html(items, slo=slo, slo_report=slo_report, compare_by=compare_by)
    return write_output(path, text, option)


def own_report_path(store_display: str, run_id: str) -> Path:
    """`default_report_path` with its `reports/` directory made (rtlab's own, beside the
    store)."""
    path = default_report_path(store_display, run_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RtlabError(f"cannot create the report directory {path.parent}: "
                         f"{exc.strerror or exc}") from exc
    return path


def default_report_path(store_display: str, run_id: str) -> Path:
    """Where `rtlab run` puts the report by default: `reports/<id>.html` beside an SQLite
    store (for a server URL: the current directory)."""
    if "://" in store_display:
        return Path(f"rtlab-report-{run_id}.html")
    return Path(store_display).expanduser().resolve().parent / "reports" / f"{run_id}.html"
