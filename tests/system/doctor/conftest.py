# SPDX-License-Identifier: MIT
"""Fixture trees and a CLI runner that registers only the doctor command."""

from __future__ import annotations

from pathlib import Path

import pytest

import rtlab.cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def doctor_main(monkeypatch: pytest.MonkeyPatch):
    """rtlab.cli.main with only `doctor` registered (other commands may be absent)."""
    monkeypatch.setattr(rtlab.cli, "COMMANDS", ("doctor",))
    return rtlab.cli.main
