# SPDX-License-Identifier: MIT
"""End-to-end runs of `rtlab-probe overhead` (real SCHED_FIFO as root)."""

from __future__ import annotations

import os

import pytest

from .helpers import check_order, parse_lines, percentile_ns, run_probe, validate_all

US = 1_000


@pytest.mark.usefixtures("require_root")
def test_channels_plausible(probe_bin: str) -> None:
    r = run_probe(probe_bin, "overhead", "--loops", "3000", timeout=60)
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    check_order(recs)
    header, result = recs[0], recs[-1]
    assert header["effective"]["rt_valid"] is True
    cpu = header["config"]["cpu"]
    names = {ch["name"]: ch for ch in result["channels"]}
    expected = [f"clock@cpu{cpu}", f"syscall@cpu{cpu}", f"timer@cpu{cpu}", f"switch@cpu{cpu}"]
    if len(os.sched_getaffinity(0)) > 1:
        other = header["config"]["other_cpu"]
        expected.append(f"wake@cpu{other}->cpu{cpu}")
    assert list(names) == expected
    for ch in names.values():
        assert ch["samples"] == 3000, ch["name"]
        assert ch["missed"] == 0
    syscall = percentile_ns(names[f"syscall@cpu{cpu}"], 0.5)
    assert 50 <= syscall <= 100 * US
    clock = percentile_ns(names[f"clock@cpu{cpu}"], 0.5)
    assert clock < syscall  # a syscall costs more than reading the vDSO clock
    assert percentile_ns(names[f"switch@cpu{cpu}"], 0.5) > clock
    assert percentile_ns(names[f"timer@cpu{cpu}"], 0.5) < 10_000 * US


@pytest.mark.usefixtures("require_root")
def test_duration_mode(probe_bin: str) -> None:
    r = run_probe(probe_bin, "overhead", "--duration", "100ms", "--snapshot-interval", "100ms")
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    assert recs[0]["config"]["loops"] is None
    for ch in recs[-1]["channels"]:
        assert ch["samples"] > 0, ch["name"]


@pytest.mark.parametrize(
    "args",
    [["--loops", "0"], ["--duration", "1s", "--loops", "10"], ["--priority", "100"],
     ["--cpu", "4095"], ["--bogus"]],
)
def test_bad_args_exit_2(probe_bin: str, args: list[str]) -> None:
    r = run_probe(probe_bin, "overhead", *args)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
