# SPDX-License-Identifier: MIT
"""Real injected causes on this machine: each must be named for most spikes above a threshold.

The engine's timer probe measures CPU 1 and records its tracepoints itself (`--trace-dir`,
the recorder of `rtlab run --trace`); its samples are attributed as the runner does.

Spikes that are mostly unexplained (host/hypervisor stalls on a VM) are not the injected
cause and are left out of the majority count; they must not fail the tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.errors import SkippedError
from rtlab.trace.attribution import attribute_run
from rtlab.trace.causes import Cause, Spike
from rtlab.trace.tracefs import TraceFS
from tests.support.paths import SPINNER

from .injected import CPU, host_stall, measure

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(autouse=True)
def tracefs(require_root: None) -> None:
    try:
        tfs = TraceFS.find_or_mount()
    except SkippedError as exc:
        pytest.skip(exc.one_line())
    yield
    tfs.unmount_if_ours()


def majority(causes: list[Cause], named: object) -> tuple[int, int]:
    real = [c for c in causes if not host_stall(c)]
    return sum(1 for c in real if named(c)), len(real)  # type: ignore[operator]


def test_fifo99_spinner_is_named(tmp_path: Path) -> None:
    def load() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, str(SPINNER), str(CPU), "99", "2000", "100", "30"]
        )

    causes, meta = measure(tmp_path, threshold_ns=500_000, load=load)
    pid = meta["load_pid"]

    def named(c: Cause) -> bool:
        tasks = [t for t in c.by_kind("task") if t.ident == pid]
        return (
            bool(tasks) and tasks[0].duration_ns * 2 > c.latency_ns and c.top().startswith("task ")
        )

    hits, n = majority(causes, named)
    assert n >= 5, f"expected spikes from the spinner, got {[c.summary() for c in causes]}"
    assert hits * 2 > n, [c.summary() for c in causes]
    assert all("rt99" in c.top() for c in causes if named(c))


NS_A, NS_B = f"rtlt-{os.getpid()}-a", f"rtlt-{os.getpid()}-b"  # this test run's own


@pytest.fixture
def veth_pair() -> str:
    if not shutil.which("ip"):
        pytest.skip("iproute2 not installed")
    cmds = [
        f"ip netns add {NS_A}",
        f"ip netns add {NS_B}",
        f"ip link add rtlt0 netns {NS_A} type veth peer name rtlt1 netns {NS_B}",
        f"ip -n {NS_A} addr add 10.251.0.1/24 dev rtlt0",
        f"ip -n {NS_B} addr add 10.251.0.2/24 dev rtlt1",
        f"ip -n {NS_A} link set rtlt0 up",
        f"ip -n {NS_B} link set rtlt1 up",
    ]
    try:
        for c in cmds:
            subprocess.run(c.split(), check=True, capture_output=True)
        yield "10.251.0.2"
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create network namespaces: {exc.stderr!r}")
    finally:
        for ns in (NS_A, NS_B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def test_udp_storm_softirq_is_named(tmp_path: Path, veth_pair: str) -> None:
    rx = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            NS_B,
            sys.executable,
            "-c",
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"s.bind(('{veth_pair}', 9999))\nwhile True: s.recv(65536)",
        ]
    )
    sender = (
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"b = b'x' * 60000\nwhile True: s.sendto(b, ('{veth_pair}', 9999))"
    )

    def load() -> subprocess.Popen[bytes]:  # the sender runs NET_RX of the peer on CPU
        return subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                NS_A,
                "taskset",
                "-c",
                str(CPU),
                sys.executable,
                "-c",
                sender,
            ]
        )

    def named(c: Cause) -> bool:
        return any(
            s.name in ("NET_RX", "NET_TX") and s.duration_ns > 0 for s in c.by_kind("softirq")
        )

    def mostly_net(c: Cause) -> bool:  # one NET_RX/NET_TX softirq share is most of it
        return not host_stall(c) and 2 * max(
            (s.duration_ns for s in c.by_kind("softirq") if s.name in ("NET_RX", "NET_TX")),
            default=0) > c.latency_ns

    # A 2 s storm usually gives dozens of spikes above 80 µs, but now and then (seen
    # about 1 run in 4) only one or two, and rarely that little for several runs in a
    # row: measure again, up to eight times, until the storm has made enough spikes to
    # judge, one of them mostly softirq time (on a quiet machine every spike seen in
    # those runs was named NET_RX; with other work on the CPU: 2 to 17 mostly NET_RX).
    causes: list[Cause] = []
    try:
        for attempt in range(8):
            got, _ = measure(tmp_path / str(attempt), seconds=2.0, threshold_ns=80_000,
                             load=load)
            causes += got
            if majority(causes, named)[0] >= 5 and any(mostly_net(c) for c in causes):
                break
    finally:
        rx.terminate()
        rx.wait(timeout=10)

    # Other work on this CPU (another run's qemu, a tokio worker: their kernel time
    # delays the probe too) adds spikes of its own, so the storm's spikes are not
    # required to be the majority: the storm made at least 5, and every spike that is
    # mostly NET_RX (or NET_TX) softirq time is named after it
    hits, _ = majority(causes, named)
    assert hits >= 5, [c.summary() for c in causes]
    mostly = [c for c in causes if mostly_net(c)]
    assert mostly, [c.summary() for c in causes if named(c)][:10]
    assert all("NET_RX" in c.top() or "NET_TX" in c.top() for c in mostly), \
        [c.summary() for c in mostly if "NET_" not in c.top()][:10]


def test_timer_load_is_named(tmp_path: Path) -> None:
    if not shutil.which("stress-ng"):
        pytest.skip("stress-ng not installed")

    # A timer storm: 2000 timerfds of one stress-ng worker expire together 100 times a
    # second on CPU. Each expiry runs its hrtimer callback in the interrupt, so the storms
    # delay the probe by a known cause hundreds of times per second. (One --hrtimers
    # worker made anywhere from 0 to ~40 such spikes in 5 s here: CI saw too few.)
    def load() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                "taskset",
                "-c",
                str(CPU),
                "stress-ng",
                "--quiet",
                "--timerfd",
                "1",
                "--timerfd-fds",
                "2000",
                "--timerfd-freq",
                "100",
                "--timeout",
                "60",
            ]
        )

    def named(c: Cause) -> bool:
        return any(
            (x.kind == "hrtimer" and x.count)
            or (x.kind == "softirq" and x.name in ("TIMER", "HRTIMER"))
            or (x.kind == "task" and x.name.startswith("stress-ng"))
            for x in c.components
        )

    def storm(c: Cause) -> bool:  # the expiries themselves, counted, not only the task
        return any(x.kind == "hrtimer" and x.count > 10 for x in c.components)

    causes, meta = measure(tmp_path, seconds=2.0, threshold_ns=100_000, load=load)
    hits, n = majority(causes, named)
    summaries = [c.summary() for c in causes[:20]]
    assert n >= 3, summaries
    assert hits * 2 > n, summaries
    assert any(storm(c) for c in causes), summaries

    # On this busy CPU, replaying each whole 20 ms window gives the same attributions as
    # the fast replay from 1 ms before the deadline (checked on the first 25 spikes).
    first = [Spike(c.cpu, c.deadline_ns, c.wake_ns, c.tid) for c in causes[:25]]
    full = attribute_run(meta["capture"], first, threshold_ns=100_000, lead_ns=None)
    assert [c.to_dict()["components"] for c in full] == [
        c.to_dict()["components"] for c in causes[:25]
    ]
