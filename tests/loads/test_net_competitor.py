# SPDX-License-Identifier: MIT
"""The net load (two namespaces, veth, bounded UDP rate) and the rt-competitor load."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rtlab.loads import LoadSet, from_spec
from rtlab.loads.net import netns_exists

from .conftest import Recorder, need


def test_net_load_traffic_flows_and_namespaces_go(recorder: Recorder,
                                                  require_root: None) -> None:
    need("ip", "sockperf", "taskset")
    load = from_spec({"kind": "net", "rate_kbit": 2000, "msg_bytes": 1000, "cpus": "1"})
    with LoadSet([load], recorder, settle_s=0.2):
        assert len(recorder.netns) == 2
        assert all(netns_exists(ns) for ns in recorder.netns)
        assert len(recorder.spawns) == 2  # sockperf server and client, one group each
        first = load.counters()
        deadline = time.monotonic() + 8  # sockperf warms up for about a second
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = load.counters()
            if now["b_tx_bytes"] - first["b_tx_bytes"] > 50_000:
                break
        assert now["b_tx_bytes"] - first["b_tx_bytes"] > 50_000
        assert now["a_rx_bytes"] - first["a_rx_bytes"] > 50_000
        # nothing of it on the host side
        assert not any(Path(f"/sys/class/net/{d}").exists() for d in ("rtl-a", "rtl-b"))
    assert not any(netns_exists(ns) for ns in recorder.netns)
    assert recorder.leftovers() == []
    d = load.describe()
    assert d["netns"] == recorder.netns and d["mps"] == 250
    assert d["counters"]["a_rx_bytes"] > 50_000
    assert [p["argv"][:5] for p in d["processes"]] == [
        ["ip", "netns", "exec", recorder.netns[0], "taskset"],
        ["ip", "netns", "exec", recorder.netns[1], "taskset"]]


def test_rt_competitor_runs_at_fifo_98_and_keeps_its_numbers(
        recorder: Recorder, require_root: None, probe_bin: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTLAB_PROBE", probe_bin)
    load = from_spec({"kind": "rt-competitor", "cpus": "1", "interval": "1ms"})
    with LoadSet([load], recorder, settle_s=0.3):
        pid = load.procs[0].pid
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        fifo98 = [t for t in tids if os.sched_getscheduler(t) == os.SCHED_FIFO
                  and os.sched_getparam(t).sched_priority == 98]
        assert fifo98, "no measuring thread at SCHED_FIFO 98"
        time.sleep(1.0)
    d = load.describe()
    assert d["argv"][1:6] == ["timer", "--policy", "fifo", "--priority", "98"]
    assert not d["died_early"]
    (chan,) = d["competitor"]["channels"]
    assert chan["cpu"] == 1 and chan["samples"] > 100
