# SPDX-License-Identifier: MIT
"""The host's probe registry (rtlab/probes/registry.py): one INFO per engine probe, and
defaults for a probe the host does not know."""

from __future__ import annotations

import json
import os
import subprocess

from rtlab.probes.registry import PROBES, info, names, two_ended, two_ended_names
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import Channel, Phase, RunResult
from rtlab.results.shape import ResultShape
from rtlab.runner.peers import needs_peer, with_peer
from rtlab.scenario.model import Phase as ScenarioPhase
from rtlab.scenario.model import ProbeSpec, Scenario


def _engine_options() -> dict[str, list[str]]:
    """Each engine probe's option names, from its own table (`rtlab-probe list --json`)."""
    out = subprocess.run([os.environ["RTLAB_PROBE"], "list", "--json"], check=True,
                         capture_output=True, text=True).stdout
    return {p["name"]: [o["name"] for o in p["options"]] for p in json.loads(out)["probes"]}


def test_every_engine_probe_is_registered() -> None:
    engine = _engine_options()
    assert set(engine) == set(PROBES)
    for name, p in PROBES.items():
        assert p.name == name and p.shape.measures
        if p.phase_lines is None:
            assert name == "timer"  # the latency table says all there is


def test_single_cpu_probes_are_those_the_engine_gives_one_cpu() -> None:
    """The registry's single-CPU probes (the CLI's --cpus help) are the engine's probes
    with a `--cpu` option, in the registry's order."""
    engine = _engine_options()
    single = names(single_cpu=True)
    assert single and set(single) == {n for n, opts in engine.items() if "cpu" in opts}
    assert names() == [*PROBES] and set(names(single_cpu=False)) == set(PROBES) - set(single)


def test_unknown_probe_gets_the_defaults() -> None:
    p = info("from-a-newer-engine")
    assert p.shape == ResultShape() and p.phase_lines is None
    assert p.shape.measures == "latency" and p.shape.headline == ()
    assert probe_shape("from-a-newer-engine") == ResultShape()


def _ch(name: str, samples: int) -> Channel:
    return Channel(name=name, cpu=None, samples=samples, min_ns=1 if samples else None,
                   max_ns=1 if samples else None, sum_ns=samples,
                   hist=LogLinHistogram(7, {1: samples} if samples else {}))


def test_headline_comes_from_the_probe_module() -> None:
    ph = Phase("main", [_ch("rtt", 5), _ch("stack", 5), _ch("wakeup", 5)], 10**9)
    assert [c.name for c in ph.headline(probe_shape("udp"))] == ["rtt"]
    assert len(ph.headline(probe_shape("switch"))) == 3  # no patterns: every channel
    rtla = Phase("main", [_ch("irq@cpu0", 5), _ch("thread@cpu0", 5), _ch("user@cpu0", 0)],
                 10**9)
    # user@ is empty
    assert [c.name for c in rtla.headline(probe_shape("timer"))] == ["thread@cpu0"]
    r = RunResult(run_id="x", status="completed", probe="udp", phases=[ph])
    assert [c.name for _, c in r.headline_channels(probe_shape(r.probe))] == ["rtt"]


def test_two_ended_probes_declare_their_other_end() -> None:
    """The runner sets up the other end of a two-ended probe from its INFO alone; the
    two-ended probes are the engine's probes that take the other end's address and the
    shared token, and every option the host acts on is one of the engine's."""
    engine = _engine_options()
    pairs = two_ended_names()
    assert pairs == [n for n in PROBES if two_ended(n) is not None]
    for name in pairs:
        ends = two_ended(name)
        assert ends is not None
        opts = engine[name]
        assert {ends.mode_option, ends.address_option, ends.token_option} <= set(opts)
        assert {k.replace("_", "-") for k in ends.host_choices} <= set(opts)
    assert set(pairs) == {n for n, opts in engine.items() if {"peer", "session"} <= set(opts)}
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
