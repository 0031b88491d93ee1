# SPDX-License-Identifier: MIT
"""rtlab.trace.timerlat on a capture recorded on the emulated x86_64 PREEMPT_RT board
(scripts/lab/record-timerlat-fixture.sh): the timerlat tracer with the osnoise events
and sched_switch on CPU 1, while the engine's duty spinner (rtlab-probe load --cpu 1
--cpu-duty 20ms/100ms --cpus 1 --policy fifo --priority 97, comm rtlab-spin) ran there;
then `rtla timerlat top -a 10000 -c 1` in the same conditions. Both must name the
spinner. Latency values under emulation mean nothing: only the attribution is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtlab.trace.capture import TraceCapture
from rtlab.trace.ringbuf import Event
from rtlab.trace.timerlat import analyze, parse_rtla_auto

FIX = Path(__file__).parent / "fixtures" / "timerlat" / "x86_64"
THRESHOLD_NS = 10_000_000  # the recording's rtla -a threshold


@pytest.fixture(scope="module")
def spinner() -> tuple[str, int]:
    rec = json.loads((FIX / "spinner.json").read_text())
    (w,) = rec["workers"]
    assert (w["policy"], w["priority"]) == ("fifo", 97)
    return rec["config"]["cpu_duty"]["comm"], w["pid"]


def test_capture_names_the_spinner(spinner: tuple[str, int]) -> None:
    cap = TraceCapture.load(FIX / "capture")
    assert cap.meta["tracer"] == "timerlat"
    (cpu,) = cap.cpus
    res = analyze(cap, THRESHOLD_NS)[cpu]
    for ctx in ("irq", "thread"):
        d = res.distribution(ctx)
        assert d["count"] and d["min"] <= d["p50"] <= d["p99"] <= d["max"]  # type: ignore[operator]
    assert res.distribution("user")["count"] == 0  # 6.1's kernel threads: no context 2
    assert len(res.splits) >= 5
    named = [s for s in res.splits if (c := s.culprit()) and (c.name, c.ident) == spinner]
    assert len(named) >= 0.9 * len(res.splits), res.culprits()
    for s in named:
        assert s.thread_latency_ns is not None and s.thread_latency_ns > THRESHOLD_NS
        assert s.thread_blockers[0].kind == "thread"
        assert f"blocked by task {spinner[0]}[{spinner[1]}]" in s.summary()
        assert s.summary().startswith("IRQ late by ")
        assert s.to_dict()["culprit"]["id"] == spinner[1]  # type: ignore[index]


def test_rtla_auto_names_the_same_task(spinner: tuple[str, int]) -> None:
    stdout = (FIX / "rtla" / "stdout.txt").read_text()
    assert "hit stop tracing" in stdout
    # rtla 6.1 stops and saves the trace; it has no auto-analysis text yet
    (v,) = parse_rtla_auto(stdout, (FIX / "rtla" / "timerlat_trace.txt").read_text())
    assert v.source == "saved trace" and v.cpu == 1
    assert (v.kind, v.name, v.ident) == ("thread", *spinner)
    assert v.latency_ns is not None and v.latency_ns > THRESHOLD_NS


def test_splits_of_a_higher_irq_and_of_idle() -> None:
    """Hand-built events: a higher IRQ delays the timer IRQ; an idle CPU, nothing."""
    ms = 1_000_000

    def tl(ts: int, seq: int, ctx: int, lat: int, pid: int) -> Event:
        return Event(ts, 2, "timerlat", pid, {"seqnum": seq, "context": ctx,
                                               "timer_latency": lat})

    evs = [
        Event(1 * ms, 2, "irq_noise", 50, {"start": 0, "duration": 400_000,
                                            "desc": "eth0", "vector": 40}),
        tl(1 * ms + 50_000, 1, 0, 450_000, 50),  # expiry at 0.6 ms, eth0 ran until 1 ms
        Event(1 * ms + 900_000, 2, "thread_noise", 50, {"start": 0, "duration": 800_000,
                                                        "comm": "hog", "pid": 50}),
        tl(1 * ms + 950_000, 1, 1, 1_350_000, 77),
        tl(5 * ms, 2, 0, 300_000, 0),  # from idle, nothing traced before it
        tl(5 * ms + 10_000, 2, 1, 310_000, 77),
    ]
    res = analyze({2: evs}, 200_000)[2]
    first, second = res.splits
    assert [b.label() for b in first.irq_blockers] == ["irq eth0:40"]
    assert first.thread_blockers[0].label() == "task hog[50]"
    assert first.culprit().label() == "task hog[50]"  # type: ignore[union-attr]
    assert second.irq_reason() == "exit from idle, or the CPU was not running"
    assert second.culprit() is None
    assert res.culprits() == {"task hog[50]": 1,
                              "exit from idle, or the CPU was not running": 1}


AA_TEXT = """\
## CPU 3 hit stop tracing, analyzing it ##
  IRQ handler delay:                                         1.20 us (0.08 %)
  IRQ latency:                                               3.10 us
  Timerlat IRQ duration:                                     5.00 us (0.33 %)
  Blocking thread:                                        1400.00 us (93.00 %)
                        rtlab-spin:4242                   1400.00 us
  IRQ interference                                          20.00 us (1.33 %)
                     local_timer:236                        20.00 us
------------------------------------------------------------------------
  Thread latency:                                         1505.00 us (100%)
"""


def test_rtla_auto_analysis_text() -> None:
    """The auto-analysis of rtla 6.3 and later, laid out as its printf formats write it."""
    (v,) = parse_rtla_auto("header\n" + AA_TEXT)
    assert (v.cpu, v.kind, v.name, v.ident, v.latency_ns, v.source) == (
        3, "thread", "rtlab-spin", 4242, 1_505_000, "auto-analysis")
    assert parse_rtla_auto("no stop\n") == []
