# SPDX-License-Identifier: MIT
"""The engine load's duty-cycle spinner (`rtlab-probe load --cpu-duty ON/PERIOD`) and the
`builtin` load's `duty` key: checked before anything starts, passed to the engine, and
for real here: a FIFO 97 worker named rtlab-spin that uses about ON/PERIOD of its CPU."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from rtlab.loads import from_spec, validate

PROBE = os.environ.get("RTLAB_PROBE", "rtlab-probe")
CLK_TCK = os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize(("duty", "error"), [
    ("2ms", "builtin: duty = '2ms': not ON/PERIOD (two durations, e.g. \"2ms/20ms\": spin "
            "2ms every 20ms)"),
    ("2/20", "builtin: duty = '2/20': not ON/PERIOD (two durations with a unit ns|us|ms|s, "
             "e.g. \"2ms/20ms\")"),
    ("20ms/20ms", "builtin: duty = '20ms/20ms': ON must be at least 1us and shorter than "
                  "the period"),
    ("1us/50us", "builtin: duty = '1us/50us': the period is out of range; allowed 100us..10s"),
])
def test_builtin_duty_errors(duty: str, error: str) -> None:
    assert validate("builtin", {"cpu": 1, "duty": duty}) == [error]


def test_builtin_duty_needs_cpu_workers() -> None:
    assert validate("builtin", {"vm": 1, "duty": "2ms/20ms"}) == [
        "builtin: duty needs cpu workers; set cpu to a positive number"]


def test_builtin_duty_reaches_the_engine() -> None:
    load = from_spec({"kind": "builtin", "cpu": 1, "duty": "2ms/20ms", "cpus": "1",
                      "policy": "fifo", "priority": 97})
    args = load.load_args()  # type: ignore[attr-defined]
    assert args[:5] == ["load", "--cpu", "1", "--cpu-duty", "2ms/20ms"]
    assert args[-4:] == ["--policy", "fifo", "--priority", "97"]
    plain = from_spec({"kind": "builtin", "cpu": 2})
    assert "--cpu-duty" not in plain.load_args()  # type: ignore[attr-defined]


@pytest.mark.parametrize(("args", "needle"), [
    (["--cpu-duty", "2ms/20ms", "--vm", "1"], "--cpu-duty: only with --cpu N"),
    (["--cpu", "1", "--cpu-duty", "20ms/2ms"], "--cpu-duty: ON of '20ms/2ms' must be"),
])
def test_engine_refuses_bad_duty(args: list[str], needle: str) -> None:
    r = subprocess.run([PROBE, "load", *args], capture_output=True, text=True, timeout=30,
                       check=False)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO workers need root")
def test_duty_spinner_uses_on_over_period_at_fifo_97() -> None:
    cpu = max(os.sched_getaffinity(0))
    p = subprocess.Popen([PROBE, "load", "--cpu", "1", "--cpu-duty", "10ms/40ms", "--cpus",
                          str(cpu), "--policy", "fifo", "--priority", "97", "--duration",
                          "30s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        rec = json.loads(p.stdout.readline())
        assert rec["type"] == "load"
        assert rec["config"]["cpu_duty"] == {"on_ns": 10_000_000, "period_ns": 40_000_000,
                                             "comm": "rtlab-spin"}
        (w,) = rec["workers"]
        assert (w["kind"], w["policy"], w["priority"]) == ("cpu", "fifo", 97)
        pid = w["pid"]
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}/comm").read_text().strip() != "rtlab-spin":
            assert time.monotonic() < deadline, "the worker never named itself rtlab-spin"
            time.sleep(0.01)
        assert os.sched_getscheduler(pid) == os.SCHED_FIFO
        assert os.sched_getparam(pid).sched_priority == 97
        t0, c0 = time.monotonic(), _cpu_ticks(pid)
        time.sleep(1.5)
        t1, c1 = time.monotonic(), _cpu_ticks(pid)
        share = (c1 - c0) / CLK_TCK / (t1 - t0)
        # 25 % asked; generous bounds for a loaded 2-vCPU machine and 10 ms ticks,
        # far from both a worker that never sleeps (100 %) and one that never spins
        assert 0.08 < share < 0.6, share
    finally:
        p.terminate()
        out, _ = p.communicate(timeout=30)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["type"] == "load_result"
    (wr,) = result["workers"]
    assert wr["loops"] > 0 and "late" in wr
