# SPDX-License-Identifier: MIT
"""One vocabulary (docs/vocabulary.md): old spellings still work and mean what the new ones
do; every listing has --json; machine-readable output is never cut silently."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rtlab.cli import build_parser, main
from rtlab.errors import UsageError


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse errors exit directly
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# --- host CLI spellings: both parse to the same value ---------------------------------------

@pytest.mark.parametrize(("argv_old", "argv_new", "dest"), [
    (["run", "--threshold", "50us"], ["run", "--stop-threshold", "50us"], "threshold"),
    (["spikes", "last", "--threshold", "50us"], ["spikes", "last", "--trace-threshold", "50us"],
     "threshold"),
])
def test_cli_old_spelling_is_the_new_one(argv_old: list[str], argv_new: list[str],
                                         dest: str) -> None:
    p = build_parser()
    assert getattr(p.parse_args(argv_old), dest) == getattr(p.parse_args(argv_new), dest)


@pytest.mark.parametrize("flag", ["--stop-threshold", "--threshold"])
def test_run_stop_threshold_both_spellings_stop_the_run(
        fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], flag: str) -> None:
    argv_file = tmp_path / "argv.json"
    fake_probe("normal", argv_out=argv_file)
    code, out, err = run_cli(capsys, "run", "--duration", "6s", "--cpus", "0", flag, "50us",
                             "--no-progress", "--no-report")
    assert code == 3, err
    assert "THRESHOLD EXCEEDED" in out
    args = json.loads(argv_file.read_text())
    assert args[args.index("--stop-threshold") + 1] == "50us"  # the engine's current name


def test_help_names_the_current_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, want in ((["run", "--help"], ["--stop-threshold", "--trace-threshold"]),
                       (["spikes", "--help"], ["--trace-threshold", "--json"]),
                       (["results", "list", "--help"], ["--json", "--limit"]),
                       (["results", "show", "--help"], ["--json"]),
                       (["history", "--help"], ["--json"]),
                       (["board", "--help"], ["--json"])):
        code, out, _ = run_cli(capsys, *argv)
        assert code == 0
        for w in want:
            assert w in out, (argv, w)


# --- --probe: the engine's options under their current names --------------------------------

def test_probe_options_know_old_spellings(probe_bin: str) -> None:
    from rtlab.engine.options import adapt_options, check_option, probe_options

    sw = probe_options("switch", probe_bin)
    assert sw.has("cpus") and sw.takes_one_cpu("cpus")
    assert check_option(sw, "cpu", "1") == ("cpus", "1")
    assert adapt_options({"cpus": [1, 2], "mechanism": "pipe"}, sw) == {
        "cpus": [1], "mechanism": "pipe"}
    ov = probe_options("overhead", probe_bin)
    assert check_option(ov, "other-cpu", "0") == ("waker_cpu", "0")
    timer = probe_options("timer", probe_bin)
    assert not timer.takes_one_cpu("cpus")
    assert check_option(timer, "threshold", "1ms") == ("stop_threshold", "1ms")
    assert timer.has("threshold_ns")  # the host's key, passed as --stop-threshold


def test_probe_duration_is_the_whole_run_for_overhead_too(probe_bin: str) -> None:
    from rtlab.runner.direct import DirectRequest, probe_scenario

    sc = probe_scenario(DirectRequest("overhead", duration_ns=5_000_000_000), probe_bin)
    assert sc.phases[0].probe.options["duration_ns"] == 5_000_000_000
    assert sc.phases[0].duration_ns == 5_000_000_000
    sc = probe_scenario(DirectRequest("overhead", probe_opts=("loops=100",)), probe_bin)
    assert "duration_ns" not in sc.phases[0].probe.options
    with pytest.raises(UsageError, match="cannot be combined"):
        probe_scenario(DirectRequest("overhead", probe_opts=("test-duration=1s",),
                                     duration_ns=5_000_000_000), probe_bin)
    with pytest.raises(UsageError, match="runs on one CPU"):
        probe_scenario(DirectRequest("switch", cpus=[0, 1]), probe_bin)
    sc = probe_scenario(DirectRequest("switch", cpus=[0]), probe_bin)
    assert sc.phases[0].probe.options["cpus"] == [0]


# --- listings: --json, and nothing cut without saying so -------------------------------------

@pytest.fixture
def three_runs(fake_probe: Callable[..., Path], store_path: Path,
               capsys: pytest.CaptureFixture[str]) -> list[str]:
    fake_probe("normal")
    for _ in range(3):
        code, _, err = run_cli(capsys, "run", "--duration", "1s", "--cpus", "0",
                               "--no-progress", "--no-report")
        assert code == 0, err
    from rtlab.results.store import Store

    st = Store.open(str(store_path))
    try:
        return [r.id for r in st.list(None)]
    finally:
        st.close()


def test_results_list_json_is_complete_and_states_its_limit(
        three_runs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "results", "list", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["total"] == 3 and doc["shown"] == 3 and doc["limit"] is None
    assert [r["id"] for r in doc["runs"]] == three_runs
    run = doc["runs"][0]
    assert run["status"] == "completed" and run["samples"] > 0 and "T" in run["created"]
    code, out, _ = run_cli(capsys, "results", "list", "--json", "--limit", "2")
    doc = json.loads(out)
    assert doc["limit"] == 2 and doc["shown"] == 2 and doc["total"] == 3
    assert [r["id"] for r in doc["runs"]] == three_runs[:2]
    code, out, _ = run_cli(capsys, "results", "list", "--limit", "2")
    assert "2 of 3 runs shown (--limit 0: all)" in out
    code, out, _ = run_cli(capsys, "results", "list", "--limit", "0")
    assert all(i in out for i in three_runs) and "runs shown" not in out
    code, _, err = run_cli(capsys, "results", "list", "--limit", "-1")
    assert code == 2 and "--limit" in err


def test_results_list_json_without_a_store(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "no" / "x.db"
    code, out, _ = run_cli(capsys, "results", "list", "--json", "--store", str(where))
    assert code == 0 and json.loads(out)["runs"] == [] and json.loads(out)["total"] == 0
    assert not (tmp_path / "no").exists()


def test_results_show_json(three_runs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "results", "show", "last", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["run_id"] == three_runs[0] and doc["status"] == "completed"
    assert doc["host"] == "fakehost" and doc["probe"] == "timer"
    ch = doc["phases"][0]["channels"][0]
    st = ch["statistics"]
    assert ch["samples"] > 0 and st["min_ns"] <= st["percentiles_ns"]["p50"] <= st["max_ns"]
    assert set(st["percentiles_ns"]) == {"p50", "p99", "p99.9", "p99.99", "p99.9999"}


def test_history_json(three_runs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "history", "--host", "fakehost", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["host"] == "fakehost" and len(doc["kernels"]) == 1
    k = doc["kernels"][0]
    assert k["kernel"] == "6.1.0-fake" and sorted(k["runs"]) == sorted(three_runs)
    assert k["baseline"] and k["regressions"] == [] and k["max_ns"] > 0


class _Store:
    """Enough of a Store for `rtlab spikes`: one traced phase with 30 cause records."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.runs_dir = Path("/nonexistent")

    def get(self, _ref: str) -> Any:
        return self.result

    def close(self) -> None:
        pass


