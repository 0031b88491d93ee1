# SPDX-License-Identifier: MIT
"""A board that goes away and comes back under `rtlab monitor`, with the fake engine (a
plan file says what each engine start does: measure with a boot id, crash, or fail as
an unreachable board): the gap is counted, checkpointed on disk and said in one line the
moment the next segment's header arrives, while that segment still measures, and never
counted again at the stop; a reboot between two segments (boot id changed, or the
monotonic clock went back, with no failure in between) is a gap too.

The real reboot of an emulated board is tests/lab/test_monitor_reboot.py."""

from __future__ import annotations

import json
import re
import stat
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rtlab.monitor.exporter import make_registry
from rtlab.monitor.service import Monitor, MonitorOptions
from rtlab.results.store import Store
from tests.support.paths import FAKE, REPO
from tests.support.waiting import wait_for as _wait_for

# Runs one step of the plan: the first line of PLAN (removed unless it is the last),
# noted in STEPS with the time it started.
_ENGINE = '''
import json, os, sys, time
plan_file, steps_file = os.environ["GAP_PLAN"], os.environ["GAP_STEPS"]
lines = open(plan_file).read().splitlines()
step = json.loads(lines[0])
if len(lines) > 1:
    open(plan_file + ".new", "w").write("\\n".join(lines[1:]) + "\\n")
    os.replace(plan_file + ".new", plan_file)
with open(steps_file, "a") as f:
    f.write(json.dumps({**step, "at": time.time()}) + "\\n")
if step["mode"] == "down":
    print("fake board: unreachable", file=sys.stderr)
    sys.exit(1)
os.environ["FAKE_MODE"] = step["mode"]
os.environ["FAKE_PERIOD"] = str(step.get("period", 0.05))
os.environ["FAKE_CRASH_AFTER"] = str(step.get("crash_after", 2))
sys.path.insert(0, os.environ["GAP_REPO"])
import tests.support.fake_probe as fake
emit = fake.emit
def emit_header(rec):
    if rec.get("type") == "header":
        if "boot_id" in step:
            rec["system"]["boot_id"] = step["boot_id"]
        if "mono_ns" in step:
            rec["start_monotonic_ns"] = step["mono_ns"]
    emit(rec)
fake.emit = emit_header
sys.exit(fake.main())
'''

# the gap must be seen while the next segment still measures: poll fast
wait_for = partial(_wait_for, poll=0.02)


def stored(path: Path) -> list[Any]:
    """The store's runs, oldest first."""
    s = Store.open(str(path), create=False)
    try:
        return sorted((s.get(r.id) for r in s.list(None)),
                      key=lambda r: r.provenance["monitor"]["started"])
    finally:
        s.close()


