# SPDX-License-Identifier: MIT
"""The Amdahl fit and the summaries of rtlab.probes on synthetic data (exact)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtlab.probes.extras import extra_lines, probe_notes
from rtlab.probes.interfere import (
    AmdahlSummary,
    amdahl_from_times,
    amdahl_speedup,
    fit_amdahl,
    summarize_amdahl,
    summarize_pairs,
)
from rtlab.probes.noise import count_at_least
from rtlab.results.model import Phase, RunResult


@pytest.mark.parametrize("p", [0.0, 0.3, 0.7, 0.95, 1.0])
def test_fit_recovers_exact_p(p: float) -> None:
    pts = [(n, amdahl_speedup(p, n)) for n in (1, 2, 4, 8)]
    assert fit_amdahl(pts) == pytest.approx(p, abs=1e-6)


def test_fit_two_points_is_exact() -> None:
    # S(2) = 1 / (0.3 + 0.35) for p = 0.7
    assert fit_amdahl([(1, 1.0), (2, 1 / 0.65)]) == pytest.approx(0.7, abs=1e-9)


def test_fit_least_squares_with_noise() -> None:
    p = 0.8
    pts = [(n, amdahl_speedup(p, n) * f) for n, f in ((2, 1.01), (4, 0.99), (8, 1.0))]
    assert fit_amdahl(pts) == pytest.approx(p, abs=0.02)


def test_fit_needs_n_above_one() -> None:
    with pytest.raises(ValueError):
        fit_amdahl([(1, 1.0)])


def test_medians_ignore_outliers() -> None:
    t1 = [100, 100, 100, 400, 100]
    t2 = [65, 65, 900, 65, 65]
    rows, p = amdahl_from_times({1: t1, 2: t2})
    assert rows[1].speedup == pytest.approx(100 / 65)
    assert rows[1].jitter_ns == 900 - 65
    assert p == pytest.approx(0.7, abs=1e-6)


def test_summaries_from_records() -> None:
    recs = [
        {"type": "header", "probe": "interfere"},
        {"type": "result", "channels": [],
         "interfere": {"mode": "amdahl", "serial_permille": 300, "units": 1,
                       "runs": [{"n": 1, "ns": [1000, 1000]}, {"n": 2, "ns": [650, 650]}]}},
    ]
    s = summarize_amdahl(recs)
    assert s.serial_injected == pytest.approx(0.3)
    assert s.p_fit == pytest.approx(0.7, abs=1e-6)
    pairs = [
        {"type": "result", "channels": [],
         "interfere": {"mode": "pairs", "classes_missing": ["smt"], "runs": [
             {"workload": "chase", "class": "solo", "cpu_b": None, "ns": [100, 100]},
             {"workload": "chase", "class": "same_l3", "cpu_b": 1, "ns": [150, 150]}]}},
    ]
    rows, missing = summarize_pairs(pairs)
    assert missing == ["smt"]
    assert [r.ratio for r in rows] == [1.0, 1.5]


def test_hist_helpers() -> None:
    assert count_at_least([[5, 2], [300, 3]], 200) == 3
    # bucket 256 starts at 256 ns (counted), bucket 128 at 128 ns (not)
    assert count_at_least([[128, 1], [256, 4]], 256) == 4


# --- physical bounds: 0 <= p <= 1, no speed-up above N ----------------------------------

# The case seen: another task used CPU 1 while the 2-CPU runs ran, so the job took twice
# as long on 2 CPUs as on 1 and the fit printed "parallel fraction -1.000, serial 2.000".
BUSY_CPU1 = {1: [1_000_000] * 5, 2: [2_000_000] * 5}


def _summary(times: dict[int, list[int]], cpus: tuple[int, ...] = (0, 1)) -> AmdahlSummary:
    rows, p = amdahl_from_times(times)
    return AmdahlSummary(rows=rows, p_fit=p, serial_injected=0.3, cpus=cpus)


def test_negative_parallel_fraction_is_no_fit() -> None:
    s = _summary(BUSY_CPU1)
    assert s.p_fit == pytest.approx(-1.0)  # the search bound: the data say lower still
    assert not s.fitted and s.busy_cpus() == [1]
    assert s.note() == (
        "no Amdahl fit: the fitted parallel fraction ≤ -1.000 is outside [0, 1]: the job "
        "got slower with more CPUs (2 CPUs 0.50x); CPU 1 was not quiet: the result does not "
        "record what else ran there. Measure on shielded CPUs or with --policy fifo")


def test_slightly_outside_is_within_the_tolerance_and_shown_clamped() -> None:
    # a fully serial job (p = 0) measured with 0.5 % noise: p a little below 0
    s = _summary({1: [1_000_000] * 3, 2: [1_005_000] * 3})
    assert -0.02 < s.p_fit < 0 and s.fitted and s.note() is None
    assert s.parallel == 0.0


def test_speedup_above_n_is_no_fit() -> None:
    s = _summary({1: [1_000_000] * 3, 2: [380_000] * 3})  # 2.63x on 2 CPUs
    assert s.p_fit == pytest.approx(1.0) and not s.fitted
    assert s.busy_cpus() == [0]
    note = s.note(["load hog (stress, on any CPU)"])
    assert note is not None and note.startswith("no Amdahl fit: speed-up above N (2 CPUs 2.63x)")
    assert "CPU 0 may not have been quiet: load hog (stress, on any CPU)." in note


def test_the_cpus_whose_addition_slowed_the_job_are_named() -> None:
    s = _summary({1: [100] * 3, 2: [120] * 3, 3: [130] * 3, 4: [125] * 3}, cpus=(2, 5, 7, 9))
    assert not s.fitted and s.busy_cpus() == [5, 7]
    assert "CPUs 5,7 were not quiet" in (s.note() or "")


def test_summary_takes_the_cpus_from_the_header() -> None:
    recs = [{"type": "header", "config": {"cpus": [3, 6]}},
            {"type": "result", "channels": [], "interfere": {
                "mode": "amdahl", "serial_permille": 300,
                "runs": [{"n": n, "ns": v} for n, v in BUSY_CPU1.items()]}}]
    s = summarize_amdahl(recs)
    assert s.cpus == (3, 6) and s.busy_cpus() == [6]


def _stored(times: dict[int, list[int]], *, load_cpus: list[int] | None,
            isolated: list[int]) -> RunResult:
    """A stored interfere run (SCHED_OTHER workers on CPUs 0-1) with a stress load."""
    runs = [{"n": n, "channel": f"amdahl.n{n}", "ns": v} for n, v in times.items()]
    phase = Phase("main", [], 100_000_000, extras={"interfere": {
        "mode": "amdahl", "serial_permille": 300, "units": 1000, "runs": runs}})
    load = {"name": "hog", "kind": "stress", "cpus": load_cpus, "argv": ["stress-ng"]}
    return RunResult(
        run_id="aaaa0001", status="completed", probe="interfere", phases=[phase],
        provenance={"engine": {"config": {"cpus": [0, 1]},
                               "system": {"cpus_isolated": isolated}},
                    "host": {"phases": [{"name": "main", "loads": [load]}]},
                    "doctor": {"findings": [{"check": "virt", "severity": "warning",
                                             "summary": "virtual machine (KVM)"}]}})


def test_stored_run_prints_no_fit_and_names_what_ran_there() -> None:
    r = _stored(BUSY_CPU1, load_cpus=[1], isolated=[])
    lines = extra_lines(r)
    assert not any(ln.startswith("Amdahl fit:") or "serial 2.000" in ln for ln in lines)
    assert lines[0] == "speed-up by CPUs 1: 1.00x, 2: 0.50x (injected serial 0.300)"
    assert lines[1] == (
        "no Amdahl fit: the fitted parallel fraction ≤ -1.000 is outside [0, 1]: the job "
        "got slower with more CPUs (2 CPUs 0.50x); CPU 1 was not quiet: load hog (stress, "
        "on CPUs 1); CPU 1 neither isolated nor shielded (any task may run there); virtual "
        "machine (KVM). Measure on shielded CPUs or with --policy fifo")
    assert probe_notes(r) == [lines[1]]  # what the runner keeps in the result's notes
    # a load placed elsewhere on an isolated CPU 1: only the VM is left to name
    other = _stored(BUSY_CPU1, load_cpus=[0], isolated=[1])
    assert probe_notes(other)[0].endswith(
        "CPU 1 was not quiet: virtual machine (KVM). Measure on shielded CPUs or with "
        "--policy fifo")


def test_stored_run_within_bounds_prints_the_fit_and_no_note() -> None:
    r = _stored({1: [1000, 1000], 2: [650, 650]}, load_cpus=None, isolated=[])
    assert extra_lines(r) == ["Amdahl fit: parallel fraction 0.700, serial 0.300 (injected "
                              "serial 0.300); speed-up by CPUs 1: 1.00x, 2: 1.54x"]
    assert probe_notes(r) == []


def test_an_imported_run_keeps_the_no_fit_note(tmp_path: Path, store_path: Path) -> None:
    """The runner and the importer keep probe_notes in the stored result (a re-imported
    raw file here: the same path as a live run's classify)."""
    import json

    from rtlab.cli import main
    from rtlab.results.histogram import LogLinHistogram
    from rtlab.results.store import Store

    runs = [{"n": n, "channel": f"amdahl.n{n}", "ns": v} for n, v in BUSY_CPU1.items()]
    channels = [{"name": f"amdahl.n{n}", "cpu": None, "tid": None, "samples": len(v),
                 "missed": 0, "min_ns": min(v), "max_ns": max(v), "sum_ns": sum(v),
                 "max_at_ns": 0, "hist": LogLinHistogram.from_values(v).to_json(),
                 "windows": [], "windows_lost": 0, "ring_lost": 0}
                for n, v in BUSY_CPU1.items()]
    raw = tmp_path / "interfere.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in (
        {"type": "header", "schema": 1, "probe": "interfere", "config": {"cpus": [0, 1]}},
        {"type": "result", "schema": 1, "status": "completed", "exit_code": 0,
         "elapsed_ns": 10**8, "channels": channels, "interfere": {
             "mode": "amdahl", "serial_permille": 300, "units": 1000, "runs": runs}})))
    assert main(["results", "import", str(raw)]) == 0
    (row,) = Store.open(str(store_path)).list()
    notes = Store.open(str(store_path)).get(row.id).notes
    assert any(n.startswith("no Amdahl fit: the fitted parallel fraction") for n in notes)
