# SPDX-License-Identifier: MIT
"""Fixtures shared by the monitor's tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def raw(probe_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real engine run of 3.5 s on two CPUs, as a segment's raw file."""
    out = tmp_path_factory.mktemp("raw") / "seg.jsonl"
    r = subprocess.run([probe_bin, "timer", "--cpus", "0,1", "--interval", "2ms",
                        "--duration", "3500ms", "--allow-non-rt", "--no-mlock"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out.write_text(r.stdout)
    return out
