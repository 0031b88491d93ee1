# SPDX-License-Identifier: MIT
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from rtlab.analysis.slo import parse_slo
from rtlab.report.cyclictest_hist import CyclictestHistExporter, rebin_us
from rtlab.report.exporters import EXPORTERS
from rtlab.report.junit import JunitExporter
from rtlab.results.histogram import LogLinHistogram
from tests.support.synth import synthetic_result


def test_registry_has_new_formats() -> None:
    assert {"junit", "cyclictest-hist"} <= set(EXPORTERS)


def test_junit_one_case_per_channel_and_clause() -> None:
    r = synthetic_result(windows=10, spike_prob=1e-3)
    root = ET.fromstring(JunitExporter(parse_slo("max < 50us and p99 < 1ms")).serialize(r))
    cases = root.findall(".//testcase")
    assert len(cases) == 4
    assert root.get("tests") == "4"
    assert int(root.get("failures")) == len(root.findall(".//failure")) >= 1
    assert cases[0].get("classname") == f"rtlab.{r.run_id}.main.cpu0"


def test_junit_without_slo_checks_validity() -> None:
    r = synthetic_result(windows=5)
    r.phases[0].channels[1].missed = 3
    root = ET.fromstring(EXPORTERS["junit"].serialize(r))
    assert root.get("tests") == "2" and root.get("failures") == "1"


def test_rebin_keeps_totals_and_spreads_wide_buckets() -> None:
    h = LogLinHistogram()
    h.add(99_900, 10)      # narrow bucket straddling the 99/100 µs boundary
    h.add(2_000_000, 16)   # an 8.2 µs wide bucket at 2 ms
    rows, over = rebin_us(h, 3000)
    assert sum(rows) + over == 26 and over == 0
    assert rows[99] + rows[100] == 10
    spread = [c for c in rows[1990:2020] if c]
    assert sum(spread) == 16 and len(spread) in (8, 9) and max(spread) <= 3
    rows, over = rebin_us(h, 400)
    assert over == 16 and sum(rows) == 10


def test_cyclictest_hist_layout() -> None:
    r = synthetic_result(windows=5, spike_prob=1e-3)
    text = CyclictestHistExporter(400).serialize(r).decode()
    lines = text.splitlines()
    rows = [ln for ln in lines if not ln.startswith("#")]
    assert len(rows) == 400
    assert all(re.fullmatch(r"\d{6} \d{6}\t\d{6}", ln) for ln in rows)
    trailer = {ln.split(":")[0]: ln.split(":")[1].split() for ln in lines if ln.startswith("# ")
               and ":" in ln}
    for key in ("# Min Latencies", "# Avg Latencies", "# Max Latencies", "# Histogram Overflows"):
        assert len(trailer[key]) == 2
    for i, ch in enumerate(r.phases[0].channels):
        over = int(trailer["# Histogram Overflows"][i])
        total = sum(int(ln.split()[1 + i]) for ln in rows) + over
        assert total == ch.samples
        assert int(trailer["# Max Latencies"][i]) == ch.max_ns // 1000


def test_cyclictest_hist_roundtrip_through_importer() -> None:
    from rtlab.results.importers.cyclictest import parse_hist

    r = synthetic_result(windows=5)
    back = parse_hist(CyclictestHistExporter().serialize(r).decode(), "bbbb0001")
    for a, b in zip(r.phases[0].channels, back.phases[0].channels, strict=True):
        assert a.samples == b.samples
        assert a.max_ns // 1000 * 1000 == b.max_ns


def test_cyclictest_hist_of_a_max_in_a_wide_bucket_has_no_overflow() -> None:
    # the max (16.1 ms) lies in a 64-µs wide bucket; spreading that bucket beyond the max
    # put part of it past the last row and reported an overflow that did not exist
    r = synthetic_result(windows=5, spike_prob=1e-3, spike_ns=16_123_478)
    ch = r.phases[0].channels[0]
    text = CyclictestHistExporter().serialize(r).decode()
    trailer = {ln.split(":")[0]: ln.split(":")[1].split() for ln in text.splitlines()
               if ln.startswith("# ") and ":" in ln}
    assert trailer["# Histogram Overflows"] == ["00000", "00000"]
    rows = [ln.split() for ln in text.splitlines() if not ln.startswith("#")]
    assert len(rows) == max(c.max_ns for _, c in r.channels()) // 1000 + 1
    last = max(i for i, row in enumerate(rows) if int(row[1]))
    assert last == ch.max_ns // 1000  # the max is in its own row, nothing beyond it
    first = min(i for i, row in enumerate(rows) if int(row[1]))
    assert first == ch.min_ns // 1000


def test_csv_all_row_has_no_cpu() -> None:
    import csv
    import io

    r = synthetic_result(windows=5)
    rows = list(csv.DictReader(io.StringIO(EXPORTERS["csv"].serialize(r).decode())))
    assert [(x["channel"], x["cpu"]) for x in rows] == [("cpu0", "0"), ("cpu1", "1"),
                                                         ("all", "")]
