# SPDX-License-Identifier: MIT
"""Headline channels: a udp round trip is never merged with its own parts."""

from __future__ import annotations

import numpy as np
from rich.console import Console

from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.analysis.window_maxima import run_window_maxima
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.exporters import get_exporter
from rtlab.report.terminal import build_tables, verdict
from rtlab.results.model import Phase, RunResult
from rtlab.results.store.runs import row_values
from rtlab.textfmt import human
from tests.support.synth import channel_from_samples

WINDOW_NS = 1_000_000_000


def _udp_result(probe: str = "udp") -> RunResult:
    rng = np.random.default_rng(7)
    n, per = 20_000, 1000
    rtt = rng.lognormal(np.log(40_000), 0.2, n)  # ~40 us round trips
    stack = rng.lognormal(np.log(8_000), 0.2, n)  # its parts: far shorter
    wake = rng.lognormal(np.log(15_000), 0.2, n)
    turn = rng.lognormal(np.log(60), 0.2, n)
    chans = [channel_from_samples(name, 1, s, per, WINDOW_NS)
             for name, s in (("rtt", rtt), ("stack", stack), ("wakeup", wake),
                             ("peer.turn", turn))]
    return RunResult(run_id="udp00001", status="completed", probe=probe,
                     phases=[Phase("main", chans, n // per * WINDOW_NS)])


def test_headline_of_udp_is_rtt_and_of_a_reflector_its_wakeup() -> None:
    r = _udp_result()
    chans = r.phases[0].channels
    assert [c.name for c in probe_shape("udp").headline_channels(chans)] == ["rtt"]
    assert [c.name for c in probe_shape("udp").headline_channels(chans[1:])] == ["wakeup"]
    assert probe_shape("timer").headline_channels(chans) == chans  # every channel of other probes


def test_merge_verdict_and_store_use_the_round_trip_only() -> None:
    r = _udp_result()
    rtt = r.phases[0].channels[0]
    m = r.merged(probe_shape(r.probe))
    assert m.samples == rtt.samples and m.max_ns == rtt.max_ns and m.min_ns == rtt.min_ns
    row = row_values(r, probe_shape(r.probe))
    assert row["samples"] == rtt.samples
    assert row["p99_ns"] == rtt.summary((99.0,)).p(99.0)
    # a merge of everything would put p99 far below the round trip's
    assert rtt.summary((50.0,)).p(50.0) > 30_000
    assert f"; p99 {human(rtt.summary((99.0,)).p(99.0))}" in verdict(r)


def test_no_all_row_for_one_headline_channel_but_for_several_cpus() -> None:
    console = Console(width=250, record=True)
    for t in build_tables(_udp_result()):
        console.print(t)
    text = console.export_text()
    assert "rtt" in text and "stack" in text and "│ all" not in text
    timer = _udp_result(probe="timer")  # same channels, all alike for a timer-like probe
    console = Console(width=250, record=True)
    for t in build_tables(timer):
        console.print(t)
    assert "│ all" in console.export_text()
    csv = get_exporter("csv").serialize(_udp_result()).decode()
    assert ",all," not in csv and "stack" in csv


def test_slo_and_worst_case_judge_the_round_trip() -> None:
    r = _udp_result()
    # the parts pass it, rtt does not
    report = evaluate_slo(parse_slo("p50 < 20us"), r, shape_of=probe_shape)
    assert {o.channel for o in report.outcomes} == {"rtt"}
    assert not report.passed
    maxima, window_ns = run_window_maxima(r, probe_shape(r.probe))
    rtt = r.phases[0].channels[0]
    assert window_ns == WINDOW_NS and maxima.max() == rtt.max_ns


def test_html_names_udp_histograms_per_channel_and_timer_ones_per_cpu() -> None:
    from rtlab.report.html import render_html
    from tests.support.synth import synthetic_result

    udp = render_html([_udp_result()])
    assert "Histograms per channel" in udp and "Histograms per CPU" not in udp
    assert "Histograms per CPU" in render_html([synthetic_result()])
