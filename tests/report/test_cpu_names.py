# SPDX-License-Identifier: MIT
"""The boards' cores as their engines named them (system.cpu_model, system.cpu_models:
docs/engine-output.md#cpu-model) in every place a run is shown: the HTML report,
`rtlab results show`, `rtlab compare --by host` and `rtlab history`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.html import render_html
from rtlab.results.model import RunResult
from rtlab.results.store import Store
from tests.support.synth import synthetic_result

BIG_LITTLE = {"cpu_model": "4x Cortex-A55 + 4x Cortex-A76",
              "cpu_models": [{"cpus": [0, 1, 2, 3], "model": "Cortex-A55"},
                             {"cpus": [4, 5, 6, 7], "model": "Cortex-A76"}]}


def _board(run_id: str, hostname: str, cores: dict, *, seed: int = 1,
           release: str = "6.1.0-rt") -> RunResult:
    r = synthetic_result(run_id, seed=seed, windows=20, hostname=hostname, release=release)
    r.provenance["engine"]["system"].update(cores)
    return r


def _a53(run_id: str = "aaaa0001", **kw: object) -> RunResult:
    return _board(run_id, "a53-board", {"cpu_model": "Cortex-A53", "cpu_models": [
        {"cpus": [0, 1], "model": "Cortex-A53"}]}, **kw)  # type: ignore[arg-type]


def _a9(run_id: str = "aaaa0002") -> RunResult:
    return _board(run_id, "a9-board", {"cpu_model": "Cortex-A9", "cpu_models": [
        {"cpus": [0, 1], "model": "Cortex-A9"}]}, seed=2)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert err == "", err
    return code, out


@pytest.fixture
def stored(store_path: Path) -> list[str]:
    s = Store.open(str(store_path))
    runs = [_a53(), _a9(), _board("aaaa0003", "rk3588", BIG_LITTLE, seed=3),
            _a53("aaaa0004", seed=4, release="6.6.0-rt")]
    for r in runs:
        s.add(r, probe_shape)
    s.close()
    return [r.run_id for r in runs]


def test_html_names_the_cores_in_the_provenance_and_the_head() -> None:
    html = render_html([_board("aaaa0003", "rk3588", BIG_LITTLE)])
    assert ("CPU model</th><td class='kv'>4x Cortex-A55 + 4x Cortex-A76 (CPUs 0-3 Cortex-A55, "
            "4-7 Cortex-A76)</td>" in html)
    assert "host rk3588 (4x Cortex-A55 + 4x Cortex-A76) · kernel" in html
    one = render_html([_a53()])
    assert "CPU model</th><td class='kv'>Cortex-A53</td>" in one
    assert "host a53-board (Cortex-A53) · kernel" in one
    # a run of an engine that did not name the core: nothing invented
    old = _a53()
    del old.provenance["engine"]["system"]["cpu_models"]
    old.provenance["engine"]["system"]["cpu_model"] = None
    text = render_html([old])
    assert "Cortex" not in text and "host a53-board · kernel" in text


def test_html_compare_by_host_labels_boards_with_their_cores() -> None:
    html = render_html([_a53(), _a9()], compare_by="host")
    assert "<th colspan='3'>a53-board (Cortex-A53)</th>" in html  # side by side per CPU
    assert "<th colspan='3'>a9-board (Cortex-A9)</th>" in html
    assert "<b>a9-board (Cortex-A9)</b> vs <b>a53-board (Cortex-A53)</b>" in html
    by_kernel = render_html([_a53(), _a53("aaaa0004", seed=4, release="6.6.0-rt")],
                            compare_by="kernel")
    assert "<b>6.6.0-rt</b> vs <b>6.1.0-rt</b>" in by_kernel  # not a host grouping


def test_compare_by_host(stored: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _cli(capsys, "compare", stored[0], stored[1], stored[2], "--by", "host")
    assert code == 0
    assert "a9-board (Cortex-A9) vs a53-board (Cortex-A53) (baseline):" in out
    assert "rk3588 (4x Cortex-A55 + 4x Cortex-A76) vs a53-board (Cortex-A53)" in out
    code, out = _cli(capsys, "compare", stored[0], stored[1], "--by", "host", "--json")
    doc = json.loads(out)
    assert [(c["label"], c["cpu_model"]) for c in doc["configurations"]] == [
        ("a53-board", "Cortex-A53"), ("a9-board", "Cortex-A9")]
    code, out = _cli(capsys, "compare", stored[0], stored[3], "--by", "kernel", "--json")
    assert [c["cpu_model"] for c in json.loads(out)["configurations"]] == [None, None]


def test_results_show_and_history(stored: list[str], capsys: pytest.CaptureFixture[str]
                                  ) -> None:
    code, out = _cli(capsys, "results", "show", stored[2])
    assert code == 0
    assert "CPU 4x Cortex-A55 + 4x Cortex-A76 (CPUs 0-3 Cortex-A55, 4-7 Cortex-A76)" in out
    code, out = _cli(capsys, "results", "show", stored[2], "--json")
    doc = json.loads(out)
    assert doc["cpu_model"] == BIG_LITTLE["cpu_model"]
    assert doc["cpu_models"] == BIG_LITTLE["cpu_models"]
    code, out = _cli(capsys, "history", "--host", "a53-board")
    assert code == 0 and "host a53-board (Cortex-A53): timer runs by kernel" in out
    code, out = _cli(capsys, "history", "--host", "a53-board", "--json")
    doc = json.loads(out)
    assert doc["cpu_model"] == "Cortex-A53"
    assert [k["cpu_model"] for k in doc["kernels"]] == ["Cortex-A53", "Cortex-A53"]
