# SPDX-License-Identifier: MIT
"""Real stress-ng loads: placement, verification, early death, stop on every exit path."""

from __future__ import annotations

import os
import time

import pytest

from rtlab.errors import SkippedError
from rtlab.loads import CommandLoad, LoadError, LoadSet, from_spec, proc, reap_recorded

from .conftest import Recorder

pytestmark = pytest.mark.usefixtures("stress_ng")


def _cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        st = proc.read_stat(pid)
        if st is not None:
            total += st.utime + st.stime
    return total


def _our_zombies() -> list[int]:
    me = os.getpid()
    return [st.pid for e in os.scandir("/proc") if e.name.isdigit()
            and (st := proc.read_stat(int(e.name))) is not None
            and st.ppid == me and st.state == "Z"]


def _assert_all_gone(rec: Recorder, loads: list) -> None:
    assert rec.leftovers() == []
    for load in loads:
        for p in load.procs:
            assert p.returncode is not None, "leader not reaped"
    assert _our_zombies() == []


def test_stress_on_cpu0_workers_pinned_and_busy(recorder: Recorder) -> None:
    load = from_spec({"kind": "stress", "cpu": 1, "cpus": "0"})
    with LoadSet([load], recorder, settle_s=0.3) as ls:
        (p,) = load.procs
        assert recorder.spawns == [(p.pgid, proc.starttime(p.pid))]
        workers = [w.pid for w in p.workers()]
        assert workers, "stress-ng started no workers"
        assert {proc.cpus_allowed(w) for w in workers} == {"0"}
        assert proc.cpus_allowed(p.pid) == "0"
        before = _cpu_ticks(workers)
        time.sleep(1.0)
        used = _cpu_ticks(workers) - before
        # a CPU hog gets most of a second even on a noisy 2-vCPU VM (100 ticks/s)
        assert used > 0.3 * os.sysconf("SC_CLK_TCK"), f"workers used only {used} ticks"
        assert ls.status()["ok"]
    d = load.describe()
    assert d["argv"][:5] == ["stress-ng", "--cpu", "1", "--taskset", "0"]
    assert d["cpus"] == [0] and d["policy"] == "other" and d["priority"] == 0
    assert d["pgid"] == d["pid"] and not d["died_early"] and d["status"] == "stopped"
    assert d["started_ns"] < d["stopped_ns"]
    _assert_all_gone(recorder, [load])


def test_stress_fifo_policy_applies_to_workers(recorder: Recorder, require_root: None) -> None:
    load = from_spec({"kind": "stress", "timer": 1, "timer_freq": 1000, "cpus": "1",
                      "policy": "fifo", "priority": 10})
    with LoadSet([load], recorder, settle_s=0.3):
        workers = [w.pid for w in load.procs[0].workers()]
        assert workers
        for w in workers:
            assert os.sched_getscheduler(w) == os.SCHED_FIFO
            assert os.sched_getparam(w).sched_priority == 10
    _assert_all_gone(recorder, [load])


def test_stop_on_exception(recorder: Recorder) -> None:
    load = from_spec({"kind": "stress", "cpu": 1, "vm": 1, "vm_bytes": "16M", "cpus": "0"})
    with pytest.raises(RuntimeError, match="boom"), LoadSet([load], recorder, settle_s=0.2):
        assert len(load.procs[0].workers()) >= 2
        raise RuntimeError("boom")
    _assert_all_gone(recorder, [load])
    assert not load.describe()["died_early"]


def test_stop_on_keyboard_interrupt(recorder: Recorder) -> None:
    loads = [from_spec({"kind": "stress", "cpu": 1, "cpus": "0"}),
             from_spec({"kind": "stress", "pipe": 1, "cpus": "1"})]
    with pytest.raises(KeyboardInterrupt), LoadSet(loads, recorder, settle_s=0.2):
        raise KeyboardInterrupt
    _assert_all_gone(recorder, loads)


def test_sigterm_ignored_escalates_to_sigkill(recorder: Recorder) -> None:
    load = CommandLoad(["sh", "-c", "trap '' TERM; sleep 30 & sleep 30 & wait"], workers=True)
    ls = LoadSet([load], recorder, settle_s=0.2, grace_s=0.5)
    with ls:
        assert len(load.procs[0].workers()) == 2
    assert ls.stop_result["killed"] == ["command"]
    _assert_all_gone(recorder, [load])


def test_load_that_ends_during_the_run_is_reported(recorder: Recorder) -> None:
    seen = []
    load = from_spec({"kind": "stress", "cpu": 1, "cpus": "0", "timeout": "1s"})
    with LoadSet([load], recorder, settle_s=0.2, watch_interval_s=0.1,
                 on_death=seen.append) as ls:
        deadline = time.monotonic() + 10
        while not ls.died() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ls.died() == [load]
        assert seen == [load]
        assert ls.status()["died"] == ["stress"] and not ls.status()["ok"]
    d = load.describe()
    assert d["died_early"] and d["status"] == "died" and d["exit_status"] == 0
    assert "successful run completed" in d["stderr_tail"]
    _assert_all_gone(recorder, [load])


def test_load_that_fails_to_start_is_died_early(recorder: Recorder) -> None:
    load = CommandLoad(["stress-ng", "--cpu", "1", "--no-such-option"], workers=True)
    with (pytest.raises(LoadError, match=r"died early \(exit status 1\)") as err,
          LoadSet([load], recorder, settle_s=0.2)):
        pytest.fail("must not get here")
    assert "stress-ng" in err.value.message
    d = load.describe()
    assert d["died_early"] and d["exit_status"] == 1
    assert "unrecognized option '--no-such-option'" in d["stderr_tail"]
    _assert_all_gone(recorder, [load])


def test_missing_tool_is_skipped_with_the_package(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: os.PathLike) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SkippedError) as err, LoadSet([from_spec({"kind": "stress", "cpu": 1})]):
        pass
    assert err.value.one_line() == "stress-ng is not installed (apt-get install stress-ng)"


def test_reap_recorded_checks_the_starttime(recorder: Recorder) -> None:
    load = from_spec({"kind": "stress", "cpu": 1, "cpus": "0"})
    with LoadSet([load], recorder, settle_s=0.2):
        (pgid, start) = recorder.spawns[0]
        assert reap_recorded(pgid, start + 1)["status"] == "mismatch"
        assert load.procs[0].poll() is None  # not touched
        result = reap_recorded(pgid, start)
        assert result["status"] == "reaped" and pgid in result["members"]
        assert proc.group_members(pgid) == []
    assert reap_recorded(pgid, start)["status"] == "gone"
    _assert_all_gone(recorder, [load])
