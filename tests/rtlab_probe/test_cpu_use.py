# SPDX-License-Identifier: MIT
"""`cpu_use` of every channel (docs/engine-output.md): the CPU's busy time and the
measuring thread's own time, read together by the reporter; and the host's note for
a measured CPU shared with work nobody asked for (issue 12, item 4). The foreign work
is injected: a process spinning on the measured CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rtlab.analysis.cpushare import cpu_shares, shared_cpu_notes
from rtlab.engine.jsonl import StreamCollector
from rtlab.probes.registry import shape as probe_shape

from .helpers import parse_lines, run_probe, validate_all

CPU = 1 if (os.cpu_count() or 1) > 1 else 0


@pytest.fixture
def hog() -> Iterator[None]:
    """A SCHED_OTHER process spinning on CPU, for the whole test."""
    proc = subprocess.Popen([sys.executable, "-c", (
        "import os\n"
        f"os.sched_setaffinity(0, {{{CPU}}})\n"
        "while True: pass\n")])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def channels_of(out: str) -> list:
    col = StreamCollector()
    for line in out.splitlines(keepends=True):
        col.feed(line)
    return col.channels()


def test_timer_on_a_cpu_shared_with_a_spinning_process(probe_bin: str, hog: None) -> None:
    proc = run_probe(probe_bin, "timer", "--cpus", str(CPU), "--duration", "2s",
                     "--policy", "other", "--interval", "1ms")
    assert proc.returncode == 0, proc.stderr
    records = parse_lines(proc.stdout)
    validate_all(records)  # cpu_use is in the schema
    use = records[-1]["channels"][0]["cpu_use"]
    assert use is not None, "no schedstat on this kernel?"
    # the pair covers the run up to at most 100 ms (one reporter read) before its end
    assert 1.0e9 <= use["span_ns"] <= 2.5e9
    # the hog wants the whole CPU; a sleeping 1 kHz timer thread needs a few per cent
    assert use["thread_run_ns"] < 0.5 * use["span_ns"]
    (share,) = cpu_shares(channels_of(proc.stdout))
    assert share.cpu == CPU and share.share > 0.4, share
    (note,) = shared_cpu_notes(probe_shape("timer"), channels_of(proc.stdout), expected=set())
    assert note.startswith(f"CPU{CPU} was shared: other work")
    # a load placed there on purpose is expected: no note
    assert shared_cpu_notes(probe_shape("timer"), channels_of(proc.stdout), expected={CPU}) == []
    assert shared_cpu_notes(probe_shape("timer"), channels_of(proc.stdout), expected=None) == []


def test_the_measuring_threads_own_time_is_not_foreign() -> None:
    """Each measuring thread's run time is subtracted once, however many channels it
    feeds (udp: rtt and its parts); two threads on one CPU are both subtracted."""
    from rtlab.results.model import Channel

    def ch(name: str, cpu: int, tid: int, busy: int, run: int) -> Channel:
        return Channel(name, cpu=cpu, tid=tid, cpu_use={
            "span_ns": 1_000_000_000, "cpu_busy_ns": busy, "thread_run_ns": run,
            "thread_wait_ns": 0})

    spin = [ch("rtt", 1, 10, 960_000_000, 950_000_000),
            ch("stack", 1, 10, 960_000_000, 950_000_000)]  # one thread, two channels
    (s,) = cpu_shares(spin)
    assert s.other_ns == 10_000_000 and s.share == pytest.approx(0.01)
    assert shared_cpu_notes(probe_shape("udp"), spin, expected=set()) == []
    two = [ch("a", 2, 20, 900_000_000, 400_000_000), ch("b", 2, 21, 900_000_000, 300_000_000)]
    (s,) = cpu_shares(two)
    assert s.other_ns == 200_000_000
    (note,) = shared_cpu_notes(probe_shape("timer"), two, expected={1})
    assert note.startswith("CPU2 was shared: other work (tasks, interrupts or the "
                           "hypervisor) used 20% of it during the measurement (0.20 s of "
                           "1.00 s)")
    # probes whose partner threads have no channel are not judged this way
    assert shared_cpu_notes(probe_shape("switch"), two, expected=set()) == []
    # no record (an older engine, a kernel without schedstat): nothing to say
    assert cpu_shares([Channel("cpu0", cpu=0)]) == []


def test_run_notes_the_shared_cpu(probe_bin: str, hog: None, store_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from rtlab.cli import main
    from rtlab.results.store import Store

    monkeypatch.setenv("RTLAB_PROBE", probe_bin)
    code = main(["run", "--probe", "timer", "--cpus", str(CPU), "--duration", "2s",
                 "--policy", "other", "--no-progress", "--no-report"])
    assert code == 0
    (row,) = Store.open(str(store_path)).list()
    result = Store.open(str(store_path)).get(row.id)
    assert any(n.startswith(f"CPU{CPU} was shared: other work") for n in result.notes)
    assert result.phases[0].channels[0].cpu_use is not None  # kept in the stored result
