# SPDX-License-Identifier: MIT
"""What a store holds, read back whole, for tests that check what a command stored."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rtlab.results.model import RunResult


def stored_runs(store: Path | str) -> list[RunResult]:
    """Every run in the store at `store` (a path or URL), newest first."""
    from rtlab.results.store import Store  # lazy: the lab's helpers import this module

    s = Store.open(str(store))
    try:
        return [s.get(r.id) for r in s.list(None)]
    finally:
        s.close()


def stored_dicts(store: Path | str) -> list[dict[str, Any]]:
    """stored_runs as the dicts a result file holds."""
    return [r.to_dict() for r in stored_runs(store)]
