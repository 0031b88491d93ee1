# SPDX-License-Identifier: MIT
"""`rtlab history` keeps "cannot tell" apart from "no change" (issue 27): two kernels with
one imported cyclictest run each, whose tails moved by +30 % / +37 % / +30 %, cannot be
judged (a single run without windows says nothing about its own variation), and the
history says so, shows the changes and gates on them only when asked; two long windowed
runs of one process are "no change"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtlab.analysis.compare import compare_configs, tails_and_max
from rtlab.analysis.configs import build_configs
from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
from tests.support.synth import synthetic_result

# per µs bucket: 1000 samples at p99's bucket, 900 at p99.9's, 90 at p99.99's, 10 at the max
BEFORE = {8: 60_000, 9: 38_000, 10: 1000, 19: 900, 30: 90, 50: 10}
AFTER = {8: 60_000, 9: 38_000, 13: 1000, 26: 900, 39: 90, 60: 10}


def _cyclictest_json(hist: dict[int, int]) -> str:
    n = sum(hist.values())
    return json.dumps({
        "file_version": 1,
        "cmdline:": "cyclictest -m -S -p 99 -i 1000 -h 400 -D 200 --json=ct.json",
        "rt_test_version:": "2.40", "start_time": "Sun, 22 Nov 2026 05:00:00 +0000",
        "end_time": "Sun, 22 Nov 2026 05:03:20 +0000", "return_code": 0,
        "sysinfo": {"sysname": "Linux", "nodename": "b", "release": "x", "version": "#1",
                    "machine": "x86_64", "realtime": 1},
        "num_threads": 1, "resolution_in_ns": 0,
        "thread": {"0": {"histogram": {str(k): v for k, v in hist.items()}, "cycles": n,
                         "min": min(hist), "max": max(hist),
                         "avg": sum(k * v for k, v in hist.items()) / n, "cpu": 1,
                         "node": 0}}})


@pytest.fixture
def imported(store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
             ) -> list[str]:
    """The finding: kernel 6.6 after 6.1 on board7, one imported cyclictest run each."""
    for name, hist, kernel, date in (("a", BEFORE, "6.1.90-rt30", "2025-01-10"),
                                     ("b", AFTER, "6.6.30-rt30", "2025-06-01")):
        f = tmp_path / f"{name}.json"
        f.write_text(_cyclictest_json(hist))
        assert main(["results", "import", "--format", "cyclictest-json", "--host", "board7",
                     "--kernel", kernel, "--date", date, str(f)]) == 0
    capsys.readouterr()
    s = Store.open(str(store_path))
    try:
        rows = sorted(s.list(), key=lambda r: r.created)
        results = [s.get(r.id) for r in rows]
    finally:
        s.close()
    configs = build_configs(results, "kernel", shape_of=probe_shape)
    pc = compare_configs(configs)[0]
    return [c.brief() for c in pc.selected(tails_and_max) if c.what.startswith("p")]


def test_single_imported_runs_cannot_tell_and_show_the_changes(
        imported: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # the changes as compare computes them: the tails moved by about +30 / +37 / +30 %
    assert [b.split()[0] for b in imported] == ["p99", "p99.9", "p99.99"]
    moved = [float(b.split()[1]) for b in imported]
    assert 29 < moved[0] < 31 and 36 < moved[1] < 38 and 29 < moved[2] < 31
    assert main(["history", "--host", "board7"]) == 0
    out = capsys.readouterr().out
    assert "no significant regression" not in out and "no regression" not in out
    assert "REGRESSION" not in out
    row = next(ln for ln in out.splitlines() if "6.6.30-rt30" in ln and "cannot tell" in ln)
    assert "cannot tell:" in row
    closing = next(ln for ln in out.splitlines() if "could not be judged (" in ln)
    assert closing.startswith("1 kernel change could not be judged (6.6.30-rt30: ")
    for brief in imported:  # every change it could not judge, with why
        assert brief in closing
    assert "single runs without windows" in closing
    assert "it is not shown to be free of regressions" in out
    assert "--fail-on-undecided makes this exit 3" in out


def test_undecided_newest_kernel_gates_only_when_asked(
        imported: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--host", "board7", "--fail-on-regression"]) == 0
    capsys.readouterr()
    assert main(["history", "--host", "board7", "--fail-on-undecided"]) == 3
    out = capsys.readouterr().out
    assert "could not be judged against 6.1.90-rt30" in out and "makes this exit 3" not in out
    assert main(["history", "--host", "board7", "--fail-on-undecided", "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["newest_undecided"] and not doc["newest_regressed"] and doc["failed"]
    assert doc["fail_on_undecided"] and doc["fail_on_regression"]


def test_history_json_keeps_cannot_tell_and_its_changes(
        imported: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--host", "board7", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not doc["failed"] and doc["newest_undecided"] and not doc["newest_regressed"]
    base, new = doc["kernels"]
    assert base["verdict"] == "baseline" and base["undecided"] == []
    assert new["verdict"] == "cannot tell" and new["regressions"] == []
    assert [c["statistic"] for c in new["changes"]] == ["p99", "p99.9", "p99.99", "max"]
    undecided = {c["statistic"]: c for c in new["undecided"]}
    assert set(undecided) == {"p99", "p99.9", "p99.99", "max"}
    for brief in imported:
        what, pct = brief.split()[0], float(brief.split()[1])
        c = undecided[what]
        assert c["verdict"] == "cannot tell" and not c["decided"] and c["inconclusive"]
        assert c["cannot_tell_because"] == "single runs without windows"
        assert c["ratio_ci"] is None and not c["significant"]
        assert abs(c["change_percent"] - pct) < 0.05  # the change it could not judge
        assert brief in new["summary"]
    assert any("could not be judged" in line for line in doc["summary"])


@pytest.fixture
def windowed(store_path: Path) -> None:
    """Two long windowed runs of one process on two kernels (the engine's own runs)."""
    s = Store.open(str(store_path))
    for i, (run_id, kernel) in enumerate((("dddd0001", "6.1.0-rt"), ("dddd0002", "6.6.0-rt"))):
        r = synthetic_result(run_id, seed=i + 11, windows=600, window_hist=True,
                             release=kernel, hostname="board9")
        r.provenance["host"]["start_wall"] = f"2026-01-0{i + 1}T00:00:00+00:00"
        s.add(r, probe_shape)
    s.close()


def test_equal_long_windowed_runs_are_no_change(
        windowed: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--host", "board9", "--fail-on-undecided"]) == 0
    out = capsys.readouterr().out
    assert "cannot tell" not in out and "REGRESSION" not in out
    assert "no regression between consecutive kernels: every change" in out
    assert main(["history", "--host", "board9", "--json"]) == 0
    new = json.loads(capsys.readouterr().out)["kernels"][1]
    assert new["verdict"] == "no change" and new["undecided"] == []
    for c in new["changes"]:  # each within the margin at its confidence
        lo, hi = c["ratio_ci"]
        assert c["verdict"] == "no change" and c["decided"] and not c["inconclusive"]
        assert 1 - c["equivalence_margin"] <= lo <= hi <= 1 + c["equivalence_margin"]
        assert c["cannot_tell_because"] is None and "(no change: not significant" in c["text"]
