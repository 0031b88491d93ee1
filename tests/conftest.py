# SPDX-License-Identifier: MIT
"""Shared fixtures: where the engine binary is, and root-only skips."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

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


@pytest.fixture
def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (real SCHED_FIFO, cpusets, IRQ affinity)")
