# SPDX-License-Identifier: MIT
"""Shared fixtures: where the engine binary is, and root-only skips."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.env import write_wrapper
from tests.support.pg_server import PgServer
from tests.support.pg_server import unavailable_reason as pg_unavailable_reason

ROOT = Path(__file__).resolve().parent.parent


def find_probe() -> str | None:
    """The rtlab-probe under test: $RTLAB_PROBE, else beside this Python, else PATH."""
    env = os.environ.get("RTLAB_PROBE")
    if env:
        return env
    beside = Path(sys.executable).parent / "rtlab-probe"
    if beside.exists():
        return str(beside)
    return shutil.which("rtlab-probe")


@pytest.fixture(scope="session")
def probe_bin() -> str:
    path = find_probe()
    if not path:
        pytest.fail("rtlab-probe not found: build it (make test) or set RTLAB_PROBE")
    return path


# Test runs on one machine (several checkouts, several engineers) share its two CPUs: a
# test that shields them moves every task (another run's measuring test's too), a test
# that snapshots the whole system sees another run's shield, and another run's SCHED_FIFO
# spinner or probe starves this run's RT threads and their softirq work beyond any
# margin. Every root test holds this lock exclusively, so root tests of concurrent runs
# take turns (tests without root run freely; load from anything else stays).
MACHINE_LOCK = Path(os.environ.get("RTLAB_TEST_MACHINE_LOCK", "/run/rtlab-test-machine.lock"))
MACHINE_LOCK_WAIT_S = 900


class _LockWaitTimeout(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _LockWaitTimeout


@contextlib.contextmanager
def machine_lock():
    fd = os.open(MACHINE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        signal.alarm(MACHINE_LOCK_WAIT_S)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except _LockWaitTimeout:
            pytest.fail(f"another test run held {MACHINE_LOCK} for {MACHINE_LOCK_WAIT_S} s")
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        yield
    finally:
        os.close(fd)  # releases the lock


@pytest.fixture
def require_root():
    if os.geteuid() != 0:
        pytest.skip("needs root (real SCHED_FIFO, cpusets, IRQ affinity)")
    with machine_lock():
        yield


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private result store (and XDG data dir) for one test."""
    path = tmp_path / "store" / "rtlab.db"
    monkeypatch.setenv("RTLAB_STORE", str(path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return path


@pytest.fixture
def fake_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_path: Path
) -> Callable[..., Path]:
    """fake_probe(mode, **env) -> wrapper path; RTLAB_PROBE points at the fake engine
    (tests/support/fake_probe.py)."""
    wrapper = write_wrapper(tmp_path)
    monkeypatch.setenv("RTLAB_PROBE", str(wrapper))

    def configure(mode: str = "normal", **env: str | int | float) -> Path:
        monkeypatch.setenv("FAKE_MODE", mode)
        for key, value in env.items():
            monkeypatch.setenv(f"FAKE_{key.upper()}", str(value))
        return wrapper

    configure()
    return configure


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A private PostgreSQL server on a Unix socket for the whole session (the store
    tests and the monitor's); stopped and removed at session end."""
    reason = pg_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = PgServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """A command run in this process (rtlab.cli.main) may leave SIGINT or SIGTERM
    ignored when it was stopped by one (it is ending: a later signal must not land in
    the interpreter's exit); here the next test, and the processes it starts, get the
    handlers back."""
    import signal as _signal

    saved = {s: _signal.getsignal(s) for s in (_signal.SIGINT, _signal.SIGTERM)}
    yield
    for s, handler in saved.items():
        if handler is not None and _signal.getsignal(s) != handler:
            _signal.signal(s, handler)
