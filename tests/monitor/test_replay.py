# SPDX-License-Identifier: MIT
"""The monitor "killed" after every record of a segment: the checkpoint names how far the
totals went, the next start feeds the raw file from there on, and the totals always end
equal to feeding the whole file once (nothing counted twice, nothing lost). Also a raw
file cut in the middle of a line, and records that contradict each other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtlab.monitor.checkpoint import Checkpoint, Segment, StateDir
from rtlab.monitor.feed import FeedError, SegmentFeed
from rtlab.monitor.live import LiveState
from rtlab.monitor.service import Monitor, MonitorOptions


def feed_all(lines: list[str], upto: int | None = None) -> tuple[LiveState, int, bool]:
    """Feed the first `upto` records (all when None) as a live monitor would."""
    live, feed = LiveState(), SegmentFeed()
    seq, ended = 0, False
    for n, line in enumerate(lines):
        if upto is not None and n >= upto:
            break
        rec = json.loads(line)
        for inc in feed.feed(rec):
            live.update("b", inc.channel, inc.cpu, feed.probe, **inc.as_update(1.0))
        if rec["type"] == "snapshot":
            seq = feed.seq
        elif rec["type"] == "result":
            ended = True
    return live, seq, ended


def totals(live: LiveState) -> dict[str, tuple[int, int, int, int, dict[int, int]]]:
    return {c.channel: (c.samples, c.missed, c.sum_ns, c.max_ns, c.buckets)
            for c in live.view().channels}


def test_kill_after_every_record_then_restart(raw: Path, tmp_path: Path) -> None:
    lines = raw.read_text().splitlines(keepends=True)
    assert len(lines) >= 5  # header, 3 snapshots, result
    whole = totals(feed_all(lines)[0])
    for k in range(len(lines) + 1):
        state = tmp_path / f"state{k}"
        sd = StateDir(state)
        sd.acquire()
        mid = sd.monitor_id({})
        live, seq, ended = feed_all(lines, k)
        seg = Segment("b", "0000abcd", sd.segment_file("b", "0000abcd"), 0.0, seq=seq,
                      result=ended)
        sd.abs(seg.file).parent.mkdir(parents=True, exist_ok=True)
        sd.abs(seg.file).write_text("".join(lines))
        view = live.view()
        sd.save(Checkpoint(mid, view.channels, view.boards, {"b": seg}))
        sd.release()

        mon = Monitor(MonitorOptions(targets=[], engine_args=[], state_dir=state))
        mon.prepare()
        try:
            assert totals(mon.live) == whole, f"killed after record {k}"
            assert mon.cp is not None and not mon.cp.open
            (pending,) = mon.cp.pending
            assert pending.status == "ended" and pending.result
        finally:
            mon.close()


def test_a_line_cut_by_the_crash_is_left_out(raw: Path, tmp_path: Path) -> None:
    lines = raw.read_text().splitlines(keepends=True)
    cut = "".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2]  # the result, half written
    state = tmp_path / "state"
    sd = StateDir(state)
    sd.acquire()
    mid = sd.monitor_id({})
    seg = Segment("b", "0000abcd", sd.segment_file("b", "0000abcd"), 0.0)
    sd.abs(seg.file).parent.mkdir(parents=True, exist_ok=True)
    sd.abs(seg.file).write_text(cut)
    sd.save(Checkpoint(mid, open={"b": seg}))
    sd.release()
    mon = Monitor(MonitorOptions(targets=[], engine_args=[], state_dir=state))
    mon.prepare()
    try:
        assert totals(mon.live) == totals(feed_all(lines[:-1])[0])
        (pending,) = mon.cp.pending  # type: ignore[union-attr]
        assert pending.status == "interrupted" and not pending.result
    finally:
        mon.close()


def test_counts_that_go_backwards_are_refused() -> None:
    feed = SegmentFeed()
    ch = {"name": "cpu1", "cpu": 1, "samples": 10, "missed": 0, "sum_ns": 100,
          "min_ns": 5, "max_ns": 20, "hist": {"sub_bits": 7, "buckets": [[10, 10]]}}
    feed.feed({"type": "snapshot", "seq": 1, "channels": [ch]})
    with pytest.raises(FeedError):
        feed.feed({"type": "snapshot", "seq": 2,
                   "channels": [{**ch, "samples": 9, "hist": {"sub_bits": 7,
                                                              "buckets": [[10, 9]]}}]})
    with pytest.raises(FeedError, match="new samples"):
        feed.feed({"type": "snapshot", "seq": 3,
                   "channels": [{**ch, "samples": 12, "sum_ns": 120}]})
