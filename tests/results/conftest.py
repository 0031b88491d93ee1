# SPDX-License-Identifier: MIT
"""Fixtures for the result store on both backends: a throw-away PostgreSQL server for
the test session (tests/support/pg_server.py) and a store location per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.pg_server import PgServer


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new, empty database on the test server."""
    return pg_server.url(pg_server.create_database())


@pytest.fixture(params=["sqlite", "postgresql"])
def store_loc(request: pytest.FixtureRequest, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> str:
    """An empty store on each backend, also set as $RTLAB_STORE (with a private XDG data
    directory): a SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        loc = str(tmp_path / "store" / "rtlab.db")
    else:
        loc = request.getfixturevalue("pg_url")
    monkeypatch.setenv("RTLAB_STORE", loc)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return loc
