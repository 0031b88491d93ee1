# SPDX-License-Identifier: MIT
"""`rtlab monitor --listen` for real: stalls of known length injected on the measured CPU
(a SCHED_FIFO 99 process spinning D ms) between two scrapes appear in the next scrape
(running and recent maxima at least D, missed periods counted), the histogram adds up,
the port in use is one line, and a restarted monitor continues its counters."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.paths import REPO, SPINNER

CPU = 1
TOL_S = 0.003  # the stall is D of spinning; the thread wakes at most a few ms earlier


@pytest.fixture
def env(probe_bin: str, tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, RTLAB_PROBE=probe_bin, PYTHONPATH=str(REPO),
                XDG_DATA_HOME=str(tmp_path / "xdg"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(env: dict[str, str], tmp_path: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rtlab", "monitor", "--cpus", str(CPU), "--interval", "1ms",
         "--segment", "1h", "--listen", f"127.0.0.1:{port}", "--state-dir",
         str(tmp_path / "state"), "--store", str(tmp_path / "store.db")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def scrape(port: int) -> dict[str, list]:
    """{sample name: [(labels, value), ...]} of one scrape."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(m: dict[str, list], name: str, **labels: str) -> float | None:
    for lab, v in m.get(name, []):
        if all(lab.get(k) == want for k, want in labels.items()):
            return float(v)
    return None


def wait_scrape(port: int, cond, timeout: float, what: str) -> dict[str, list]:  # type: ignore[no-untyped-def]
    t_end = time.monotonic() + timeout
    last: dict[str, list] = {}
    while time.monotonic() < t_end:
        try:
            last = scrape(port)
            if cond(last):
                return last
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}: {last.get('rtlab_samples_total')}")


def stall(ms: int) -> None:
    """Spin `ms` ms at SCHED_FIFO 99 on CPU (the monitor's thread runs at 80)."""
    subprocess.run([sys.executable, str(SPINNER), str(CPU), "99", str(ms * 1000), "1",
                    "0.0001"], check=True, timeout=30)


def test_stalls_between_scrapes_appear_and_counts_add_up(require_root: None,
                                                         env: dict[str, str],
                                                         tmp_path: Path) -> None:
    port = free_port()
    proc = start(env, tmp_path, port)
    try:
        s1 = wait_scrape(port, lambda m: (value(m, "rtlab_samples_total", cpu=str(CPU)) or 0)
                         > 500, 60, "samples")
        assert value(s1, "rtlab_board_up", board="local") == 1.0
        assert value(s1, "rtlab_board_info", board="local", kernel=os.uname().release) == 1.0
        missed1 = value(s1, "rtlab_missed_periods_total", cpu=str(CPU)) or 0
        for d_ms in (30, 45):
            stall(d_ms)  # between two scrapes: no scrape sees it happen
            seen = wait_scrape(
                port, lambda m, d=d_ms: (value(m, "rtlab_latency_recent_max_seconds",
                                               cpu=str(CPU)) or 0) >= d / 1000 - TOL_S,
                15, f"the {d_ms} ms stall in the recent maximum")
            assert (value(seen, "rtlab_latency_max_seconds", cpu=str(CPU)) or 0) \
                >= d_ms / 1000 - TOL_S
        s2 = scrape(port)
        # the stalled wake-ups missed about D/interval periods each
        missed2 = value(s2, "rtlab_missed_periods_total", cpu=str(CPU)) or 0
        assert missed2 - missed1 >= 25 + 40
        # the histogram adds up: count == samples, cumulative buckets, +Inf == count
        count = value(s2, "rtlab_latency_seconds_count", cpu=str(CPU))
        assert count == value(s2, "rtlab_samples_total", cpu=str(CPU))
        buckets = sorted((float(lab["le"]), v) for lab, v in s2["rtlab_latency_seconds_bucket"]
                         if lab.get("cpu") == str(CPU))
        assert all(a[1] <= b[1] for a, b in itertools.pairwise(buckets))
        assert buckets[-1][0] == float("inf") and buckets[-1][1] == count
        at_least_stall = count - max(v for le, v in buckets if le < 0.045 - TOL_S)
        assert at_least_stall >= 1  # the 45 ms wake-up is in a bucket above 42 ms
        assert value(s2, "rtlab_latency_seconds_sum", cpu=str(CPU)) > 0.075
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 130, proc.stderr.read() if proc.stderr else ""

    # a restarted monitor continues its counters from the checkpoint
    proc = start(env, tmp_path, port)
    try:
        s3 = wait_scrape(port, lambda m: value(m, "rtlab_samples_total", cpu=str(CPU))
                         is not None, 60, "the restarted exporter")
        assert (value(s3, "rtlab_samples_total", cpu=str(CPU)) or 0) \
            >= (value(s2, "rtlab_samples_total", cpu=str(CPU)) or 0)
        assert (value(s3, "rtlab_latency_max_seconds", cpu=str(CPU)) or 0) >= 0.045 - TOL_S
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def test_port_in_use_is_one_line_and_exit_1(require_root: None, env: dict[str, str],
                                            tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "rtlab", "monitor", "--cpus", str(CPU),
                            "--listen", f"127.0.0.1:{port}", "--duration", "5s",
                            "--state-dir", str(tmp_path / "state"), "--store",
                            str(tmp_path / "s.db")], env=env, capture_output=True, text=True,
                           timeout=60)
    assert r.returncode == 1, r.stderr
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("rtlab: error")]
    assert len(lines) == 1 and "already in use" in lines[0] and "--listen" in lines[0]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "s.db").exists()  # nothing measured, nothing stored
    assert not (tmp_path / "state").exists()  # the port was refused before the state dir


def test_bad_listen_is_a_usage_error(env: dict[str, str], tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "rtlab", "monitor", "--listen", "localhost:http",
                        "--state-dir", str(tmp_path / "state")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "--listen" in line or "localhost:http" in line
    assert not (tmp_path / "state").exists()
