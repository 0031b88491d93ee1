# SPDX-License-Identifier: MIT
"""Host test fixtures: a fake engine behind RTLAB_PROBE and a private store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from host_helpers import write_wrapper


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "store" / "rtlab.db"
    monkeypatch.setenv("RTLAB_STORE", str(path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
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

