# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

import pytest
from synth import synthetic_result

from rtlab.cli import main
from rtlab.results.store import Store


@pytest.fixture
def stored(store_path: Path) -> list[str]:
    s = Store.open(str(store_path))
    runs = [synthetic_result("aaaa0001", windows=60, release="6.1.0-rt"),
            synthetic_result("aaaa0002", seed=2, windows=60, release="6.1.0-rt"),
            synthetic_result("aaaa0003", seed=3, windows=60, release="6.6.0-rt",
                             median_ns=16_000)]
    for i, r in enumerate(runs):
        r.provenance["host"]["start_wall"] = f"2026-01-0{i + 1}T00:00:00+00:00"
        s.add(r)
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
    # --junit without --slo: validity checks; an unwritable file is one line, exit 1
    assert main(["run", "--duration", "2s", "--cpus", "0-1", "--no-progress",
                 "--no-report", "--junit", str(junit)]) == 0
    assert "valid measurement" in junit.read_text()
    capsys.readouterr()
    assert main(["run", "--duration", "2s", "--cpus", "0-1", "--no-progress",
                 "--no-report", "--junit", str(tmp_path / "no" / "such" / "j.xml")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rtlab: error: cannot write") and err.count("\n") == 1
