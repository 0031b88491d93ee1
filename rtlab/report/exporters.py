# SPDX-License-Identifier: MIT
"""Exporters: the registry by name of the formats (interface: rtlab.report.export_base).

* `json`      - the versioned result (`load_result` reads it back) plus a `derived`
                block: what rtlab computes from it (the confidence intervals of the
                percentiles, `derived_statistics`); `load_result` ignores it
* `csv`       - one row per channel (plus an `all` row per phase) with the
                statistics in integer nanoseconds; empty cell = n/a
* `csv-hist`  - one row per non-empty histogram bucket per channel:
                lo_ns and hi_ns (inclusive) and count
* `markdown`  - the summary table (µs) and the verdict
* `junit`     - JUnit XML for CI systems: one testcase per channel per SLO clause
                (`JunitExporter(slo)`); without an SLO one "valid measurement"
                testcase per channel (samples measured, nothing missed or lost)
* `cyclictest-hist` - the text histogram of `cyclictest -h` (1-µs rows, one
                column per channel, `# Min/Avg/Max Latencies` and
                `# Histogram Overflows` trailers), so OSADL-style scripts keep
                working; see `CyclictestHistExporter` for the re-binning
* `cyclictest-json` - the JSON of `cyclictest --json=FILE` (rt-tests 2.x keys,
                per-thread min/avg/max/cycles/histogram, return_code), so pipelines
                that read cyclictest's JSON take rtlab runs (rtlab.report.cyclictest_json)
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rtlab import __version__
from rtlab.analysis.stats import DEFAULT_LEVEL, PercentileInterval
from rtlab.machine_text import preemption
from rtlab.probes.extras import extra_lines
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.cyclictest_hist import CyclictestHistExporter
from rtlab.report.cyclictest_json import CyclictestJsonExporter
from rtlab.report.export_base import Exporter
from rtlab.report.junit import JunitExporter
from rtlab.report.terminal import (
    WIDE_MARK,
    _invalid_reason,
    channel_label,
    pct_cell,
    row_intervals,
    verdict,
    wide_note,
)
from rtlab.results.model import RunResult
from rtlab.results.summary import DEFAULT_PERCENTILES, ChannelSummary, percentile_label
from rtlab.textfmt import NA, us


class JsonExporter(Exporter):
    name, extension, media_type = "json", "json", "application/json"

    def serialize(self, result: RunResult) -> bytes:
        doc = result.to_dict() | {"derived": derived_statistics(result)}
        return (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode()


def intervals_json(ivs: dict[float, PercentileInterval]) -> dict[str, Any]:
    """{"p99.9999": {value_ns, low_ns, high_ns, ...}, ...} (docs/report.md)."""
    return {percentile_label(q): iv.to_dict() for q, iv in ivs.items()}


def derived_statistics(result: RunResult) -> dict[str, Any]:
    """Statistics rtlab derives from a result, for exports (not part of the result: a
    reader recomputes them; `load_result` ignores the block). None of them from numbers
    that failed validation: then `percentile_intervals` is null with the reason."""

    doc: dict[str, Any] = {
        "note": "derived by rtlab from the result when exported; not read back",
        "rtlab_version": __version__,
        "percentile_intervals": None,
    }
    why = _invalid_reason(result)
    if why is not None:
        return doc | {"not_computed": why}
    phases = []
    for phase in result.phases:
        chans = [{"name": ch.name, "cpu": ch.cpu, "samples": ch.samples,
                  "percentiles": intervals_json(row_intervals(ch))} for ch in phase.channels]
        if (merged := phase.all_row(probe_shape(result.probe))) is not None:
            chans.append({"name": "all", "cpu": None, "samples": merged.samples,
                          "percentiles": intervals_json(
                              row_intervals(merged, phase.headline(probe_shape(result.probe))))})
        phases.append({"name": phase.name, "channels": chans})
    doc["percentile_intervals"] = {
        "level": DEFAULT_LEVEL, "method": INTERVAL_METHOD, "phases": phases}
    return doc


INTERVAL_METHOD = (
    "distribution-free confidence interval of each tail percentile from the order "
    "statistics (equal-tailed binomial ranks, each end missing with probability <= "
    "(1 - level)/2), ends taken outward to histogram bucket edges; with per-window "
    "histograms computed for N/VIF effective samples (VIF >= 1: the variance of the "
    "fraction below the percentile between batches of consecutive windows against "
    "independent samples) at a level widened for the batches' degrees of freedom, and "
    "for N*theta when the per-window maxima show the samples above it significantly "
    "clustered; null end = unbounded (docs/report.md)")


def _summaries(result: RunResult) -> list[tuple[str, ChannelSummary, bool]]:
    """(phase, summary, merged) per channel, plus an `all` row (merged) per phase."""
    rows = []
    for phase in result.phases:
        for ch in phase.channels:
            rows.append((phase.name, ch.summary(), False))
        if (merged := phase.all_row(probe_shape(result.probe))) is not None:
            rows.append((phase.name, merged.summary(), True))
    return rows


def _cell(v: float | int | None) -> str:
    if v is None:
        return ""
    return f"{v:.1f}" if isinstance(v, float) else str(v)


class CsvExporter(Exporter):
    name, extension, media_type = "csv", "csv", "text/csv"
    COLUMNS = ("run_id", "phase", "channel", "cpu", "samples", "missed", "min_ns", "mean_ns",
               "mode_ns", *(f"{percentile_label(q).replace('.', '_')}_ns"
                            for q in DEFAULT_PERCENTILES),
               "max_ns", "max_at_ns")

    def serialize(self, result: RunResult) -> bytes:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.COLUMNS)
        for phase, s, merged in _summaries(result):
            w.writerow([result.run_id, phase, s.name, "" if merged else _cell(s.cpu),
                        s.samples, s.missed,
                        _cell(s.min_ns), _cell(s.mean_ns), _cell(s.mode_ns),
                        *(_cell(s.p(q)) for q in DEFAULT_PERCENTILES),
                        _cell(s.max_ns), _cell(s.max_at_ns)])
        return buf.getvalue().encode()


class CsvHistExporter(Exporter):
    name, extension, media_type = "csv-hist", "csv", "text/csv"
    COLUMNS = ("run_id", "phase", "channel", "cpu", "lo_ns", "hi_ns", "count")

    def serialize(self, result: RunResult) -> bytes:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.COLUMNS)
        for phase, ch in result.channels():
            for b in ch.hist.buckets():
                w.writerow([result.run_id, phase.name, ch.name, _cell(ch.cpu),
                            b.lo, b.hi, b.count])
        return buf.getvalue().encode()


class MarkdownExporter(Exporter):
    name, extension, media_type = "markdown", "md", "text/markdown"

    def serialize(self, result: RunResult) -> bytes:
        heads = ["channel", "samples", "min", "avg",
                 *(percentile_label(q) for q in DEFAULT_PERCENTILES), "max", "missed"]
        out = [f"# rtlab run {result.run_id}", ""]
        sysinfo = result.system
        facts = [f"probe `{result.probe}`", f"status **{result.status}**"]
        if sysinfo.get("release"):
            facts.append(f"kernel `{sysinfo['release']}`")
        if sysinfo.get("preempt"):
            facts.append(f"preempt `{preemption(sysinfo)}`")
        out += [", ".join(facts), ""]
        for phase in result.phases:
            out += [f"## Phase {phase.name} (latency in µs; {NA} = too few samples)", ""]
            out.append("| " + " | ".join(heads) + " |")
            out.append("|" + "|".join(["---"] + ["---:"] * (len(heads) - 1)) + "|")
            heads_ch = phase.headline(probe_shape(result.probe))
            summaries = [(channel_label(c), c.summary(), row_intervals(c))
                         for c in phase.channels]
            headline = [(lb, ivs) for (lb, _, ivs), c in zip(summaries, phase.channels,
                                                               strict=True)
                        if len(heads_ch) == 1 and c is heads_ch[0]]
            if (merged := phase.all_row(probe_shape(result.probe))) is not None:
                ivs = row_intervals(merged, heads_ch)
                summaries.append(("**all**", merged.summary(), ivs))
                headline.append(("all", ivs))
            for label, s, ivs in summaries:
                cells = [label, str(s.samples), us(s.min_ns), us(s.mean_ns),
                         *(pct_cell(s, q, ivs).replace(WIDE_MARK, "\\" + WIDE_MARK)
                           for q in DEFAULT_PERCENTILES), us(s.max_ns), str(s.missed)]
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
            if (note := wide_note(headline)) is not None:
                out += ["\\" + note, ""]

        extra = extra_lines(result)
        out += [f"- {line}" for line in extra] + ([""] if extra else [])
        for note in result.notes:
            out.append(f"- note: {note}")
        if result.notes:
            out.append("")
        out += [verdict(result), ""]
        return "\n".join(out).encode()


EXPORTERS: dict[str, Exporter] = {
    e.name: e for e in (JsonExporter(), CsvExporter(), CsvHistExporter(), MarkdownExporter(),
                        JunitExporter(), CyclictestHistExporter(), CyclictestJsonExporter())
}


def get_exporter(name: str) -> Exporter:
    try:
        return EXPORTERS[name]
    except KeyError:
        from rtlab.errors import UsageError

        raise UsageError(f"unknown export format {name!r}",
                         hint=f"choose one of {', '.join(EXPORTERS)}") from None
