# SPDX-License-Identifier: MIT
"""Runs whose probes measure different quantities (a timer's wake-up latency, a udp round
trip, a noise gap) are never compared: `rtlab compare` (text, --json, --html) refuses
them in one line naming both quantities; `rtlab report` of several such runs shows each
run and says why none is compared with another."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rtlab.analysis.configs import build_configs, mixed_quantities, quantity
from rtlab.cli import main
from rtlab.errors import UsageError
from rtlab.probes.registry import names
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
from tests.support.paths import DATA
from tests.support.synth import synthetic_result


def test_quantity_comes_from_the_probe_registry() -> None:
    timer = synthetic_result("aaaa0001")
    for probe in [*names(), "from-a-newer-engine"]:
        assert quantity(replace(timer, probe=probe), probe_shape) == probe_shape(probe).measures
    assert quantity(replace(timer, probe="udp"), probe_shape) != quantity(timer, probe_shape)


def test_mixed_quantities_names_the_first_run_of_each() -> None:
    a = synthetic_result("aaaa0001")
    b = synthetic_result("aaaa0002", seed=2)
    u = replace(synthetic_result("aaaa0003", seed=3), probe="udp")
    assert mixed_quantities([a, b], probe_shape) is None
    why = mixed_quantities([a, b, u], probe_shape)
    assert why is not None and "run aaaa0001 measures wake-up latency (probe timer)" in why
    assert "run aaaa0003 round trip (probe udp)" in why
    # the switch probe's values are wake-up latencies too: comparable with a timer's
    assert mixed_quantities([a, replace(b, probe="switch")], probe_shape) is None
    for by in ("run", "kernel", "host"):
        with pytest.raises(UsageError) as exc:
            build_configs([a, u], by, shape_of=probe_shape)
        assert "not compared" in exc.value.one_line() and "\n" not in exc.value.one_line()


@pytest.fixture
def timer_and_udp(tmp_path: Path) -> tuple[Path, list[str]]:
    """A cyclictest (timer) and a sockperf (udp round trip) import in a store of their own."""
    store = tmp_path / "s.db"
    for fmt, f in (("cyclictest-json", "cyclictest.json"), ("sockperf", "sockperf_full_log.csv"),
                   ("oslat", "oslat_v2.json")):
        assert main(["results", "import", "--format", fmt, "--store", str(store),
                     str(DATA / f)]) == 0
    s = Store.open(str(store))
    try:
        rows = s.list()
        ids = {s.get(row.id).probe: row.id for row in rows}
    finally:
        s.close()
    return store, [ids["timer"], ids["udp"], ids["noise"]]


@pytest.mark.parametrize("extra", [[], ["--json"], ["--html", "OUT"], ["--by", "kernel"]])
def test_compare_of_different_quantities_is_refused(
        timer_and_udp: tuple[Path, list[str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    store, (timer, udp, noise) = timer_and_udp
    out = tmp_path / "cmp.html"
    extra = [str(out) if a == "OUT" else a for a in extra]
    before = sorted(p.name for p in tmp_path.iterdir())
    for pair, words in (([timer, udp], "round trip (probe udp)"),
                        ([noise, timer], "noise gap (probe noise)")):
        capsys.readouterr()
        assert main(["compare", *pair, "--store", str(store), *extra]) == 2
        stdout, err = capsys.readouterr()
        assert stdout == "" and err.count("\n") == 1 and "Traceback" not in err
        assert "not compared" in err and words in err and "wake-up latency" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no --html file


def test_report_of_different_quantities_shows_each_run_and_compares_none(
        timer_and_udp: tuple[Path, list[str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    store, (timer, udp, _noise) = timer_and_udp
    out = tmp_path / "r.html"
    assert main(["report", timer, udp, "--store", str(store), "-o", str(out)]) == 0
    html = out.read_text()
    assert "runs not compared" in html and "round trip (probe udp)" in html
    assert f"Run {timer}" in html and f"Run {udp}" in html
    assert "vs" not in html.split("runs not compared")[1].split("<h2>")[0]
