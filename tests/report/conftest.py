# SPDX-License-Identifier: MIT
"""Fixtures of the report tests: synthetic results and a private store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
sys.path.insert(0, str(HERE))


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "store" / "rtlab.db"
    monkeypatch.setenv("RTLAB_STORE", str(path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return path