class Harness:
    """A monitor of this machine ("local") whose engine follows a plan, in a thread."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp
        self.plan = tmp / "plan.jsonl"
        self.steps_file = tmp / "steps.jsonl"
        engine = tmp / "rtlab-probe"
        engine.write_text(f"#!{sys.executable}\n{_ENGINE}")
        engine.chmod(engine.stat().st_mode | stat.S_IXUSR)
        assert FAKE.exists(), FAKE
        monkeypatch.setenv("RTLAB_PROBE", str(engine))
        monkeypatch.setenv("GAP_PLAN", str(self.plan))
        monkeypatch.setenv("GAP_STEPS", str(self.steps_file))
        monkeypatch.setenv("GAP_REPO", str(REPO))
        self.events: list[tuple[float, str]] = []
        self.mon: Monitor | None = None
        self.thread: threading.Thread | None = None
        self.code: int | None = None

    def start(self, plan: list[dict[str, Any]], segment_s: float) -> Monitor:
        self.plan.write_text("".join(json.dumps(s) + "\n" for s in plan))
        opts = MonitorOptions(
            targets=["local"], engine_args=["timer", "--cpus", "0", "--allow-non-rt"],
            state_dir=self.tmp / "state", store=str(self.tmp / "store.db"),
            segment_s=segment_s, retry_min_s=0.1, retry_max_s=0.2,
            # no periodic checkpoint: what is on disk was written when something happened
            checkpoint_s=3600.0,
            on_event=lambda m: self.events.append((time.time(), m)))
        self.mon = Monitor(opts)
        self.mon.prepare()

        def run() -> None:
            assert self.mon is not None
            self.code = self.mon.run()

        self.thread = threading.Thread(target=run, name="test-monitor")
        self.thread.start()
        return self.mon

    def stop(self) -> None:
        if self.mon is not None and self.thread is not None:
            self.mon.stop()
            self.thread.join(120)
            assert not self.thread.is_alive(), "the monitor did not stop"
            self.mon.close()
            self.mon = None

    def steps(self) -> list[dict[str, Any]]:
        if not self.steps_file.exists():
            return []
        return [json.loads(x) for x in self.steps_file.read_text().splitlines()]

    def event(self, pattern: str) -> tuple[float, str] | None:
        return next(((t, m) for t, m in self.events if re.search(pattern, m)), None)

    def checkpoint(self) -> dict[str, Any]:
        return json.loads((self.tmp / "state" / "checkpoint.json").read_text())

    def metrics(self) -> dict[str, float]:
        assert self.mon is not None
        text = generate_latest(make_registry(self.mon.live.view)).decode()
        return {s.name: s.value for fam in text_string_to_metric_families(text)
                for s in fam.samples if s.labels.get("board") == "local"
                and s.name.startswith("rtlab_board_")}


@pytest.fixture
def harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    h = Harness(tmp_path, monkeypatch)
    try:
        yield h
    finally:
        h.stop()


@pytest.mark.parametrize("boot_after", ["B", "A"], ids=["rebooted", "connection-lost"])
def test_the_gap_is_recorded_when_the_board_answers_not_at_the_segments_end(
        harness: Harness, boot_after: str) -> None:
    rebooted = boot_after != "A"
    # boot A measures two snapshots and dies; two starts find no board; then the board
    # measures for an hour of the fake engine's seconds (3 minutes of wall time)
    mon = harness.start([{"mode": "crash", "boot_id": "A", "crash_after": 2},
                         {"mode": "down"}, {"mode": "down"},
                         {"mode": "normal", "boot_id": boot_after}], segment_s=3600)
    t_back, line = wait_for(lambda: harness.event(r"back after"), 60, "the board back")
    # at once, while that segment measures: the checkpoint on disk has the gap
    cp = harness.checkpoint()
    steps = harness.steps()
    assert [s["mode"] for s in steps] == ["crash", "down", "down", "normal"]
    (gap,) = cp["gaps"]
    assert gap["board"] == "local" and gap["rebooted"] is rebooted
    # the reason the outage began with (boot A's end), not its last failure's
    downs = [(t, e.removeprefix("local: down: ")) for t, e in harness.events
             if e.startswith("local: down: ")]
    assert [e for _, e in downs[1:]] == ["fake board: unreachable"] * 2
    assert gap["reason"] == downs[0][1] and "unreachable" not in gap["reason"]
    # from the last record of boot A (before the first failed start) to the header of
    # the engine that measures again (after it started)
    assert steps[0]["at"] < gap["start"] < steps[1]["at"]
    assert steps[3]["at"] < gap["end"] <= t_back
    length = gap["end"] - gap["start"]
    (board,) = cp["boards"]
    assert board["gaps"] == 1 and board["reboots"] == int(rebooted)
    assert board["gap_seconds"] == pytest.approx(length)
    seg = cp["open"]["local"]
    assert seg["result"] is False and seg["seq"] < 3600  # that segment goes on measuring
    assert seg["gap_before_s"] == pytest.approx(length)
    assert seg["gap_reason"].startswith(gap["reason"])
    assert ("rebooted" in seg["gap_reason"]) is rebooted
    # the log line, and the exporter
    m = re.fullmatch(r"local: back after (\d+\.\d) s(, rebooted)? \(down since "
                     r"(\d\d:\d\d:\d\d): (.+)\)", line)
    assert m, line
    assert float(m[1]) == pytest.approx(length, abs=0.051)
    assert bool(m[2]) is rebooted
    assert m[3] == time.strftime("%H:%M:%S", time.localtime(gap["start"]))
    assert m[4] == gap["reason"]
    assert max(t for t, _ in downs) < t_back
    metrics = harness.metrics()
    assert metrics["rtlab_board_gaps_total"] == 1
    assert metrics["rtlab_board_reboots_total"] == int(rebooted)
    assert metrics["rtlab_board_gap_seconds_total"] == pytest.approx(length)
    assert metrics["rtlab_board_up"] == 1

    harness.stop()
    assert harness.code == 0
    cp = harness.checkpoint()
    assert cp["gaps"] == [gap]  # not counted again at the stop
    assert cp["boards"][0]["gaps"] == 1 and cp["boards"][0]["gap_seconds"] == length
    assert sum(1 for _, e in harness.events if "back after" in e) == 1
    assert mon.live.board("local").gaps == 1
    # what boot A measured before it died is stored, and the gap is in the next run
    runs = stored(harness.tmp / "store.db")
    assert [r.phases[0].channels[0].samples for r in runs[:1]] == [2 * 500]
    assert runs[1].provenance["monitor"]["gap_before_s"] == pytest.approx(length, abs=0.001)


@pytest.mark.parametrize(("first", "second", "reboot"), [
    ({"boot_id": "A"}, {"boot_id": "B"}, True),
    ({"boot_id": "A"}, {"boot_id": "A"}, False),
    # an engine without a boot id: its monotonic clock went back
    ({"mono_ns": 10**12}, {"mono_ns": 10**9}, True),
    ({}, {}, False),
], ids=["boot-id-changed", "same-boot-id", "clock-went-back", "clock-goes-on"])
def test_a_reboot_between_two_segments_is_a_gap(harness: Harness, first: dict[str, Any],
                                               second: dict[str, Any], reboot: bool) -> None:
    """No failure shows it: one segment ends, the next one's header says another boot."""
    harness.start([{"mode": "normal", **first}, {"mode": "normal", **second}], segment_s=1)
    # the second boot's later segments give it no gap of their own
    wait_for(lambda: len(harness.steps()) >= 4, 60, "four segments")
    if not reboot:
        assert harness.checkpoint()["gaps"] == []
        assert harness.metrics()["rtlab_board_gaps_total"] == 0
        assert not harness.event(r"rebooted|back after|down")
        return
    t, line = wait_for(lambda: harness.event(r"rebooted"), 60, "the reboot")
    (gap,) = harness.checkpoint()["gaps"]
    assert gap["rebooted"] is True and gap["reason"] == "rebooted between two segments"
    steps = harness.steps()
    assert steps[0]["at"] < gap["start"] < steps[1]["at"] < gap["end"] <= t
    m = re.fullmatch(r"local: rebooted between two segments: not measured for (\d+\.\d) s "
                     r"\(since \d\d:\d\d:\d\d\)", line)
    assert m, line
    metrics = harness.metrics()
    assert metrics["rtlab_board_gaps_total"] == 1 and metrics["rtlab_board_reboots_total"] == 1
    assert not harness.event(r"down")
    harness.stop()
    assert len(harness.checkpoint()["gaps"]) == 1
    assert sum(1 for _, e in harness.events if "rebooted" in e) == 1