def test_spikes_json_lists_every_record_unless_limited(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from rtlab.results import store as store_mod
    from rtlab.results.model import Phase, RunResult

    spikes = [{"cpu": 1, "at_ns": i, "latency_ns": 100_000 + i, "summary": "x", "class": "task"}
              for i in range(30)]
    phase = Phase("main", spikes=spikes, trace={"capture": "c"},
                  spike_summary={"threshold_ns": 100_000, "spikes": 40, "attributed": 30,
                                 "stored": 30, "by_class": {"task": 30}})
    result = RunResult(run_id="r1", status="completed", probe="timer", phases=[phase])
    monkeypatch.setattr(store_mod.Store, "open", classmethod(lambda cls, *a, **k: _Store(result)))
    code, out, _ = run_cli(capsys, "spikes", "r1", "--json")
    doc = json.loads(out)
    ph = doc["phases"][0]
    assert code == 0 and doc["limit"] is None and len(ph["spikes"]) == 30
    assert ph["shown"] == ph["of"] == 30 and ph["spike_summary"]["spikes"] == 40
    code, out, _ = run_cli(capsys, "spikes", "r1", "--json", "--limit", "5")
    doc = json.loads(out)
    ph = doc["phases"][0]
    assert doc["limit"] == 5 and ph["shown"] == 5 and ph["of"] == 30
    assert [s["latency_ns"] for s in ph["spikes"]] == [100_025 + i for i in range(5)]
    code, out, _ = run_cli(capsys, "spikes", "r1")  # the table: 20 worst by default
    assert "20 worst of 40 spikes" in out
