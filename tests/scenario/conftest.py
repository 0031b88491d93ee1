# SPDX-License-Identifier: MIT
"""Scenario test fixtures: the host tests' fake engine behind RTLAB_PROBE and a private store."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "host"))

from host_helpers import write_wrapper


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "store" / "rtlab.db"
    monkeypatch.setenv("RTLAB_STORE", str(path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("RTLAB_JOURNAL_DIR", str(tmp_path / "journal"))
    return path


@pytest.fixture
def fake_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_path: Path
) -> Callable[..., Path]:
    """fake_probe(mode, **env) -> wrapper path; RTLAB_PROBE points at it."""
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
def probe_bin() -> str:
    import os

    path = os.environ.get("RTLAB_PROBE")
    if not path:
        pytest.skip("set RTLAB_PROBE to a built rtlab-probe for the real-engine tests")
    return path
