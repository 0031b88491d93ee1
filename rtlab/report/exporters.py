# SPDX-License-Identifier: MIT
"""Exporters: one interface, `serialize(result) -> bytes`, and a registry by name.

* `json`      - the versioned result (`load_result` reads it back)
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
from abc import ABC, abstractmethod

from rtlab.analysis import DEFAULT_PERCENTILES, ChannelSummary, percentile_label
from rtlab.report.format import NA, preemption, us
from rtlab.report.terminal import channel_label, verdict
from rtlab.results.model import RunResult


class Exporter(ABC):
    name: str
    extension: str
    media_type: str

    @abstractmethod
    def serialize(self, result: RunResult) -> bytes: ...


class JsonExporter(Exporter):
    name, extension, media_type = "json", "json", "application/json"

    def serialize(self, result: RunResult) -> bytes:
        return (json.dumps(result.to_dict(), indent=2, sort_keys=False) + "\n").encode()


def _summaries(result: RunResult) -> list[tuple[str, ChannelSummary, bool]]:
    """(phase, summary, merged) per channel, plus an `all` row (merged) per phase."""
    rows = []
    for phase in result.phases:
        for ch in phase.channels:
            rows.append((phase.name, ch.summary(), False))
        if (merged := phase.all_row(result.probe)) is not None:
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
            summaries = [(channel_label(c), c.summary()) for c in phase.channels]
            if (merged := phase.all_row(result.probe)) is not None:
                summaries.append(("**all**", merged.summary()))
            for label, s in summaries:
                cells = [label, str(s.samples), us(s.min_ns), us(s.mean_ns),
                         *(us(s.p(q)) for q in DEFAULT_PERCENTILES), us(s.max_ns), str(s.missed)]
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        from rtlab.probes.extras import extra_lines

        extra = extra_lines(result)
        out += [f"- {line}" for line in extra] + ([""] if extra else [])
        for note in result.notes:
            out.append(f"- note: {note}")
        if result.notes:
            out.append("")
        out += [verdict(result), ""]
        return "\n".join(out).encode()


from rtlab.report.cyclictest_hist import CyclictestHistExporter  # noqa: E402
from rtlab.report.cyclictest_json import CyclictestJsonExporter  # noqa: E402
from rtlab.report.junit import JunitExporter  # noqa: E402

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
