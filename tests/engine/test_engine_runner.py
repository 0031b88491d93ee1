# SPDX-License-Identifier: MIT
"""The JSONL reader and the run lifecycle against a misbehaving fake engine."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rtlab.engine import StreamCollector, UnknownSchemaError
from rtlab.engine.argv import probe_args
from rtlab.engine.session import EngineSession
from rtlab.engine.transport import LocalTransport
from rtlab.errors import RtlabError, SkippedError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
from rtlab.runner import Privileges, RunOptions, run_scenario
from rtlab.scenario import quick

HDR = {"type": "header", "schema": 1, "probe": "timer", "config": {"window_ns": 1000},
       "effective": {"rt_valid": True}, "system": {"hostname": "h"}}


def chan(samples: int, windows: list[list[int]]) -> dict:
    return {"name": "cpu0", "cpu": 0, "tid": 1, "samples": samples, "missed": 0,
            "min_ns": 10, "max_ns": 20, "sum_ns": 15 * samples, "max_at_ns": 5,
            "hist": {"layout": "loglin", "sub_bits": 7, "buckets": [[15, samples]]},
            "windows": windows, "windows_lost": 0, "ring_lost": 0}


def line(rec: dict) -> str:
    return json.dumps(rec) + "\n"


def test_collector_counts_corrupt_and_truncated_lines() -> None:
    col = StreamCollector()
    feed = [
        line(HDR),
        "not json\n",
        '{"type": "snapshot"}\n',  # no schema
        '["a list"]\n',
        line({"type": "snapshot", "schema": 1, "seq": 1, "elapsed_ns": 1000,
              "channels": [chan(5, [[0, 20, 5]])]}),
        line({"type": "snapshot", "schema": 1, "seq": 2, "elapsed_ns": 2000,
              "channels": [{"name": "cpu0"}]}),  # structurally bad
        line({"type": "future-thing", "schema": 1}),
        line({"type": "snapshot", "schema": 1, "seq": 3, "elapsed_ns": 3000,
              "channels": [chan(9, [[1, 18, 4]])]}),
        '{"type": "result", "schema": 1, "sta',  # died inside write(2)
    ]
    for item in feed:
        col.feed(item)
    assert col.stream.corrupt_lines == 4
    assert col.stream.truncated_tail
    assert col.stream.snapshots == 2 and col.stream.ignored_records == 1
    assert col.result is None
    (ch,) = col.channels()
    assert ch.samples == 9 and ch.windows == [(0, 20, 5), (1, 18, 4)] and ch.window_ns == 1000
    notes = " ".join(col.loss_notes())
    assert "4 corrupt" in notes and "truncated" in notes and "no final engine result" in notes


def test_unknown_schema_is_refused() -> None:
    col = StreamCollector()
    with pytest.raises(UnknownSchemaError, match="schema 2"):
        col.feed(line({**HDR, "schema": 2}))


def test_probe_args_are_generic() -> None:
    args = probe_args("timer", {"cpus": [0, 1, 2, 5], "interval_ns": 1_500_000, "priority": 99,
                                "allow_non_rt": True, "threshold_ns": None,
                                "samples_file": "/x", "snapshot_interval_ns": 10**9})
    assert args == ["timer", "--allow-non-rt", "--cpus", "0-2,5", "--interval", "1500us",
                    "--priority", "99", "--samples", "/x", "--snapshot-interval", "1s"]


def _opts(store_path: Path, **kw: object) -> RunOptions:
    return RunOptions(store=Store.open(str(store_path)), command_line=["test"],
                      handle_signals=False, **kw)  # type: ignore[arg-type]


def test_progress_reports_each_snapshot(
    fake_probe: Callable[..., Path], store_path: Path
) -> None:
    fake_probe("normal")
    seen: list[tuple[int, int]] = []
    opts = _opts(store_path, on_progress=lambda p: seen.append(
        (p.elapsed_ns, sum(ch.samples for ch in p.channels))))
    out = run_scenario(quick(duration_ns=3 * 10**9, cpus=[0, 1]), opts)
    assert out.exit_code == ExitCode.OK
    assert [e for e, _ in seen] == [10**9, 2 * 10**9, 3 * 10**9, 3 * 10**9]  # 3 snapshots + result
    assert [n for _, n in seen] == [1000, 2000, 3000, 3000]


def test_crash_keeps_last_snapshot(fake_probe: Callable[..., Path], store_path: Path) -> None:
    fake_probe("crash", crash_after=2)
    out = run_scenario(quick(duration_ns=10**10, cpus=[0]), _opts(store_path))
    assert out.exit_code == ExitCode.ERROR
    r = out.result
    assert r.status == "partial" and r.partial
    assert r.merged(probe_shape(r.probe)).samples == 2 * 500
    assert any("SIGSEGV" in n for n in r.notes)
    assert Store.open(str(store_path)).get(r.run_id).partial


def test_truncated_output_is_reported(fake_probe: Callable[..., Path], store_path: Path) -> None:
    fake_probe("truncate", crash_after=1)
    out = run_scenario(quick(duration_ns=10**10, cpus=[0, 1]), _opts(store_path))
    r = out.result
    assert r.partial and r.stream.truncated_tail and r.stream.snapshots == 1
    assert any("truncated" in n for n in r.notes)


def test_corrupt_lines_are_counted(fake_probe: Callable[..., Path], store_path: Path) -> None:
    fake_probe("corrupt")
    out = run_scenario(quick(duration_ns=3 * 10**9, cpus=[0]), _opts(store_path))
    assert out.exit_code == ExitCode.OK and out.result.status == "completed"
    assert out.result.stream.corrupt_lines == 4
    assert any("4 corrupt" in n for n in out.result.notes)


def test_silent_engine_is_killed_by_watchdog(
    fake_probe: Callable[..., Path], store_path: Path
) -> None:
    fake_probe("hang", crash_after=1)  # also ignores SIGTERM: needs SIGKILL
    t0 = time.monotonic()
    out = run_scenario(quick(duration_ns=10**10, cpus=[0]), _opts(store_path, watchdog_s=1.0))
    assert time.monotonic() - t0 < 6
    r = out.result
    assert out.exit_code == ExitCode.ERROR and r.partial
    assert r.merged(probe_shape(r.probe)).samples == 500
    assert any("watchdog" in n for n in r.notes)


def test_engine_ignoring_sigint_is_killed_after_grace(
    fake_probe: Callable[..., Path], tmp_path: Path
) -> None:
    wrapper = fake_probe("ignore_int", period=0.05)
    session = EngineSession(LocalTransport(wrapper),
                            probe_args("timer", {"cpus": [0], "duration_ns": 60 * 10**9}),
                            tmp_path / "raw.jsonl", watchdog_s=10, stop_grace_s=0.5)
    threading.Timer(0.5, session.request_stop).start()
    t0 = time.monotonic()
    out = session.run()
    assert time.monotonic() - t0 < 5
    assert out.stop_signal == signal.SIGINT and out.killed and out.exit_code == -9
    assert any("did not stop within 0.5 s of SIGINT" in n for n in out.notes)
    assert out.collector.stream.snapshots >= 1 and out.collector.result is None
    # the raw stream was written as it arrived
    assert (tmp_path / "raw.jsonl").read_text().count("\n") == out.collector.line_no


def test_engine_error_result_is_failed(fake_probe: Callable[..., Path], store_path: Path) -> None:
    fake_probe("error")
    out = run_scenario(quick(duration_ns=2 * 10**9, cpus=[0]), _opts(store_path))
    assert out.exit_code == ExitCode.ERROR and out.result.status == "failed"
    assert any("fake failure" in n for n in out.result.notes)


@pytest.mark.parametrize(
    ("mode", "exc", "text"),
    [("skip", SkippedError, "Operation not permitted"),
     ("usage", UsageError, "CPU 7 is not online"),
     ("silent_fail", RtlabError, "out of memory"),
     ("schema", UnknownSchemaError, "schema 99")],
)
def test_engine_failures_before_measuring(
    fake_probe: Callable[..., Path], store_path: Path, mode: str, exc: type, text: str
) -> None:
    fake_probe(mode)
    with pytest.raises(exc, match=text):
        run_scenario(quick(duration_ns=10**9, cpus=[0]), _opts(store_path))
    store = Store.open(str(store_path))
    assert store.list() == []


def test_preflight_failure_stops_before_spawning(
    fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path
) -> None:
    argv_file = tmp_path / "argv.json"
    fake_probe("normal", argv_out=argv_file)
    denied = Privileges(False, True, ["cannot get SCHED_FIFO priority 99 (Operation not "
                                      "permitted; RLIMIT_RTPRIO is 0)"])
    with pytest.raises(SkippedError) as info:
        run_scenario(quick(duration_ns=10**9, cpus=[0]),
                     _opts(store_path, preflight=lambda _p, _q: denied))
    assert info.value.code == ExitCode.SKIPPED
    msg = info.value.one_line()
    assert "SCHED_FIFO" in msg and "ulimit -r 99" in msg and "--allow-non-rt" in msg
    assert not argv_file.exists()
    # with --allow-non-rt it measures, passes the flag on and marks the result
    out = run_scenario(quick(duration_ns=10**9, cpus=[0]),
                       _opts(store_path, preflight=lambda _p, _q: denied, allow_non_rt=True))
    assert "--allow-non-rt" in json.loads(argv_file.read_text())
    assert out.result.rt_valid is False


def test_allow_non_rt_verdict(
    fake_probe: Callable[..., Path], store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rtlab.cli import main

    fake_probe("normal")
    assert main(["run", "--duration", "1s", "--allow-non-rt", "--no-progress"]) == 0
    assert "NOT real-time valid" in capsys.readouterr().out


@pytest.mark.parametrize(("grace_s", "fired"), [(0.0, True), (10.0, False)])
def test_start_grace_lets_a_slow_start_speak_first(tmp_path: Path, grace_s: float,
                                                   fired: bool) -> None:
    """An engine that says nothing for a while before its first line (a board allocating a
    large trace buffer) is stopped by the watchdog only without a start grace; the watchdog
    still holds once it has spoken."""
    slow = tmp_path / "slow-engine"
    slow.write_text("#!/bin/sh\nsleep 2.5\necho '{\"type\": \"log\"}'\n")
    slow.chmod(0o755)
    session = EngineSession(LocalTransport(slow), ["timer"], tmp_path / "raw.jsonl",
                            watchdog_s=1.0, kill_grace_s=0.5, start_grace_s=grace_s)
    out = session.run()
    assert out.watchdog_fired is fired, out.notes
    if not fired:
        assert out.exit_code == 0 and (tmp_path / "raw.jsonl").read_text()
