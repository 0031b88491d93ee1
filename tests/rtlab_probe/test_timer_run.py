# SPDX-License-Identifier: MIT
"""End-to-end runs of `rtlab-probe timer` with real SCHED_FIFO (root).

This VM's host pauses vCPUs for 1-3 ms many times a minute (and ~45 ms now and
then), so no test asserts on a single maximum of an idle run; they assert on
structure, exact counts, and on disturbances the test itself injects.
"""

from __future__ import annotations

import bisect
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import (
    check_order,
    count_at_least,
    hist_count,
    parse_lines,
    read_line_raw,
    read_samples,
    run_probe,
    validate_all,
)

pytestmark = pytest.mark.usefixtures("require_root")

MS = 1_000_000


def _cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _missed(at_ns: int, value_ns: int, interval_ns: int, run_ns: int) -> int:
    """The periods a sample (woke at_ns after the start, value_ns late) overran: the
    deadlines it passed, up to the run's end; later ones are not the run's, so a wake-up
    late past the end misses fewer (engine/src/period.h)."""
    deadline = at_ns - value_ns
    return min(value_ns // interval_ns, (run_ns - deadline) // interval_ns)


def _read_until(proc: subprocess.Popen, n_snapshots: int, timeout: float = 10) -> str:
    """Read stdout lines until n_snapshots snapshot records were seen."""
    assert proc.stdout is not None
    out = []
    seen = 0
    deadline = time.monotonic() + timeout
    while seen < n_snapshots and time.monotonic() < deadline:
        line = read_line_raw(proc)
        if not line:
            break
        out.append(line)
        if '"type":"snapshot"' in line:
            seen += 1
    assert seen == n_snapshots, "".join(out)[-2000:]
    return "".join(out)


def test_run_schema_counts_windows_samples(probe_bin: str, tmp_path: Path) -> None:
    samples = tmp_path / "s.bin"
    r = run_probe(probe_bin, "timer", "--duration", "1500ms", "--snapshot-interval", "200ms",
                  "--window", "100ms", "--samples", str(samples))
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    check_order(recs)
    header, result = recs[0], recs[-1]
    snaps = [x for x in recs if x["type"] == "snapshot"]
    assert len(snaps) >= 5
    assert header["effective"]["rt_valid"] is True
    assert header["effective"]["mlock"]["locked"] is True
    cpus = _cpus()
    assert header["config"]["cpus"] == cpus
    for t in header["effective"]["threads"]:
        assert t["policy"] == "fifo" and t["priority"] == 99
        assert t["affinity"] == [t["cpu"]]
    assert result["status"] == "completed" and result["exit_code"] == 0

    total_written = 0
    for idx, ch in enumerate(result["channels"]):
        assert ch["name"] == f"cpu{cpus[idx]}"
        # every period is either a sample or a counted miss: 1500 periods of 1 ms
        assert ch["samples"] + ch["missed"] == 1500
        assert hist_count(ch) == ch["samples"]
        assert ch["min_ns"] <= ch["sum_ns"] // ch["samples"] <= ch["max_ns"]
        # windows: each completed window appears exactly once over all
        # snapshots plus the result; together they cover every sample
        wins = [w for s in snaps for w in s["channels"][idx]["windows"]] + ch["windows"]
        indexes = [w[0] for w in wins]
        assert indexes == sorted(set(indexes))
        assert sum(w[2] for w in wins) == ch["samples"]
        assert max(w[1] for w in wins) == ch["max_ns"]
        top = max(wins, key=lambda w: w[1])
        assert top[0] == ch["max_at_ns"] // (100 * MS)
        assert ch["windows_lost"] == 0
        # snapshots are cumulative
        counts = [s["channels"][idx]["samples"] for s in snaps] + [ch["samples"]]
        assert counts == sorted(counts)
        total_written += ch["samples"] - ch["ring_lost"]

    recs_bin = read_samples(samples)
    assert result["samples_file"]["written"] == len(recs_bin) == total_written
    for idx, ch in enumerate(result["channels"]):
        mine = [(at, v) for c, at, v in recs_bin if c == idx]
        assert len(mine) == ch["samples"] - ch["ring_lost"]
        assert max(v for _, v in mine) == ch["max_ns"]
        assert sum(v for _, v in mine) == ch["sum_ns"]
        assert [at for at, _ in mine] == sorted(at for at, _ in mine)
        # missed is exactly the whole periods each sample overran, within the run
        assert sum(_missed(at, v, MS, 1500 * MS) for at, v in mine) == ch["missed"]


def test_loops_and_other_policy(probe_bin: str) -> None:
    cpu = _cpus()[-1]
    r = run_probe(probe_bin, "timer", "--cpus", str(cpu), "--loops", "200", "--interval",
                  "500us", "--policy", "other", "--no-mlock")
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    ch = recs[-1]["channels"][0]
    assert ch["samples"] == 200
    assert recs[0]["effective"]["threads"][0]["policy"] == "other"
    assert recs[0]["effective"]["mlock"] == {"requested": False, "locked": False, "error": None}


def test_threshold_exit_3(probe_bin: str) -> None:
    r = run_probe(probe_bin, "timer", "--duration", "5s", "--threshold", "1us")
    assert r.returncode == 3, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    res = recs[-1]
    assert res["status"] == "threshold" and res["exit_code"] == 3
    hit = res["threshold_hit"]
    assert hit["latency_ns"] > 1000
    ch = next(c for c in res["channels"] if c["name"] == hit["channel"])
    assert ch["max_ns"] >= hit["latency_ns"]
    assert res["elapsed_ns"] < 2_000_000_000  # stopped at once, not after 5 s


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_exit_130(probe_bin: str, sig: int) -> None:
    proc = subprocess.Popen([probe_bin, "timer", "--snapshot-interval", "100ms"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = _read_until(proc, 2)
    proc.send_signal(sig)
    rest, err = proc.communicate(timeout=10)
    assert proc.returncode == 130, err
    recs = parse_lines(head + rest)
    validate_all(recs)
    check_order(recs)
    assert recs[-1]["status"] == "interrupted" and recs[-1]["exit_code"] == 130
    assert all(c["samples"] > 100 for c in recs[-1]["channels"])


def test_kill9_leaves_valid_prefix(probe_bin: str) -> None:
    proc = subprocess.Popen([probe_bin, "timer", "--snapshot-interval", "50ms"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = _read_until(proc, 3)
    time.sleep(0.12)
    proc.kill()
    rest, _ = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    recs = parse_lines(head + rest)
    validate_all(recs)
    check_order(recs, complete=False)
    last = [x for x in recs if x["type"] == "snapshot"][-1]
    assert last["seq"] >= 3
    for ch in last["channels"]:
        assert ch["samples"] > 0 and hist_count(ch) == ch["samples"]


def _nobody(cmd: list[str]) -> list[str]:
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]


def test_skipped_without_privilege_exit_4(probe_bin: str) -> None:
    if not os.access(probe_bin, os.X_OK) or os.stat(probe_bin).st_mode & 0o001 == 0:
        pytest.skip("probe binary not executable by others")
    r = subprocess.run(_nobody([probe_bin, "timer", "--loops", "10"]), capture_output=True,
                       text=True, timeout=20, check=False, cwd="/")
    if "Permission denied" in r.stderr and "exec" in r.stderr:
        pytest.skip("nobody cannot reach the probe binary: " + r.stderr.strip())
    assert r.returncode == 4, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1
    assert "skipped:" in lines[0] and "--allow-non-rt" in lines[0]
    assert "CAP_SYS_NICE" in lines[0] or "CAP_IPC_LOCK" in lines[0]


def test_deadline_refused_to_root_names_the_root_domain(probe_bin: str) -> None:
    """Regression: a SCHED_DEADLINE thread pinned to one CPU of a bigger root domain is
    refused (EPERM) also to root; the line said "run as root or grant CAP_SYS_NICE"."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the refusal to a privileged thread is the case")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs in this process's root domain")
    r = subprocess.run([probe_bin, "timer", "--policy", "deadline", "--cpus", "1",
                        "--interval", "1ms", "--duration", "1s"], capture_output=True,
                       text=True, timeout=30, check=False)
    if r.returncode == 0:
        pytest.skip("CPU 1 is a root domain of its own here (an exclusive cpuset)")
    assert r.returncode == 4, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert "SCHED_DEADLINE on CPU 1" in lines[0] and "root domain" in lines[0], lines[0]
    assert "CAP_SYS_NICE" not in lines[0]


def test_allow_non_rt_reports_invalid(probe_bin: str) -> None:
    r = subprocess.run(_nobody([probe_bin, "timer", "--loops", "20", "--allow-non-rt",
                                "--no-mlock"]),
                       capture_output=True, text=True, timeout=20, check=False, cwd="/")
    if r.returncode == 126 or "Permission denied" in r.stderr:
        pytest.skip("nobody cannot reach the probe binary")
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    assert recs[0]["effective"]["rt_valid"] is False
    assert any(x["type"] == "log" and x["code"] == "no_rt" for x in recs)
    assert all(t["errors"] for t in recs[0]["effective"]["threads"])
    assert all(c["samples"] == 20 for c in recs[-1]["channels"])


# The injected disturbance: a SCHED_FIFO process above the probe's priority, on
# the measured CPU, spins from just before a probe deadline p until
# p + D - 50 us, every PERIOD_N periods. The probe's wake-up at p is therefore
# late by about D - 50 us (+ its own wake-up latency), and the deadlines
# p + 1 ms and p + 2 ms have passed: 2 = D/interval - 1 missed periods each.
DISTURBER = r"""
import os, sys, time
cpu, prio, start, interval, d_ns, period_n, count, lead = map(int, sys.argv[1:])
os.sched_setaffinity(0, {cpu})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
clk = time.CLOCK_MONOTONIC
k = (time.clock_gettime_ns(clk) - start) // interval + lead
done = 0
while done < count:
    p = start + k * interval
    wake = p - 400_000
    now = time.clock_gettime_ns(clk)
    if wake > now:
        time.sleep((wake - now) / 1e9)
    end = p + d_ns - 50_000
    began = time.clock_gettime_ns(clk)
    while time.clock_gettime_ns(clk) < end:
        pass
    print(p - start, int(began < p), flush=True)
    done += 1
    k += period_n
"""


def test_injected_disturbance(probe_bin: str, tmp_path: Path) -> None:
    cpu = _cpus()[-1]
    d_ns = 3 * MS
    bursts = 20
    period_n = 150  # one burst every 150 ms
    run_ns = 3800 * MS
    samples = tmp_path / "s.bin"
    probe = subprocess.Popen(
        [probe_bin, "timer", "--cpus", str(cpu), "--priority", "50", "--interval", "1ms",
         "--duration", f"{run_ns // MS}ms", "--samples", str(samples)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert probe.stdout is not None
    header_line = read_line_raw(probe)
    recs = parse_lines(header_line)
    assert recs and recs[0]["type"] == "header", probe.stderr.read() if probe.stderr else ""
    start = recs[0]["start_monotonic_ns"]
    dist = subprocess.run(
        [sys.executable, "-c", DISTURBER, str(cpu), "60", str(start), str(MS), str(d_ns),
         str(period_n), str(bursts), "100"],
        capture_output=True, text=True, timeout=20, check=False)
    rest, err = probe.communicate(timeout=20)
    assert dist.returncode == 0, dist.stderr
    # each burst: its period (deadline relative to the start) and whether the
    # disturber was spinning before it (a disturber woken late by a host stall or
    # another run's RT work on this CPU only delays later periods)
    made = [tuple(int(x) for x in line.split()) for line in dist.stdout.splitlines()]
    assert len(made) == bursts
    on_time = [at for at, ok in made if ok]
    # the disturber wakes 0.4 ms before its period: a host pause of the vCPU (1-3 ms,
    # many times a minute here) makes a burst late now and then (3 of 20 in one
    # clean-clone run); the checks below use the bursts that were on time, at least half
    assert len(on_time) >= bursts // 2, made
    assert probe.returncode == 0, err
    recs = parse_lines(header_line + rest)
    validate_all(recs)
    ch = recs[-1]["channels"][0]

    # 1. the injected cause is seen: max >= 0.95 D
    assert ch["max_ns"] >= 0.95 * d_ns
    # 2. each burst holds back the probe's wake-up that is due when it starts: the
    #    sample of the last deadline at or before the burst's period (found by its
    #    deadline at_ns - value_ns in the samples file, not by counting large samples)
    #    wakes only after >= 0.9 D of the burst, so its value is >= 0.9 D too. That
    #    deadline is the burst's own period, or an earlier one when the probe's wake-up
    #    for it was still pending when the disturber began 0.4 ms before its period:
    #    wake-ups 0.2-0.9 ms late are common on this VM (10-25 % of runs had such a
    #    burst, where a check of the burst's own period found no sample of it).
    samples_ = read_samples(samples)
    assert ch["ring_lost"] == 0 and len(samples_) == ch["samples"]
    timeline = sorted((at - v, at, v) for _c, at, v in samples_)
    deadlines = [d for d, _at, _v in timeline]
    before = [bisect.bisect_right(deadlines, p_ns) for p_ns in on_time]
    assert min(before) > 0, "a burst before the probe's first sample"
    covering = [timeline[i - 1] for i in before]
    short = [(p_ns, c) for p_ns, c in zip(on_time, covering, strict=True)
             if c[1] < p_ns + 0.9 * d_ns]
    near = "; ".join(
        f"burst {p_ns / MS:g} ms: " + " ".join(
            f"{d / MS:g}@{at / MS:.3f}" for d, at, _v in timeline
            if p_ns - 6 * MS <= d <= p_ns + 6 * MS) for p_ns, _c in short)
    assert not short, (f"{len(short)} of {len(on_time)} bursts did not hold back the "
                       f"probe; samples near them (deadline@woke, ms): {near}")
    burst_vals = [v for _d, _at, v in covering]
    assert len({d for d, _at, _v in covering}) == len(on_time)
    assert count_at_least(ch, int(0.9 * d_ns)) >= len(on_time)
    # 3. missed: each burst costs at least D/interval - 1 = 2 periods (more when
    #    something else delayed the wake-up further); every sample's misses are
    #    known exactly from the samples file
    assert sum(_missed(at, v, MS, run_ns) for _c, at, v in samples_) == ch["missed"]
    assert all(v // MS >= d_ns // MS - 1 for v in burst_vals)
    assert ch["missed"] >= len(on_time) * (d_ns // MS - 1)
