# SPDX-License-Identifier: MIT
"""The live totals: window maxima on the monitor's clock when fed live (a board's clock
may be anywhere), a probe's totals kept apart from another probe's, and a state
directory that lost monitor.json keeps its totals and waiting segments."""

from __future__ import annotations

import time
from pathlib import Path

from rtlab.monitor.checkpoint import Checkpoint, Segment, StateDir
from rtlab.monitor.feed import SegmentFeed
from rtlab.monitor.live import LiveState
from rtlab.monitor.service import Monitor, MonitorOptions

CH = {"name": "cpu1", "cpu": 1, "samples": 10, "missed": 0, "sum_ns": 100, "min_ns": 5,
      "max_ns": 20, "hist": {"sub_bits": 7, "buckets": [[10, 10]]}, "windows": [[0, 20]]}
BOOTED_IN_1970 = {"type": "header", "probe": "timer", "start_realtime_ns": 5_000_000_000,
                  "config": {"window_ns": 1_000_000_000}}


def fed(live_clock: bool) -> LiveState:
    live, feed = LiveState(), SegmentFeed(live=live_clock)
    for rec in (BOOTED_IN_1970, {"type": "snapshot", "seq": 1, "channels": [CH]}):
        for inc in feed.feed(rec):
            live.update("b", inc.channel, inc.cpu, feed.probe, **inc.as_update(time.time()))
    return live


def test_a_board_clock_in_1970_still_gives_recent_maxima_when_fed_live() -> None:
    (ch,) = fed(live_clock=True).view().channels
    assert ch.recent_max() == 20  # regression: trimmed at once, never exported
    assert ch.max_ns == 20
    # replayed from a raw file the board's clock stands: a 1970 window is not recent
    (old,) = fed(live_clock=False).view().channels
    assert old.recent_max() is None and old.max_ns == 20


def test_two_probes_on_one_cpu_are_two_series() -> None:
    live = LiveState()
    kw = {"samples": 3, "missed": 0, "sum_ns": 30, "buckets": {10: 3}, "windows": [],
          "min_ns": 10, "max_ns": 10, "now": 1.0}
    live.update("b", "cpu1", 1, "timer", **kw)
    live.update("b", "cpu1", 1, "noise", **kw)
    chans = sorted((c.probe, c.samples) for c in live.view().channels)
    assert chans == [("noise", 3), ("timer", 3)]


def test_a_lost_monitor_json_keeps_the_checkpoint(tmp_path: Path) -> None:
    state = tmp_path / "state"
    sd = StateDir(state)
    sd.acquire()
    mid = sd.monitor_id({})
    seg = Segment("b", "0000abcd", sd.segment_file("b", "0000abcd"), 0.0, status="ended")
    sd.abs(seg.file).parent.mkdir(parents=True, exist_ok=True)
    sd.abs(seg.file).write_text("")
    sd.save(Checkpoint(mid, pending=[seg]))
    sd.release()
    (state / "monitor.json").unlink()
    mon = Monitor(MonitorOptions(targets=[], engine_args=[], state_dir=state))
    mon.prepare()
    try:
        assert mon.cp is not None and mon.cp.monitor_id == mid
        assert [s.run_id for s in mon.cp.pending] == ["0000abcd"]
    finally:
        mon.close()
