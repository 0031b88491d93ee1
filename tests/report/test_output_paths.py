# SPDX-License-Identifier: MIT
"""Every file a command writes goes through rtlab.fileio: devices, FIFOs, directories and
missing directories are refused before any work, one line, exit 2, nothing created; a
command that fails on one of its outputs writes none of them."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
from tests.support.devices import MINORS, device_nodes
from tests.support.synth import synthetic_result


@pytest.fixture
def stored(store_path: Path) -> str:
    s = Store.open(str(store_path))
    s.add(synthetic_result("bbbb0001", windows=20), probe_shape)
    s.close()
    return "bbbb0001"


def stored_count(capsys: pytest.CaptureFixture[str]) -> int:
    capsys.readouterr()
    assert main(["results", "list", "--json"]) == 0
    return len(json.loads(capsys.readouterr().out)["runs"])


def one_error(capsys: pytest.CaptureFixture[str], *words: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rtlab: error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err


def devices(tmp_path: Path) -> dict[str, str]:
    """The test's own null, full and zero device nodes (tests/support/devices.py),
    made once per test; without root the real ones."""
    dev = tmp_path / "dev"
    if not dev.exists():
        dev.mkdir()
        device_nodes(dev)
    return {name: str(dev / f"dev-{name}") if (dev / f"dev-{name}").exists()
            else f"/dev/{name}" for name in MINORS}


def bad_paths(tmp_path: Path) -> dict[str, str]:
    fifo = tmp_path / "pipe"
    if not fifo.exists():
        os.mkfifo(fifo)
    nodes = devices(tmp_path)
    return {nodes["full"]: "character device", nodes["null"]: "character device",
            str(tmp_path): "directory", str(fifo): "FIFO",
            str(tmp_path / "missing" / "x"): "does not exist",
            "/proc/self/comm": "proc filesystem"}


def test_report_never_replaces_a_device_or_writes_half(stored: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    before = sorted(os.listdir(tmp_path))
    for path, words in bad_paths(tmp_path).items():
        assert main(["report", stored, "-o", path]) == 2
        one_error(capsys, "--output", words)
        assert main(["report", stored, "-o", str(tmp_path / "r.html"), "--junit", path]) == 2
        one_error(capsys, "--junit", words)
    for node in devices(tmp_path).values():
        assert stat.S_ISCHR(os.stat(node).st_mode), node
    assert sorted(os.listdir(tmp_path)) == sorted({*before, "pipe", "dev"})  # no r.html
    assert sorted(os.listdir(tmp_path / "dev")) in ([], ["dev-full", "dev-null", "dev-zero"])


def test_report_to_standard_output(stored: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["report", stored, "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("<!DOCTYPE html>") and "report written to standard output" in err


def test_export_and_plot_refuse_what_is_not_a_file(stored: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for path, words in bad_paths(tmp_path).items():
        assert main(["export", stored, "--format", "csv", "-o", path]) == 2, path
        one_error(capsys, "--output", words)
    (tmp_path / "d.png").mkdir()
    os.mkfifo(tmp_path / "p.svg")
    for path, words in ((tmp_path / "d.png", "directory"), (tmp_path / "p.svg", "FIFO"),
                        (tmp_path / "missing" / "x.png", "does not exist")):
        assert main(["plot", stored, "-o", str(path)]) == 2, path
        one_error(capsys, "--output", words)
    assert sorted(os.listdir(tmp_path)) == ["d.png", "dev", "p.svg", "pipe", "store"]


def test_run_checks_its_outputs_before_measuring(stored: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    runs = stored_count(capsys)
    for option in ("--report", "--junit", "--samples"):
        for path, words in bad_paths(tmp_path).items():
            assert main(["run", "--probe", "timer", "--duration", "1s", "--cpus", "0",
                         "--no-progress", option,
                         path]) == 2, (option, path)
            one_error(capsys, option, words)
    assert stored_count(capsys) == runs  # nothing was measured or stored
    assert all(stat.S_ISCHR(os.stat(n).st_mode) for n in devices(tmp_path).values())
    assert main(["run", "--duration", "1s", "--report", "-"]) == 2
    one_error(capsys, "standard output")
    assert main(["run", "--duration", "1s", "--report", str(tmp_path / "a"),
                 "--junit", str(tmp_path / "a")]) == 2
    one_error(capsys, "same file")


def test_compare_checks_both_files_first_and_writes_both_or_none(
        store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = Store.open(str(store_path))
    s.add(synthetic_result("cccc0001", windows=20), probe_shape)
    s.add(synthetic_result("cccc0002", windows=20, seed=2), probe_shape)
    s.close()
    html = tmp_path / "c.html"
    for path, words in bad_paths(tmp_path).items():
        assert main(["compare", "cccc0001", "cccc0002", "--html", path]) == 2
        one_error(capsys, "--html", words)
        assert main(["compare", "cccc0001", "cccc0002", "--html", str(html),
                     "--junit", path]) == 2
        one_error(capsys, "--junit", words)
    assert main(["compare", "cccc0001", "cccc0002", "--html", "-"]) == 2
    one_error(capsys, "standard output")
    assert not html.exists()
    assert main(["compare", "cccc0001", "cccc0002", "--html", str(html), "--junit",
                 str(tmp_path / "j.xml")]) == 0
    assert html.stat().st_size > 1000 and (tmp_path / "j.xml").stat().st_size > 100
