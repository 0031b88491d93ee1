# SPDX-License-Identifier: MIT
"""Scenario test fixtures: the shared fake engine and store (tests/conftest.py), plus a
private journal directory so no test touches /run/rtlab."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "host"))


@pytest.fixture
def store_path(store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RTLAB_JOURNAL_DIR", str(tmp_path / "journal"))
    return store_path
