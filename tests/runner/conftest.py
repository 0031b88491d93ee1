# SPDX-License-Identifier: MIT
"""Runner test fixtures: the shared fake engine and store (tests/conftest.py), plus a
private journal directory so no test touches /run/rtlab (the same override as
tests/scenario/conftest.py, where these tests lived)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def store_path(store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RTLAB_JOURNAL_DIR", str(tmp_path / "journal"))
    return store_path
