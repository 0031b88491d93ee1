# SPDX-License-Identifier: MIT
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from synth import synthetic_result

from rtlab.analysis.slo import parse_slo
from rtlab.report.cyclictest_hist import CyclictestHistExporter, rebin_us
from rtlab.report.exporters import EXPORTERS
from rtlab.report.junit import JunitExporter
from rtlab.results.histogram import LogLinHistogram


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
