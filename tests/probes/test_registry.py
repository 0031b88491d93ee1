# SPDX-License-Identifier: MIT
"""The host's probe registry (rtlab/probes/registry.py): one INFO per engine probe, and
defaults for a probe the host does not know."""

from __future__ import annotations

import json
import os
import subprocess

from rtlab.probes.registry import PROBES, info, names
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import Channel, Phase, RunResult


def test_every_engine_probe_is_registered() -> None:
    out = subprocess.run([os.environ["RTLAB_PROBE"], "list", "--json"], check=True,
                         capture_output=True, text=True).stdout
    engine = {p["name"] for p in json.loads(out)["probes"]}
    assert engine == set(PROBES)
    for name, p in PROBES.items():
        assert p.name == name and p.measures
        if p.phase_lines is None:
            assert name == "timer"  # the latency table says all there is


def test_unknown_probe_gets_the_defaults() -> None:
    p = info("from-a-newer-engine")
    assert p.measures == "latency" and p.headline == () and p.phase_lines is None
    assert names(single_cpu=True) == ["switch", "overhead", "udp", "event"]


def _ch(name: str, samples: int) -> Channel:
    return Channel(name=name, cpu=None, samples=samples, min_ns=1 if samples else None,
                   max_ns=1 if samples else None, sum_ns=samples,
                   hist=LogLinHistogram(7, {1: samples} if samples else {}))


def test_headline_comes_from_the_probe_module() -> None:
    ph = Phase("main", [_ch("rtt", 5), _ch("stack", 5), _ch("wakeup", 5)], 10**9)
    assert [c.name for c in ph.headline("udp")] == ["rtt"]
    assert len(ph.headline("switch")) == 3  # no patterns: every channel
    rtla = Phase("main", [_ch("irq@cpu0", 5), _ch("thread@cpu0", 5), _ch("user@cpu0", 0)],
                 10**9)
    assert [c.name for c in rtla.headline("timer")] == ["thread@cpu0"]  # user@ is empty
    r = RunResult(run_id="x", status="completed", probe="udp", phases=[ph])
    assert [c.name for _, c in r.headline_channels()] == ["rtt"]
