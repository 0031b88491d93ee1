# SPDX-License-Identifier: MIT
"""End-to-end runs of `rtlab-probe switch` (real SCHED_FIFO as root).

This VM's host stalls vCPUs for milliseconds many times a minute, so nothing
here asserts on a single maximum; the PI check uses an injected medium-priority
busy time and medians over rounds.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from .helpers import check_order, parse_lines, percentile_ns, run_probe, validate_all

MS = 1_000_000
MECHS = ["futex", "condvar", "pipe", "eventfd", "mq", "signal", "sysv-sem"]


def _run(probe_bin: str, *args: str) -> list[dict[str, Any]]:
    r = run_probe(probe_bin, "switch", *args, timeout=60)
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    check_order(recs)
    return recs


@pytest.mark.usefixtures("require_root")
def test_every_mechanism_same_and_cross(probe_bin: str) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    recs = _run(probe_bin, "--mechanism", "all", "--placement", "both", "--interval", "500us",
                "--duration", "1s", "--snapshot-interval", "300ms", "--no-order-check",
                "--no-pi-check")
    header, result = recs[0], recs[-1]
    assert header["effective"]["rt_valid"] is True
    assert result["status"] == "completed"
    cpu, waker = header["config"]["cpu"], header["config"]["waker_cpu"]
    names = {ch["name"]: ch for ch in result["channels"]}
    for m in MECHS:
        same, cross = names[f"{m}@cpu{cpu}"], names[f"{m}@cpu{waker}->cpu{cpu}"]
        # 1 s / 500 us / 7 mechanisms ~ 142 wake-ups each; every one is a sample or a miss
        for ch in (same, cross):
            assert ch["cpu"] == cpu
            assert ch["samples"] + ch["missed"] >= 120, ch["name"]
            assert ch["samples"] >= 100, ch["name"]
            assert 100 <= percentile_ns(ch, 0.5) < 5 * MS, ch["name"]
    # per-window maxima are there
    assert any(ch["windows"] for ch in result["channels"])
    # threads: waiters FIFO at the priority, the waker one below, busy runner SCHED_OTHER
    th = {t["channel"]: t for t in header["effective"]["threads"]}
    assert th[f"futex@cpu{cpu}"]["policy"] == "fifo" and th[f"futex@cpu{cpu}"]["priority"] == 90
    assert th[f"waker@cpu{waker}"]["priority"] == 89
    assert th[f"busy@cpu{cpu}"]["policy"] == "other"


@pytest.mark.usefixtures("require_root")
def test_loops_per_channel(probe_bin: str) -> None:
    recs = _run(probe_bin, "--mechanism", "futex,pipe", "--loops", "50", "--interval", "200us",
                "--no-order-check", "--no-pi-check")
    for ch in recs[-1]["channels"]:
        assert ch["samples"] + ch["missed"] >= 50
        assert ch["samples"] <= 50


@pytest.mark.usefixtures("require_root")
def test_order_and_pi_checks(probe_bin: str) -> None:
    recs = _run(probe_bin, "--mechanism", "futex", "--loops", "20", "--order-rounds", "5",
                "--pi-busy", "20ms", "--pi-hold", "500us", "--pi-rounds", "3", "--check-strict")
    checks = recs[-1]["checks"]
    assert checks["error"] is None
    order = checks["order"]
    assert order["verdict"] == "passed", order
    for run in order["finish_order"]:
        assert run == sorted(run, reverse=True) == order["priorities"]
    pi = checks["pi"]
    busy = 20 * MS
    assert pi["verdict"] == "passed" and pi["bounded"] is True
    # without PI the high thread waits for the whole medium busy time
    assert pi["without_pi_median_ns"] >= 0.8 * busy, pi
    # with PI it waits about the critical section, far below the busy time
    assert pi["with_pi_median_ns"] < busy / 4, pi
    assert pi["inversion_shown"] is True


@pytest.mark.parametrize(
    "args",
    [
        ["--mechanism", "futex,bogus"],
        ["--mechanism", ""],
        ["--placement", "sideways"],
        ["--interval", "1us"],
        ["--priority", "1"],
        ["--duration", "1s", "--loops", "5"],
        ["--pi-busy", "2ms", "--pi-hold", "1ms"],
        ["--cpu", "4095"],
        ["--order-workers", "99"],
    ],
)
def test_bad_args_exit_2(probe_bin: str, args: list[str]) -> None:
    r = run_probe(probe_bin, "switch", *args)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1


def test_help_lists_options(probe_bin: str) -> None:
    r = run_probe(probe_bin, "switch", "--help")
    assert r.returncode == 0
    for opt in ("--mechanism", "--placement", "--busy", "--check-strict", "--pi-busy"):
        assert opt in r.stdout
