# SPDX-License-Identifier: MIT
"""Every result is checked before it is stored or believed (issue 12, item 1; docs
results.md#validation): live engine output (the fake engine lies on request), raw
files imported after the fact, peer imports; and no verdict rests on a bad result."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.cli import main
from rtlab.errors import RtlabError
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.junit import junit_xml
from rtlab.report.terminal import verdict
from rtlab.results.histogram import LogLinHistogram, index_of
from rtlab.results.model import Channel, Phase, RunResult
from rtlab.results.store import Store
from rtlab.results.validate import channel_problems, nothing_measured, problems
from rtlab.results.windows import WindowHist
from tests.support.env import FAKE, subprocess_env
from tests.support.paths import DATA


def good_channel(name: str = "cpu0", values: tuple[int, ...] = (15_000, 16_000, 147_000)
                 ) -> Channel:
    return Channel(name=name, cpu=0, samples=len(values), min_ns=min(values),
                   max_ns=max(values), sum_ns=sum(values),
                   hist=LogLinHistogram.from_values(values),
                   windows=[(0, 16_000, 2), (1, 147_000, 1)])


def result_of(*channels: Channel, status: str = "completed") -> RunResult:
    return RunResult(run_id="abcd0001", status=status, probe="timer",
                     phases=[Phase("main", list(channels), 1_000_000_000)])


# --- the checks themselves -----------------------------------------------------------

def test_a_consistent_result_has_no_problem() -> None:
    assert problems(result_of(good_channel(), good_channel("cpu1"))) == []


@pytest.mark.parametrize(("change", "needle"), [
    ({"samples": -5}, "samples -5 is out of range"),
    ({"samples": 1_000_000}, "samples 1,000,000 but the histogram holds 3"),
    ({"sum_ns": 10**40}, "sum_ns 10000000000000000000000000000000000000000 is out of range"),
    ({"min_ns": -5_000, "max_ns": -1}, "min_ns -5000 is out of range"),
    ({"min_ns": 20_000}, "min 20000 ns but the lowest histogram bucket holds"),
    ({"max_ns": 100_000}, "max 100000 ns but the highest histogram bucket holds"),
    ({"min_ns": 200_000, "max_ns": 100_000}, "min 200000 ns is above max 100000 ns"),
    ({"sum_ns": 10}, "mean 3.33333 ns"),
    ({"missed": -1}, "missed -1 is out of range"),
    ({"max_ns": None}, "3 samples but no min or max"),
    ({"windows": [(0, 900_000, 1)]}, "window maxima span 900000..900000 ns"),
    ({"windows": [(0, 16_000, 2), (1, 16_000, 2)]}, "the windows count 4 samples"),
    ({"windows": [(0, 16_000, 2), (1, 140_000, 1)]},
     "largest maximum is 140000 ns, not max 147000 ns"),
])
def test_each_contradiction_is_named(change: dict[str, object], needle: str) -> None:
    ch = good_channel()
    for key, value in change.items():
        setattr(ch, key, value)
    found = channel_problems(ch)
    assert found and needle in found[0], found


def test_empty_channel_must_be_empty() -> None:
    empty = Channel(name="cpu0")
    assert channel_problems(empty) == []
    empty.max_ns = 5
    assert channel_problems(empty) == ["no samples but max_ns set"]


def test_duplicate_names_and_the_problem_names_its_place() -> None:
    res = result_of(good_channel(), good_channel())
    res.phases.append(Phase("main", [good_channel()]))
    found = problems(res)
    assert "phase main, channel cpu0: the channel name appears twice in the phase" in found
    assert "phase main: the phase name appears twice" in found


def test_windows_that_did_not_see_every_sample_need_not_reach_the_max() -> None:
    ch = good_channel()
    ch.windows = [(0, 16_000, 2)]  # the window of the 147 us sample was not published
    assert channel_problems(ch) == []


def test_nothing_measured() -> None:
    good = result_of(good_channel())
    assert nothing_measured(good, probe_shape(good.probe)) is None
    empty = result_of(Channel("cpu0"), Channel("cpu1"))
    assert nothing_measured(empty, probe_shape(empty.probe)) == (
        "measured nothing: no sample on cpu0, cpu1")
    udp = RunResult(run_id="abcd0002", status="completed", probe="udp", phases=[Phase(
        "main", [Channel("rtt"), good_channel("stack")], 1,
        extras={"udp": {"sent": 30, "lost": 30}})])
    assert nothing_measured(udp, probe_shape(udp.probe)) == (
        "measured nothing: no sample on rtt (30 of 30 round trips lost)")
    # a quiet CPU gives the noise probe no gap: that is a measurement, not nothing
    quiet = RunResult(run_id="abcd0003", status="completed", probe="noise", phases=[Phase(
        "main", [Channel("cpu1")], 1, extras={"noise": {"channels": [{"loops": 10**9}]}})])
    assert nothing_measured(quiet, probe_shape(quiet.probe)) is None
    quiet.phases[0].extras = {"noise": {"channels": [{"loops": 0}]}}
    assert "no noise thread counted any loops" in (
        nothing_measured(quiet, probe_shape(quiet.probe)) or "")


# --- no verdict on a bad result -------------------------------------------------------

def test_no_slo_verdict_junit_or_headline_on_an_inconsistent_result() -> None:
    ch = good_channel()
    ch.min_ns, ch.max_ns = -5_000, -1  # the case seen: "SLO met" on this
    res = result_of(ch)
    report = evaluate_slo(parse_slo("max < 1us and p99 < 1us"), res, shape_of=probe_shape)
    assert not report.passed
    assert all("not checked: the result failed validation" in o.reason
               for o in report.outcomes)
    assert "SLO VIOLATED" in report.summary()
    xml = junit_xml([res]).decode()
    assert "numbers failed validation" in xml and 'failures="1"' in xml
    assert verdict(res).startswith("[INVALID]") and "worst" not in verdict(res)
    # a stored `invalid` run (consistent or not now) is no more believed
    stored_invalid = result_of(good_channel(), status="invalid")
    assert not evaluate_slo(parse_slo("max < 1s"), stored_invalid, shape_of=probe_shape).passed
    assert verdict(stored_invalid).startswith("[INVALID]")


def test_the_store_refuses_an_inconsistent_result_unless_marked_invalid(
        tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "s.db"))
    bad = result_of(Channel("cpu0", samples=10**30))
    with pytest.raises(RtlabError, match="not stored: its numbers contradict"):
        store.add(bad, probe_shape)
    assert store.list() == []
    bad.status = "invalid"
    store.add(bad, probe_shape)  # kept for the record, without a summary
    row = store.list()[0]
    assert row.status == "invalid" and row.worst_max_ns is None and row.p99_ns is None


# --- live runs (the fake engine lies in its final result) ----------------------------

@pytest.mark.parametrize("how", ["negative_samples", "hist_total", "huge_sum",
                                 "negative_minmax", "window_max"])
def test_a_live_run_that_contradicts_itself_is_stored_invalid_and_exits_1(
    fake_probe: Callable[..., Path], store_path: Path, capsys: pytest.CaptureFixture[str],
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # the HTML report is written here
    fake_probe("lie", lie=how)
    code = main(["run", "--duration", "2s", "--cpus", "0", "--no-progress",
                 "--slo", "max < 1s"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert "[INVALID]" in out and "SLO met" not in out
    store = Store.open(str(store_path))
    (row,) = store.list()
    assert row.status == "invalid" and row.worst_max_ns is None
    result = store.get(row.id)
    assert result.partial
    assert any("the engine's numbers failed validation: phase " in n and ", channel cpu0: "
               in n for n in result.notes), result.notes
    assert any(n.startswith("phases not run") for n in result.notes)  # it stopped there
    # later verdicts on the stored run refuse too
    assert main(["report", row.id, "--slo", "max < 1s"]) != 0
    out, _ = capsys.readouterr()
    assert "SLO met" not in out


def test_a_run_that_measured_nothing_is_failed_and_exits_1(
    fake_probe: Callable[..., Path], store_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    fake_probe("normal", samples=0)
    code = main(["run", "--duration", "2s", "--cpus", "0", "--no-progress", "--no-report"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    (row,) = Store.open(str(store_path)).list()
    assert row.status == "failed"
    assert any("measured nothing: no sample on cpu0" in n
               for n in Store.open(str(store_path)).get(row.id).notes)


# --- raw files imported after the fact ------------------------------------------------

def lying_raw_file(tmp_path: Path, how: str) -> Path:
    """A raw engine output file (the fake engine's) whose final result lies."""
    out = tmp_path / f"lie-{how}.jsonl"
    with out.open("w") as f:
        subprocess.run([sys.executable, str(FAKE), "timer", "--cpus", "0", "--duration",
                        "1s"], stdout=f, check=True, timeout=60,
                       env=subprocess_env({"FAKE_MODE": "lie", "FAKE_LIE": how,
                                           "FAKE_PERIOD": "0.001"}))
    return out


@pytest.mark.parametrize(("how", "needle"), [
    ("negative_minmax", "min_ns -5000 is out of range"),
    ("hist_total", "samples 250,000 but the histogram holds 500"),
    ("huge_sum", "sum_ns 10000000000000000000000000000000000000000 is out of range"),
    ("negative_samples", "samples -5 is out of range"),
])
def test_importing_a_raw_file_that_contradicts_itself_is_refused(
    tmp_path: Path, store_path: Path, capsys: pytest.CaptureFixture[str], how: str,
    needle: str,
) -> None:
    raw = lying_raw_file(tmp_path, how)
    lines = raw.read_text().splitlines()
    result_line = next(i for i, line in enumerate(lines, 1) if '"type":"result"' in line)
    assert main(["results", "import", str(raw)]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") <= 2 and "Traceback" not in err  # one line (and a hint)
    assert f"{raw}:{result_line}: inconsistent result, not stored: phase main, channel " \
           f"cpu0: {needle}" in err
    assert not store_path.exists() or Store.open(str(store_path)).list() == []


def test_a_consistent_raw_file_still_imports(
    tmp_path: Path, store_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    raw = tmp_path / "good.jsonl"
    with raw.open("w") as f:
        subprocess.run([sys.executable, str(FAKE), "timer", "--cpus", "0,1", "--duration",
                        "1s"], stdout=f, check=True, timeout=60,
                       env=subprocess_env({"FAKE_PERIOD": "0.001"}))
    assert main(["results", "import", str(raw)]) == 0
    assert Store.open(str(store_path)).list()[0].status == "completed"


# --- peer imports ---------------------------------------------------------------------

def test_cyclictest_json_with_astronomic_cycles_is_one_line_exit_2(
    tmp_path: Path, store_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    doc = json.loads((DATA / "cyclictest.json").read_text())
    first = next(iter(doc["thread"].values()))
    first["cycles"] = 10**30
    bad = tmp_path / "cycles.json"
    bad.write_text(json.dumps(doc))
    assert main(["results", "import", "--format", "cyclictest-json", str(bad)]) == 2
    _, err = capsys.readouterr()
    assert "Traceback" not in err and "OverflowError" not in err
    assert str(bad.name) in err.splitlines()[0] and "range" in err.splitlines()[0]
    assert not store_path.exists() or Store.open(str(store_path)).list() == []


def test_no_comparison_with_a_run_that_failed_validation() -> None:
    from rtlab.analysis.configs import build_configs

    ch = good_channel()
    ch.samples = 10  # the histogram holds 3
    bad = result_of(ch)
    with pytest.raises(RtlabError, match=r"run abcd0001 failed validation .*samples 10 but "
                       r"the histogram holds 3.*: it is not compared"):
        build_configs([result_of(good_channel()), bad], shape_of=probe_shape)
    with pytest.raises(RtlabError, match=r"failed validation \(when it was stored"):
        build_configs([result_of(good_channel(), status="invalid")], shape_of=probe_shape)


def test_a_udp_run_with_every_round_trip_lost_is_failed_and_says_why(
    probe_bin: str, tmp_path: Path, store_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The case seen: 0 samples, every ping lost, stored `completed`. The engine's own
    diagnosis (log `no_replies`) becomes a note."""
    raw = tmp_path / "ping.jsonl"
    with raw.open("w") as f:  # nothing answers on this port of the loopback
        subprocess.run([probe_bin, "udp", "ping", "--peer", "127.0.0.1:9", "--rate", "100",
                        "--count", "3", "--timeout", "5ms", "--policy", "other",
                        "--allow-non-rt", "--session", "x"], stdout=f, check=False, timeout=60)
    assert main(["results", "import", str(raw)]) == 0
    out, _ = capsys.readouterr()
    assert "[FAILED]" in out
    (row,) = Store.open(str(store_path)).list()
    assert row.status == "failed"
    notes = Store.open(str(store_path)).get(row.id).notes
    assert "measured nothing: no sample on rtt (3 of 3 round trips lost)" in notes
    assert any(n.startswith("why no round trip was measured: ") for n in notes), notes


def test_per_window_histograms_must_agree() -> None:
    ch = good_channel()  # windows (0, 16000, 2), (1, 147000, 1)
    ch.window_hist = WindowHist(2, [0, 1], [31_000, 147_000], [0, 1, 2], [40, 60], [2, 1])
    assert channel_problems(ch) == []
    ch.window_hist = WindowHist(2, [0, 1], [31_000, 147_000], [0, 1, 2], [40, 60], [2, 2])
    assert channel_problems(ch) == [
        "the per-window histograms count 4 samples (sum 178000 ns), more than the "
        "channel's 3 (sum 178000 ns)"]
    ch.window_hist = WindowHist(2, [0, 1], [15_000, 16_000], [0, 1, 2], [40, 60], [1, 1])
    assert channel_problems(ch) == [
        "window 0: its histogram and its maximum count different samples"]


def test_window_hist_from_samples_is_the_engine_layout() -> None:
    """Simulations build per-window histograms as the engine does: sums, counts per
    window, and values of 2^40 ns and more in the last bucket (155 at sub_bits 2)."""
    body = np.array([[1_000, 1_500, 2**40, 2**45], [7, 7, 8, 9_999]], dtype=np.int64)
    wh = WindowHist.from_samples(2, body)
    assert list(wh.samples()) == [4, 4]
    assert list(wh.sum_ns) == list(body.sum(axis=1))
    d = wh.dense()
    assert d.shape[1] == 156 and d[0, 155] == 2 and d[1, 155] == 0
    assert d[1].sum() == 4 and d[1, index_of(7, 2)] == 2
