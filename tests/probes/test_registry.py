# SPDX-License-Identifier: MIT
"""The host's probe registry (rtlab/probes/registry.py): one INFO per engine probe, and
defaults for a probe the host does not know."""

from __future__ import annotations

import json
import os
import subprocess

from rtlab.probes.registry import PROBES, info, names, two_ended, two_ended_names
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import Channel, Phase, RunResult
from rtlab.runner.direct import needs_peer, with_peer
from rtlab.scenario.model import Phase as ScenarioPhase
from rtlab.scenario.model import ProbeSpec, Scenario


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


def test_two_ended_probes_declare_their_other_end() -> None:
    """The runner sets up the other end of a two-ended probe from its INFO alone."""
    assert two_ended_names() == ["udp"]
    assert two_ended("timer") is None and two_ended("from-a-newer-engine") is None
    ends = two_ended("udp")
    assert ends is not None and ends.host_choices["path"] == ("socket", "xdp")
    assert ends.measures({}) and ends.measures({"mode": "ping"})
    assert not ends.measures({"mode": "reflect"})

    def sc(*probes: ProbeSpec) -> Scenario:
        phase = ScenarioPhase("main", probes[0], 10**9, "idle", more_probes=probes[1:])
        return Scenario(name="s", description="", phases=(phase,))
    timer = ProbeSpec("timer", {"cpus": [0]})
    assert not needs_peer(sc(timer))
    assert not needs_peer(sc(ProbeSpec("udp", {"mode": "reflect"})))
    both = sc(timer, ProbeSpec("udp", {"cpu": 1}, "u"))
    assert needs_peer(both)
    aimed = with_peer(both, "10.0.0.2:7000", "tok")
    assert aimed.phases[0].probe == timer
    assert aimed.phases[0].more_probes[0].options == {
        "cpu": 1, "mode": "ping", "peer": "10.0.0.2:7000", "session": "tok"}
