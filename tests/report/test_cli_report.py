# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
from tests.support.synth import synthetic_result


@pytest.fixture
def stored(store_path: Path) -> list[str]:
    s = Store.open(str(store_path))
    runs = [synthetic_result("aaaa0001", windows=60, release="6.1.0-rt"),
            synthetic_result("aaaa0002", seed=2, windows=60, release="6.1.0-rt"),
            synthetic_result("aaaa0003", seed=3, windows=60, release="6.6.0-rt",
                             median_ns=16_000)]
    for i, r in enumerate(runs):
        r.provenance["host"]["start_wall"] = f"2026-01-0{i + 1}T00:00:00+00:00"
        s.add(r, probe_shape)
    s.close()
    return [r.run_id for r in runs]


def test_report_and_slo_exit_codes(stored: list[str], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    junit = tmp_path / "j.xml"
    assert main(["report", stored[0], "-o", str(out), "--slo", "max < 1s",
                 "--junit", str(junit)]) == 0
    assert out.stat().st_size > 10_000 and b"<testsuites" in junit.read_bytes()
    assert main(["report", stored[0], "-o", str(out), "--slo", "p50 < 1us"]) == 3
    capsys.readouterr()
    assert main(["report", stored[0], "--slo", "p50 << 1us"]) == 2
    assert main(["report", "ffffffff", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "no stored run matches" in err


def test_compare_and_history(stored: list[str], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", *stored, "--by", "kernel", "--html", str(tmp_path / "c.html")]) == 0
    out = capsys.readouterr().out
    assert "6.6.0-rt vs 6.1.0-rt" in out and "significant" in out
    assert main(["compare", stored[0], stored[1], "--slo", "max < 1ns"]) == 3
    assert main(["compare", stored[0], "--by", "kernel"]) == 2
    capsys.readouterr()
    assert main(["history", "--host", "board1"]) == 0
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "6.6.0-rt" in out
    assert main(["history", "--host", "nosuchboard"]) == 2


@pytest.mark.parametrize("kind", ["hist", "ccdf", "timeline"])
def test_plot(stored: list[str], tmp_path: Path, kind: str) -> None:
    png = tmp_path / f"{kind}.png"
    assert main(["plot", stored[0], "--kind", kind, "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / f"{kind}.svg"
    assert main(["plot", stored[0], "--kind", kind, "-o", str(svg)]) == 0
    assert b"<svg" in svg.read_bytes()[:2000]
    assert main(["plot", stored[0], "-o", str(tmp_path / "x.gif")]) == 2


def test_run_writes_its_report_and_gates(fake_probe, store_path: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    import xml.etree.ElementTree as ET

    # by default the report goes beside the store and its path is printed
    assert main(["run", "--duration", "2s", "--cpus", "0-1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("report: ")]
    path = Path(line.split(": ", 1)[1])
    assert path.parent == store_path.parent / "reports" and path.stat().st_size > 10_000
    assert "Histograms per CPU" in path.read_text()
    # an SLO the run violates: exit code 3, JUnit with failures, the report still written
    junit, html = tmp_path / "j.xml", tmp_path / "r.html"
    assert main(["run", "--duration", "2s", "--cpus", "0-1", "--no-progress",
                 "--slo", "max < 1ns and p99 < 1s", "--junit", str(junit),
                 "--report", str(html)]) == 3
    root = ET.parse(junit).getroot()
    assert int(root.get("failures")) >= 1 and int(root.get("tests")) >= 2
    assert "SLO VIOLATED" in html.read_text()
    # --junit without --slo: validity checks; an unwritable path is one line, exit 2,
    # before anything is measured (tests/report/test_output_paths.py)
    assert main(["run", "--duration", "2s", "--cpus", "0-1", "--no-progress",
                 "--no-report", "--junit", str(junit)]) == 0
    assert "valid measurement" in junit.read_text()
    capsys.readouterr()
    assert main(["run", "--duration", "2s", "--cpus", "0-1", "--no-progress",
                 "--no-report", "--junit", str(tmp_path / "no" / "such" / "j.xml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rtlab: error: --junit") and "does not exist" in err
    assert err.count("\n") == 1


@pytest.fixture
def mbda(store_path: Path) -> list[str]:
    """Two steps of a matrix on one host: CPU 0 (housekeeping) much worse in the second,
    CPU 1 (shielded) alike in both."""
    s = Store.open(str(store_path))
    ids = []
    for i, (variant, cpu0_ns) in enumerate((("smp", 12_000), ("irqs-cpu0", 60_000))):
        r = synthetic_result(f"bbbb000{i + 1}", seed=i + 1, windows=60)
        busy = synthetic_result("x", seed=i + 50, windows=60, median_ns=cpu0_ns)
        r.phases[0].channels[0] = busy.phases[0].channels[0]
        r.scenario = {"name": "multicore-migration", "hash": "cd" * 32, "variant": variant}
        s.add(r, probe_shape)
        ids.append(r.run_id)
    s.close()
    return ids


def test_compare_selects_cpus_and_channels(mbda: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", *mbda, "--by", "variant"]) == 0
    out = capsys.readouterr().out
    assert "worse, significant" in out  # CPU 0 merged into the row: irqs-cpu0 looks worse
    assert main(["compare", *mbda, "--by", "variant", "--cpus", "1"]) == 0
    out = capsys.readouterr().out
    assert "latency in µs by variant (--cpus 1)" in out
    assert "worse, significant" not in out and "not significant" in out
    assert "60,000" in out.replace("\u202f", ",")  # one CPU's samples per row
    # the same by name, repeatable or as a comma list, shell patterns allowed
    for sel in (["--channel", "cpu1"], ["--channel", "cpu9,cpu1"],
                ["--channel", "nope", "--channel", "c?u1"]):
        assert main(["compare", *mbda, "--by", "variant", *sel]) == 0, sel
        assert "worse, significant" not in capsys.readouterr().out
    assert main(["compare", *mbda, "--by", "variant", "--cpus", "1", "--slo",
                 "p99 < 30us"]) == 0  # the gate sees CPU 1 only
    assert main(["compare", *mbda, "--by", "variant", "--slo", "p99 < 30us"]) == 3


@pytest.mark.parametrize(("args", "message"), [
    (["--cpus", "4-5"], "rtlab: error: run bbbb0001: no channel matches --cpus 4-5; its "
     "channels: cpu0, cpu1"),
    (["--channel", "thread@*"], "rtlab: error: run bbbb0001: no channel matches --channel "
     "thread@*; its channels: cpu0, cpu1"),
    (["--cpus", "1-"], "rtlab: error: --cpus: invalid CPU list '1-': bad item '1-' (use "
     "numbers and ranges, e.g. 0,2-3)"),
    (["--channel", "cpu1,"], "rtlab: error: --channel 'cpu1,': empty channel name (e.g. "
     "--channel cpu1 or --channel 'thread@cpu*')"),
])
def test_selection_errors_are_one_line_exit_2(mbda: list[str], tmp_path: Path, args: list[str],
                                              message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in (["compare", *mbda], ["report", mbda[0], "-o", str(tmp_path / "r.html")]):
        assert main([*cmd, *args]) == 2
        assert capsys.readouterr().err.splitlines() == [message]
    assert not (tmp_path / "r.html").exists()


def test_report_selection_applies_to_verdict_slo_and_junit(
    mbda: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    import xml.etree.ElementTree as ET

    html, junit = tmp_path / "r.html", tmp_path / "j.xml"
    assert main(["report", mbda[1], "-o", str(html), "--slo", "p99 < 30us"]) == 3
    capsys.readouterr()
    assert main(["report", *mbda, "-o", str(html), "--cpus", "1", "--slo", "p99 < 30us",
                 "--junit", str(junit)]) == 0
    assert "SLO met" in capsys.readouterr().out
    text = html.read_text()
    assert "channels selected with --cpus 1: cpu1 (not shown: cpu0)" in text
    assert "on CPU1" in text and "on CPU0" not in text  # the verdicts' worst channel
    classes = {tc.get("classname") for tc in ET.parse(junit).getroot().iter("testcase")}
    assert classes == {f"rtlab.{r}.main.cpu1" for r in mbda}
