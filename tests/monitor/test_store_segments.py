# SPDX-License-Identifier: MIT
"""Segments into the store: one the store refuses never holds up the others, a run id
held by an unrelated run is stepped over (and found again after a crash), every stored
segment has its raw output, and a raw file whose records contradict each other is
replayed up to that point without stopping the monitor's start."""

from __future__ import annotations

import json
from pathlib import Path

from rtlab.engine.jsonl import StreamCollector
from rtlab.monitor.checkpoint import Checkpoint, Segment, StateDir
from rtlab.monitor.segments import next_run_id, segment_result, store_segment
from rtlab.monitor.service import Monitor, MonitorOptions
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store


def state_with(tmp_path: Path, segments: dict[str, str], pending: bool = True
               ) -> tuple[Path, list[Segment]]:
    """A state directory whose checkpoint has these segments (run id -> raw text),
    pending for the store (or open, as after a kill -9)."""
    state = tmp_path / "state"
    sd = StateDir(state)
    sd.acquire()
    mid = sd.monitor_id({})
    segs = []
    for run_id, text in segments.items():
        seg = Segment("b", run_id, sd.segment_file("b", run_id), 0.0, status="ended")
        sd.abs(seg.file).parent.mkdir(parents=True, exist_ok=True)
        sd.abs(seg.file).write_text(text)
        segs.append(seg)
    cp = Checkpoint(mid, pending=segs) if pending else Checkpoint(
        mid, open={s.board: s for s in segs})
    sd.save(cp)
    sd.release()
    return state, segs


def test_one_segment_the_store_refuses_does_not_hold_up_the_others(
        raw: Path, tmp_path: Path) -> None:
    header, *rest = raw.read_text().splitlines(keepends=True)
    bad = json.dumps({**json.loads(header), "schema": 99}) + "\n"
    bad += "".join(rest)  # a whole segment, of an engine schema this rtlab cannot read
    state, _ = state_with(tmp_path, {"0000bad0": bad, "0000600d": raw.read_text()})
    events: list[str] = []
    store_loc = str(tmp_path / "s.db")
    mon = Monitor(MonitorOptions(targets=[], engine_args=[], state_dir=state,
                                 store=store_loc, on_event=events.append))
    mon.prepare()
    try:
        mon._store_pending(every=True)
        assert [s.run_id for s in mon.cp.pending] == ["0000bad0"]  # type: ignore[union-attr]
        s = Store.open(store_loc)
        try:
            assert [r.id for r in s.list(None)] == ["0000600d"]
        finally:
            s.close()
        assert any("0000bad0 not stored yet (tried 1 time(s), again in" in e for e in events)
        # the refused one waits for its pause: the next regular pass leaves it alone
        n = len(events)
        mon._store_pending()
        assert len(events) == n
        assert (state / "segments" / "b" / "0000bad0.jsonl").exists()
        assert not (state / "segments" / "b" / "0000600d.jsonl").exists()
    finally:
        mon.close()


def test_a_run_id_held_by_another_run_is_stepped_over_and_found_again(
        raw: Path, tmp_path: Path) -> None:
    seg = Segment("b", "0000abcd", "segments/b/0000abcd.jsonl", 0.0, status="ended")
    col = StreamCollector()
    for line in raw.read_text().splitlines(keepends=True):
        col.feed(line)
    other = segment_result(col, Segment("x", "0000abcd", "segments/x/0000abcd.jsonl", 0.0),
                           "another-monitor", None)
    assert other is not None
    store = Store.open(str(tmp_path / "s.db"))
    try:
        store.add(other, probe_shape)
        outcome, run_id = store_segment(store, raw, seg, "this-monitor", None)
        assert (outcome, run_id) == ("stored", next_run_id("0000abcd"))
        # stored with its raw output, byte for byte
        (f,) = store.raw_files(run_id)
        assert f.name == f"{run_id}.jsonl"
        assert b"".join(store.read_raw(run_id, f)) == raw.read_bytes()
        # after a crash before the checkpoint said so: found, not stored twice
        assert store_segment(store, raw, seg, "this-monitor", None) == ("already", run_id)
        assert len(store.list(None)) == 2
        assert store.get(run_id).provenance["monitor"]["id"] == "this-monitor"
    finally:
        store.close()


def test_records_that_contradict_each_other_are_replayed_up_to_there(
        raw: Path, tmp_path: Path) -> None:
    lines = raw.read_text().splitlines(keepends=True)
    snaps = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "snapshot"]
    assert len(snaps) >= 2
    last = json.loads(lines[snaps[-1]])
    for ch in last["channels"]:
        ch["samples"] = 0  # counts that go backwards
    lines[snaps[-1]] = json.dumps(last) + "\n"
    state, _ = state_with(tmp_path, {"0000abcd": "".join(lines)}, pending=False)
    events: list[str] = []
    mon = Monitor(MonitorOptions(targets=[], engine_args=[], state_dir=state,
                                 on_event=events.append))
    mon.prepare()  # regression: the FeedError ended every later start with a traceback
    try:
        (pending,) = mon.cp.pending  # type: ignore[union-attr]
        assert pending.seq == json.loads(lines[snaps[-2]])["seq"]
        assert any("the rest of its raw file is not counted" in e for e in events)
    finally:
        mon.close()
