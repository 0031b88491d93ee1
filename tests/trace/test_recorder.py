# SPDX-License-Identifier: MIT
"""The Recorder on the real tracefs: own instance, mono clock, cleanup, lost counters."""

from __future__ import annotations

import os
import time

import pytest

from rtlab.cpulist import format_cpumask
from rtlab.errors import SkippedError
from rtlab.trace.tracefs import Recorder, TraceFS, parse_stats

pytestmark = pytest.mark.root


@pytest.fixture
def tracefs(require_root: None) -> TraceFS:
    try:
        tfs = TraceFS.find_or_mount()
    except SkippedError as exc:
        pytest.skip(exc.one_line())
    yield tfs
    tfs.unmount_if_ours()


def test_cpumask_and_stats_parsing() -> None:
    assert format_cpumask([1], full_words=True) == "00000002"
    assert format_cpumask([0, 33], full_words=True) == "00000002,00000001"
    st = parse_stats("entries: 3\noverrun: 7\ndropped events: 2\noldest event ts:  12.5\n")
    assert st == {"entries": 3, "overrun": 7, "dropped_events": 2}


def test_record_decode_and_cleanup(tracefs: TraceFS) -> None:
    cpu = 1 if (os.cpu_count() or 1) > 1 else 0
    before = set(os.listdir(tracefs.path / "instances"))
    global_clock = (tracefs.path / "trace_clock").read_text()
    with Recorder([cpu], tracefs=tracefs) as rec:
        inst = rec.instance
        assert inst is not None and inst.name.startswith(f"rtlab-{os.getpid()}")
        assert "[mono]" in (inst / "trace_clock").read_text()
        marker = rec.marker_path
        assert marker is not None
        os.sched_setaffinity(0, [cpu])
        try:
            with open(marker, "w") as f:
                f.write(f"rtlab spike cpu={cpu} lat=1000 deadline=5\n")
            t0 = time.monotonic_ns()
            time.sleep(0.3)
        finally:
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        rec.stop()
        cap = rec.capture()
        assert rec.lost_events() == {cpu: 0}
    assert not inst.exists(), "instance must be removed"
    assert set(os.listdir(tracefs.path / "instances")) == before
    assert (tracefs.path / "trace_clock").read_text() == global_clock  # global untouched
    evs = cap.events(cpu)
    assert evs and all(e.cpu == cpu for e in evs)
    prints = [e for e in evs if e.name == "print"]
    assert prints and prints[0].fields["buf"].startswith("rtlab spike")
    # mono clock: event times are CLOCK_MONOTONIC
    assert abs(prints[0].ts - t0) < 50_000_000
    assert "sched/sched_switch" in rec.enabled_events


def test_instance_removed_on_exception(tracefs: TraceFS) -> None:
    rec = Recorder([0], tracefs=tracefs)
    with pytest.raises(RuntimeError), rec:
        raise RuntimeError("boom")
    assert rec.instance is not None and not rec.instance.exists()


def test_missing_events_are_reported(tracefs: TraceFS) -> None:
    with Recorder([0], tracefs=tracefs, events=["sched/sched_switch", "nosuch/event"]) as rec:
        assert rec.missing_events == ["nosuch/event"]
    with pytest.raises(SkippedError), Recorder([0], tracefs=tracefs, events=["nosuch/x"]):
        pass
