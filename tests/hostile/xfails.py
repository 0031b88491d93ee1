# SPDX-License-Identifier: MIT
"""Hostile cases known to fail, while their fix is being built: case id -> why. Each is
a strict xfail: when the fix lands the case passes, the run fails, and its line here
goes. Empty when every case passes (issue 24 closed with none left)."""

from __future__ import annotations

import pytest

PENDING: dict[str, str] = {}


def marks(case_id: str) -> list[pytest.MarkDecorator]:
    why = PENDING.get(case_id)
    if why is None:
        return []
    return [pytest.mark.xfail(strict=True, reason=f"known to fail: {why}")]
