# SPDX-License-Identifier: MIT
"""End-to-end runs of `rtlab-probe interfere` (root: pinning, mlock).

The Amdahl test injects a known serial fraction (30 %) and asks the host fit
for 0.7 times the machine's own parallel fraction (measured next to it with no
serial part) within 0.1 on 1..2 CPUs. This 2-vCPU VM is noisy and shared with
other jobs, so the fit uses medians of 15 interleaved runs and the pair is
attempted up to five times; one attempt inside the tolerance passes.
"""

from __future__ import annotations

import os
import time

import pytest

from rtlab.probes.interfere import (
    AmdahlSummary,
    summarize_amdahl,
    summarize_pairs,
    summarize_sharing,
)

from .helpers import check_order, parse_lines, run_as_nobody, run_probe, validate_all

pytestmark = pytest.mark.usefixtures("require_root")

CLASSES = {"smt", "same_l2", "same_l3", "cross_l3"}


def _two_cpus() -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    return cpus[:2]


def _run(probe_bin: str, *args: str) -> list[dict]:
    r = run_probe(probe_bin, "interfere", *args, timeout=60)
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    check_order(recs)
    return recs


def test_amdahl_fit_recovers_serial_fraction(probe_bin: str) -> None:
    a, b = _two_cpus()

    def fit(serial_permille: int) -> tuple[AmdahlSummary, list[dict]]:
        # SCHED_FIFO workers: with SCHED_OTHER, any other load on the machine takes the
        # second CPU away and the 2-CPU time (so the fit) measures that load instead.
        recs = _run(probe_bin, "--mode", "amdahl", "--cpus", f"{a},{b}", "--repeats", "15",
                    "--serial-permille", str(serial_permille), "--policy", "fifo",
                    "--priority", "50")
        return summarize_amdahl(recs), recs

    # The fit is relative to the machine's own scaling, measured next to it without a
    # serial part: this VM's two vCPUs do not always give 2x (the host places them on
    # shared or separate cores: p = 0.78-0.98 with nothing serial), and Amdahl's law
    # then gives p = 0.7 x that for a 30 % serial part. Against 0.7 itself, five
    # attempts in a row once got 0.41-0.59 in a full-suite run. Each attempt takes
    # ~0.5 s; a host stall of a vCPU can spoil several in a row, so they are spread.
    fits = []
    for attempt in range(5):
        if attempt:
            time.sleep(1.0)
        base, _ = fit(0)
        s, recs = fit(300)
        assert [r.n for r in s.rows] == [1, 2] and all(r.runs == 15 for r in s.rows)
        assert s.serial_injected == pytest.approx(0.3)
        assert base.serial_injected == 0
        fits.append((round(s.p_fit, 3), round(base.p_fit, 3)))
        recovered = base.p_fit > 0.5 and abs(s.p_fit / base.p_fit - 0.7) < 0.1
        if recovered:
            break
    assert recovered, fits
    # the channel histograms hold the same runs
    res = recs[-1]
    assert [c["samples"] for c in res["channels"]] == [15, 15]


def test_sharing_false_sharing_costs_more(probe_bin: str) -> None:
    a, b = _two_cpus()
    # False sharing costs only while both threads run at the same time. With SCHED_OTHER,
    # any other load on the machine (a CPU hog, another test suite) takes turns with one
    # of the workers, so most of their batches ran alone: under a `stress-ng --cpu 1`
    # hog the 2-thread medians were equal (~5 ns/op each) and the comparison was a coin
    # toss. SCHED_FIFO workers cannot be interleaved with non-RT work, so the cause is
    # really injected: both lines bounce between the CPUs (~40 ns/op here, 8x percpu).
    recs = _run(probe_bin, "--mode", "sharing", "--cpus", f"{a},{b}", "--ops", "2000000",
                "--policy", "fifo", "--priority", "50")
    threads = recs[0]["effective"]["threads"]
    assert [t["policy"] for t in threads] == ["fifo", "fifo"], threads
    rows = {(r.variant, r.threads): r for r in summarize_sharing(recs)}
    assert set(rows) == {(v, n) for v in ("shared", "percpu", "false") for n in (1, 2)}
    # How many 2-thread batches really overlap depends on how the host runs the two
    # vCPUs: over 45 runs here the median of false sharing was 2.7-33 ns/op against
    # per-CPU's 2.4-3.2 (once in CI both 3.01), while its p99 was 19-51 ns/op against
    # 2.8-5.0, at least 4x in every run. The tail is where the bouncing line shows.
    false2, percpu2 = rows[("false", 2)], rows[("percpu", 2)]
    assert false2.p99_ns_per_op > 2 * percpu2.p99_ns_per_op, (false2, percpu2)


def test_pairs_classes_from_sysfs(probe_bin: str) -> None:
    a, b = _two_cpus()
    recs = _run(probe_bin, "--mode", "pairs", "--cpus", f"{a},{b}", "--repeats", "3",
                "--run-length", "10ms")
    rows, missing = summarize_pairs(recs)
    present = {r.pair_class for r in rows} - {"solo"}
    assert len(present) == 1 and present | set(missing) == CLASSES
    assert {r.workload for r in rows} == {"chase", "compute"}
    logs = [x for x in recs if x["type"] == "log" and x["code"] == "pair_class_missing"]
    assert len(logs) == len(missing)
    assert all(r.ratio > 0 for r in rows)


def test_unprivileged_allow_non_rt_runs(probe_bin: str) -> None:
    """As an unprivileged user with --allow-non-rt memory is still locked: the coordinator
    and the workers must have stacks that a user's RLIMIT_MEMLOCK can lock (the
    coordinator once had pthread's default 8 MiB and failed after the header)."""
    a, b = _two_cpus()
    r = run_as_nobody(probe_bin, "interfere", "--mode", "amdahl", "--cpus", f"{a},{b}",
                      "--repeats", "1", "--run-length", "1ms", "--policy", "rr",
                      "--allow-non-rt")
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    check_order(recs)
    eff = recs[0]["effective"]
    assert eff["mlock"]["locked"] is True and eff["rt_valid"] is False
    assert any(x["type"] == "log" and x["code"] == "no_rt" for x in recs)
    assert recs[-1]["status"] == "completed"


def test_usage_errors(probe_bin: str) -> None:
    for args in (["--mode", "nope"], ["--serial-permille", "1001"], ["--policy", "deadline"]):
        r = run_probe(probe_bin, "interfere", *args)
        assert r.returncode == 2, (args, r.stderr)
