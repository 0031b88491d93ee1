# SPDX-License-Identifier: MIT
"""The comparison sections of the HTML report: the table of configurations, their
histograms and tails overlaid, the changes against the baseline and the boards side by
side per CPU."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rtlab.analysis.compare import EQUIVALENCE_MARGIN
from rtlab.analysis.configs import TABLE_LEVELS
from rtlab.report.html_blocks import esc, figure_html
from rtlab.report.side_by_side import per_cpu_tails
from rtlab.results.summary import percentile_label
from rtlab.textfmt import bounded_us, duration, us

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.analysis.compare import PairComparison
    from rtlab.analysis.configs import Config


# the report's colours (html.py's CSS) of each verdict: "cannot tell" is never shown as
# the green of "no change"
_CLASS = {"worse": "bad", "better": "ok", "no change": "ok", "cannot tell": "warn",
          "n/a": "info"}


def comparison_table(configs: Sequence[Config]) -> str:

    heads = ["configuration", "runs", "samples", "duration", "min", "avg", "mode",
             *(percentile_label(q) for q in TABLE_LEVELS), "max", "median window max"]
    rows = []
    for c in configs:
        rows.append(
            f"<tr><td class='l'>{esc(c.display)}</td><td>{len(c.runs)}</td>"
            f"<td>{c.channel.samples:,}</td><td>{esc(duration(c.duration_ns))}</td>"
            f"<td>{us(c.value('min'))}</td><td>{us(c.value('avg'))}</td>"
            f"<td>{us(c.value('mode'))}</td>"
            + "".join(f"<td>{esc(bounded_us(c.value(q), c.lower_bound(q)))}</td>"
                      for q in TABLE_LEVELS)
            + f"<td>{us(c.value('max'))}</td><td>{us(c.value('window'))}</td></tr>")
    head = "".join(f"<th{' class=l' if i == 0 else ''}>{esc(h)}</th>" for i, h in enumerate(heads))
    bound = ("; ≥ = beyond the peer tool's histogram range, only a lower bound is known"
             if any(c.censored for c in configs) else "")
    return (f"<table><tr>{head}</tr>{''.join(rows)}</table><p class='sub'>latency in µs, all "
            "channels of a configuration merged; the max of a longer run is higher just "
            "because it saw more samples: compare the median window maxima (same window "
            f"length){esc(bound)}</p>")


def side_by_side_section(configs: Sequence[Config]) -> str:
    """Boards side by side per CPU (`--by host`): p99, p99.99 and max of each."""

    heads = "".join(f"<th colspan='3'>{esc(c.display)}</th>" for c in configs)
    sub = "".join("<th>p99</th><th>p99.99</th><th>max</th>" for _ in configs)
    rows = []
    for name, tails in per_cpu_tails(configs):
        cells = ["<td>-</td><td>-</td><td>-</td>" if t is None else
                 "".join(f"<td>{us(v)}</td>" for v in t) for t in tails]
        rows.append(f"<tr><td class='l'>{esc(name)}</td>{''.join(cells)}</tr>")
    return ("<h3>Per CPU, side by side</h3><table><tr><th class='l' rowspan='2'>channel</th>"
            f"{heads}</tr><tr>{sub}</tr>{''.join(rows)}</table>"
            "<p class='sub'>latency in µs; each board's runs merged per channel</p>")


def comparison_section(configs: Sequence[Config], pairs: Sequence[PairComparison]) -> str:
    from rtlab.report.plots import ccdf_figure, hist_overlay_figure

    out = ["<h2>Comparison</h2>", comparison_table(configs)]
    out.append(figure_html(hist_overlay_figure([c.channel for c in configs],
                                        "histograms, configurations overlaid",
                                        labels=[c.display for c in configs])))
    out.append(figure_html(ccdf_figure([(c.display, c.channel) for c in configs],
                                "P(latency > x), configurations overlaid",
                                censored=[(c.censored, c.censored_above_ns)
                                          if c.censored and c.censored_above_ns is not None
                                          else None for c in configs])))
    if pairs:
        out.append("<h3>Changes against the baseline (first configuration)</h3>")
        out.append(
            "<p class='sub'>Each change is a ratio with its 99 % confidence interval (from "
            "batches of consecutive windows, or runs) and a verdict: <b>worse</b> / "
            "<b>better</b> (significant: p &lt; 0.01 and a change of at least 5 %), "
            "<b>no change</b> (not significant, and the whole interval lies within "
            f"±{EQUIVALENCE_MARGIN * 100:.0f} %: a change that large is excluded) or "
            "<b>cannot tell</b> (no interval, e.g. single imported runs without windows, or "
            "one reaching beyond the margin: the change is shown, with why and what would "
            "decide it). Maxima: runs of different length are not comparable directly, so "
            "the per-window maxima are compared; the change shown is that of the median "
            "window maximum.</p>")
        for pc in pairs:
            items = "".join(f"<li class='{_CLASS[ch.verdict]}'>{esc(ch.describe())}</li>"
                            for ch in pc.changes)
            out.append(f"<p><b>{esc(pc.b.display)}</b> vs <b>{esc(pc.a.display)}</b>: "
                       f"<span class='{_CLASS[pc.verdict()]}'>{esc(pc.verdict())}</span></p>"
                       f"<p class='sub'>{esc(pc.summary())}</p><ul>{items}</ul>")
    return "".join(out)

