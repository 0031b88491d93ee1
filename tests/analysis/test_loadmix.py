# SPDX-License-Identifier: MIT
"""A comparison says when its runs ran different loads under one name (stress-ng in
one, the engine's built-in load standing in for it in another), in the text, the JSON
and the HTML of `rtlab compare`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rtlab.analysis.loadmix import loads_run, mixed_load_notes
from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
from tests.support.synth import synthetic_result

STRESS = {"name": "stress", "kind": "stress"}
FALLBACK = {"name": "stress", "kind": "builtin",
            "fallback": {"for_kind": "stress", "reason": "stress-ng is not installed on b"}}


def _run(run_id: str, load: dict[str, Any], seed: int) -> Any:
    r = synthetic_result(run_id, seed=seed, windows=5, per_window=200)
    r.provenance["host"]["phases"] = [{"name": "main", "loads": [load]}]
    return r


def test_loads_run_names_what_ran() -> None:
    assert loads_run(_run("aaaa0001", STRESS, 1)) == {"stress": "stress-ng"}
    assert loads_run(_run("aaaa0002", FALLBACK, 2)) == {
        "stress": "the engine's built-in load (standing in for stress)"}
    assert loads_run(synthetic_result("aaaa0003")) == {}


def test_mixed_loads_are_named_and_same_loads_are_not() -> None:
    a, b, c = _run("aaaa0001", STRESS, 1), _run("bbbb0002", FALLBACK, 2), \
        _run("cccc0003", STRESS, 3)
    assert mixed_load_notes([a, c]) == []
    (note,) = mixed_load_notes([a, b, c])
    assert note.startswith("load stress differs between the runs: stress-ng in aaaa0001, "
                           "cccc0003; the engine's built-in load (standing in for stress) "
                           "in bbbb0002")


def test_compare_shows_the_note(tmp_path: Path, capsys: Any) -> None:
    db = str(tmp_path / "s.db")
    store = Store.open(db)
    store.add(_run("aaaa0001", STRESS, 1), probe_shape)
    store.add(_run("bbbb0002", FALLBACK, 2), probe_shape)
    store.close()
    html = tmp_path / "c.html"
    assert main(["compare", "aaaa0001", "bbbb0002", "--store", db, "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "note: load stress differs between the runs" in out
    assert "load stress differs between the runs" in html.read_text()
    assert main(["compare", "aaaa0001", "bbbb0002", "--store", db, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(n.startswith("load stress differs") for n in doc["notes"])
