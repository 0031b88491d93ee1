# SPDX-License-Identifier: MIT
"""`rtlab compare --json`: the table, every change with both values, ratio, verdict and
p-value as the text shows them, the selection and grouping used, the SLO outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtlab.analysis.compare import compare_configs
from rtlab.analysis.configs import build_configs
from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
from tests.support.paths import DATA
from tests.support.synth import synthetic_result

STATS = ["median", "mean", "p99", "p99.9", "p99.99", "max (median window max)"]


@pytest.fixture
def stored(store_path: Path) -> list[str]:
    s = Store.open(str(store_path))
    runs = [synthetic_result("aaaa0001", windows=60, release="6.1.0-rt", window_hist=True),
            synthetic_result("aaaa0002", seed=2, windows=60, release="6.1.0-rt",
                             hostname="board2", window_hist=True),
            synthetic_result("aaaa0003", seed=3, windows=60, release="6.6.0-rt",
                             median_ns=16_000, window_hist=True)]
    for r in runs:
        s.add(r, probe_shape)
    s.close()
    return [r.run_id for r in runs]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_json_rows_changes_and_verdicts(stored: list[str], store_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "compare", *stored, "--by", "kernel", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == 1 and doc["by"] == "kernel"
    assert doc["selection"] == {"everything": True, "cpus": None, "channels": [],
                                "text": "all channels"}
    assert doc["baseline"] == "6.1.0-rt" and doc["side_by_side"] is None
    assert doc["slo"] is None and doc["html"] is None and doc["notes"] == []
    # the same numbers as the analysis computes
    st = Store.open(str(store_path))
    try:
        results = [st.get(i) for i in stored]
    finally:
        st.close()
    configs = build_configs(results, "kernel", shape_of=probe_shape)
    pairs = compare_configs(configs)
    rows = doc["configurations"]
    assert [r["label"] for r in rows] == [c.label for c in configs]
    assert [[run["id"] for run in r["runs"]] for r in rows] == [c.run_ids for c in configs]
    for row, c in zip(rows, configs, strict=True):
        assert row["samples"] == c.channel.samples and row["max_ns"] == c.value("max")
        assert row["percentiles_ns"] == {"p99": c.value(99.0), "p99.9": c.value(99.9),
                                         "p99.99": c.value(99.99)}
        assert row["min_ns"] <= row["mode_ns"] <= row["max_ns"]
        assert row["median_window_max_ns"] == c.value("window") and row["windows"] > 0
        assert row["runs"][0]["status"] == "completed"
    (cmp,) = doc["comparisons"]
    assert cmp["baseline"] == "6.1.0-rt" and cmp["configuration"] == "6.6.0-rt"
    assert [ch["statistic"] for ch in cmp["changes"]] == STATS
    for ch, want in zip(cmp["changes"], pairs[0].changes, strict=True):
        assert ch["text"] == want.describe()  # what the text prints
        assert ch["baseline_ns"] == want.a_ns and ch["value_ns"] == want.b_ns
        assert ch["ratio"] == pytest.approx(want.b_ns / want.a_ns)
        assert ch["p_value"] == want.p_value and ch["significant"] == want.significant
    p99 = cmp["changes"][2]
    assert p99["verdict"] == "worse" and p99["direction"] == "worse" and p99["significant"]
    lo, hi = p99["ratio_ci"]
    assert 1 < lo < p99["ratio"] < hi and p99["confidence"] == 0.99
    assert p99["method"] == "window-hist" and p99["needs"] is None
    assert p99["change_percent"] == pytest.approx((p99["ratio"] - 1) * 100)
    assert "(worse, significant" in p99["text"] and "one run of 6.6.0-rt" in p99["note"]
    assert cmp["regressions"] == [c.what for c in pairs[0].regressions]
    # the text output still says the same
    code, out, _ = run_cli(capsys, "compare", *stored, "--by", "kernel")
    assert code == 0 and "6.6.0-rt vs 6.1.0-rt (baseline):" in out
    assert p99["text"].split(";")[0] in out


def test_compare_json_not_significant_and_selection(
        stored: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "compare", stored[0], stored[1], "--cpus", "1",
                           "--channel", "cpu*", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["by"] == "run"
    assert doc["selection"] == {"everything": False, "cpus": "1", "channels": ["cpu*"],
                                "text": "--cpus 1 --channel cpu*"}
    assert [r["samples"] for r in doc["configurations"]] == [60_000, 60_000]  # CPU 1 only
    note = doc["configurations"][0]["runs"][0]["notes"][-1]
    assert note == "channels selected with --cpus 1 --channel cpu*: cpu1 (not shown: cpu0)"
    verdicts = {ch["statistic"]: ch["verdict"] for ch in doc["comparisons"][0]["changes"]}
    assert set(verdicts.values()) <= {"no change", "cannot tell", "better", "worse"}
    ns = [ch for ch in doc["comparisons"][0]["changes"] if not ch["significant"]]
    assert ns and all(ch["verdict"] in ("no change", "cannot tell")
                      and f"({ch['verdict']}:" in ch["text"] for ch in ns)


def test_compare_json_by_host_side_by_side(stored: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "compare", *stored, "--by", "host", "--json")
    doc = json.loads(out)
    assert code == 0 and [c["label"] for c in doc["configurations"]] == ["board1", "board2"]
    rows = {r["channel"]: r["configurations"] for r in doc["side_by_side"]}
    assert set(rows) == {"cpu0", "cpu1"}
    b1, b2 = rows["cpu1"]
    assert b1["label"] == "board1" and b1["samples"] == 120_000 and b2["samples"] == 60_000
    assert set(b1["percentiles_ns"]) == {"p99", "p99.9", "p99.99"} and b1["max_ns"] > 0


def test_compare_json_slo_html_junit_and_errors(stored: list[str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    html, junit = tmp_path / "c.html", tmp_path / "j.xml"
    code, out, err = run_cli(capsys, "compare", stored[0], stored[2], "--slo", "max < 1us",
                             "--html", str(html), "--junit", str(junit), "--json")
    doc = json.loads(out)  # nothing but the document on stdout
    assert code == 3 and err == ""
    assert doc["slo"]["passed"] is False and doc["slo"]["expression"] == "max < 1us"
    assert doc["slo"]["checks"] == 4 and len(doc["slo"]["failures"]) == 4
    f = doc["slo"]["failures"][0]
    assert f["run_id"] == stored[0] and f["clause"] == "max < 1us" and f["value"] > 1000
    assert doc["slo"]["summary"].startswith("SLO VIOLATED")
    assert doc["html"] == str(html) and html.stat().st_size > 10_000
    assert doc["junit"] == str(junit) and b"<testsuites" in junit.read_bytes()
    code, out, _ = run_cli(capsys, "compare", stored[0], stored[2], "--slo", "max < 1s",
                           "--json")
    assert code == 0 and json.loads(out)["slo"]["passed"] is True
    code, out, err = run_cli(capsys, "compare", stored[0], "--by", "kernel", "--json")
    assert code == 2 and out == "" and "nothing to compare" in err


def test_compare_help_names_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--help"])
    assert exc.value.code == 0 and "--json" in capsys.readouterr().out


def test_compare_json_imported_tails_are_intervals(store_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from rtlab.results.importers import import_file

    data = DATA
    s = Store.open(str(store_path))
    s.add(synthetic_result("aaaa0001", windows=10, median_ns=12_000), probe_shape)
    s.add(import_file(data / "cyclictest_nsecs.json", "cyclictest-json", "cccc0002"), probe_shape)
    s.close()
    code, out, _ = run_cli(capsys, "compare", "aaaa0001", "cccc0002", "--json")
    doc = json.loads(out)
    assert code == 0 and len(doc["notes"]) == 1 and "lower bound" in doc["notes"][0]
    peer = doc["configurations"][1]
    lo = peer["min_ns"]
    assert peer["beyond_range"] == {"count": peer["samples"], "above_ns": lo}
    assert peer["lower_bounds_ns"]["p99"] == lo
    p99 = doc["comparisons"][0]["changes"][2]
    assert p99["value_lower_bound_ns"] == lo and p99["baseline_lower_bound_ns"] is None
    assert p99["verdict"] == "cannot tell" and "interval" in p99["note"]
    assert "–" in p99["text"]
