# SPDX-License-Identifier: MIT
"""Several boards measured with a matrix scenario: the boards are put side by side per
variant, never two variants of a board merged in one column."""

from __future__ import annotations

from rich.console import Console

from rtlab.report.side_by_side import boards_side_by_side as _compare
from tests.support.synth import synthetic_result


def _run(run_id: str, host: str, variant: str | None, seed: int):  # type: ignore[no-untyped-def]
    r = synthetic_result(run_id, hostname=host, seed=seed, windows=3, per_window=100)
    r.scenario = {"name": "multicore-migration", "hash": "h", "variant": variant}
    return r


def test_side_by_side_per_variant() -> None:
    console = Console(width=200, record=True)
    _compare([_run("aaaa0001", "board-a", "smp", 1), _run("aaaa0002", "board-a", "shielded", 2),
              _run("bbbb0001", "board-b", "smp", 3), _run("bbbb0002", "board-b", "shielded", 4)],
             console)
    text = console.export_text()
    assert "variant smp: the boards side by side" in text
    assert "variant shielded: the boards side by side" in text
    assert text.count("per CPU, side by side") == 2


def test_one_variant_one_table() -> None:
    console = Console(width=200, record=True)
    _compare([_run("aaaa0001", "board-a", None, 1), _run("bbbb0001", "board-b", None, 2)],
             console)
    text = console.export_text()
    assert text.count("per CPU, side by side") == 1 and "variant" not in text
