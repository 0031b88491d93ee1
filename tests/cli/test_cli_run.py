# SPDX-License-Identifier: MIT
"""End to end through the CLI with the fake engine: run -> store -> list/show -> export."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import load_result
from rtlab.results.store import Store
from tests.support.env import subprocess_env


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_store_list_show_export(
    fake_probe: Callable[..., Path], store_path: Path, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    argv_file = tmp_path / "argv.json"
    fake_probe("normal", argv_out=argv_file)
    # the default scenario (quick): two phases, idle then under load; --duration is the
    # total, split in the scenario's proportions (25 s + 25 s -> 2 s + 2 s)
    code, out, err = run_cli(capsys, "run", "--duration", "4s", "--cpus", "0-1",
                             "--interval", "500us", "--no-progress")
    assert code == 0, err
    assert "CPU0" in out and "CPU1" in out and "p99.9999" in out
    assert "worst wake-up latency" in out
    assert f"stored in {store_path}" in out
    # the host spoke the engine's option syntax
    args = json.loads(argv_file.read_text())
    assert args[0] == "timer"
    assert args[args.index("--cpus") + 1] == "0-1"
    assert args[args.index("--interval") + 1] == "500us"
    assert args[args.index("--duration") + 1] == "2s"

    store = Store.open(str(store_path))
    rows = store.list()
    assert len(rows) == 1
    row = rows[0]
    assert row.status == "completed" and row.samples == 2 * 2 * 2 * 500
    assert row.host == "fakehost" and row.kernel_release == "6.1.0-fake"
    assert row.p99_ns is not None and row.worst_max_ns is not None
    raw = store.raw_path(row.id)
    assert raw.exists() and raw.read_text().count("\n") >= 5  # tee'd while running
    result = store.get(row.id)
    assert result.scenario["name"] == "quick" and len(result.scenario["hash"]) == 64
    assert [p.name for p in result.phases] == ["idle", "load"]
    assert len(result.phases[0].channels[0].windows) == 2  # window maxima from every record
    store.close()

    code, out, _ = run_cli(capsys, "results", "list")
    assert code == 0 and row.id in out and "completed" in out
    code, out, _ = run_cli(capsys, "results", "show", row.id[:4])
    assert code == 0 and row.id in out and "CPU1" in out
    code, out, _ = run_cli(capsys, "results", "show", "last")
    assert code == 0 and row.id in out

    code, out, _ = run_cli(capsys, "export", "last", "--format", "json")
    assert code == 0
    again = load_result(json.loads(out))
    assert again.run_id == row.id and again.merged(probe_shape(again.probe)).samples == row.samples

    code, out, _ = run_cli(capsys, "export", row.id, "--format", "csv")
    rows_csv = list(csv.DictReader(io.StringIO(out)))
    # one row per phase and channel, and an "all" row per phase
    assert [r["channel"] for r in rows_csv] == ["cpu0", "cpu1", "all"] * 2
    assert sum(int(r["samples"]) for r in rows_csv if r["channel"] == "all") == row.samples

    code, out, _ = run_cli(capsys, "export", row.id, "--format", "csv-hist")
    hist_rows = list(csv.DictReader(io.StringIO(out)))
    assert sum(int(r["count"]) for r in hist_rows) == row.samples

    md = tmp_path / "r.md"
    code, out, _ = run_cli(capsys, "export", row.id, "--format", "markdown", "-o", str(md))
    text = md.read_text()
    assert code == 0 and out == ""
    assert "| channel | samples | min | avg | p50 | p99 |" in text
    assert "|---|---:|" in text and "| CPU0 |" in text


def test_threshold_run_exits_3(
    fake_probe: Callable[..., Path], store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_probe("normal")
    code, out, _ = run_cli(capsys, "run", "--duration", "6s", "--cpus", "0",
                           "--threshold", "50us", "--no-progress")
    assert code == 3
    assert "THRESHOLD EXCEEDED" in out
    assert Store.open(str(store_path)).list()[0].status == "threshold"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "--cpus", "0-x"], "invalid CPU list"),
        (["run", "--cpus", "3-1"], "reversed"),
        (["run", "--cpus", "4000"], "not online"),
        (["run", "--duration=-5s"], "must be positive"),
        (["run", "--duration", "10"], "invalid --duration"),
        (["run", "--interval", "1.5ns"], "whole number"),
        (["run", "--priority", "150"], "out of range"),
        (["run", "--policy", "deadline"], "invalid choice"),
        (["export", "nosuchrun"], "no stored run"),
        (["results", "list", "--limit", "-1"], "--limit"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    fake_probe: Callable[..., Path], store_path: Path, capsys: pytest.CaptureFixture[str],
    argv: list[str], needle: str,
) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors exit directly
        code = int(exc.code or 0)
    _, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err
    # nothing was started: no raw run files
    runs = store_path.parent / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_missing_probe_says_make_setup(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.delenv("RTLAB_PROBE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    code, _, err = run_cli(capsys, "run", "--duration", "1s", "--no-progress")
    assert code == 1, err
    assert "rtlab-probe not found" in err and "make setup" in err


def test_engine_skip_exit_4(
    fake_probe: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_probe("skip")
    code, _, err = run_cli(capsys, "run", "--duration", "1s", "--no-progress")
    assert code == 4
    assert err.strip().splitlines() == [
        "rtlab: error: rtlab-probe: cannot set SCHED_FIFO priority 99: Operation not "
        "permitted (run as root or grant CAP_SYS_NICE)"
    ]


def test_sigint_to_host_stores_partial_exit_130(
    fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path
) -> None:
    fake_probe("normal", period=0.1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtlab", "run", "--duration", "60s", "--cpus", "0",
         "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(),
    )
    runs = store_path.parent / "runs"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:  # wait until snapshots are flowing
        files = list(runs.glob("*.jsonl")) if runs.exists() else []
        if files and files[0].read_text().count('"snapshot"') >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "PARTIAL" in out and "interrupted" in err
    row = Store.open(str(store_path)).list()[0]
    assert row.status == "partial" and row.partial
    assert 0 < row.samples < 60 * 500


def test_import_raw_file_recovers_run(
    fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    raw = tmp_path / "probe-out.jsonl"
    wrapper = fake_probe("crash", crash_after=2)
    subprocess.run([str(wrapper), "timer", "--cpus", "0-1", "--duration", "10s"],
                   stdout=raw.open("w"), check=False)
    code, out, err = run_cli(capsys, "results", "import", str(raw))
    assert code == 0, err
    assert "PARTIAL" in out and "imported" in out
    store = Store.open(str(store_path))
    result = store.get("last")
    assert result.partial and result.status == "partial"
    assert result.merged(probe_shape(result.probe)).samples == 2 * 2 * 500
    assert store.raw_path(result.run_id).exists()
    # importing the stored raw file again cannot overwrite the run
    code, _, err = run_cli(capsys, "results", "import", str(store.raw_path(result.run_id)))
    assert code == 1 and "never overwritten" in err


def test_a_run_the_engine_refuses_leaves_no_trace(
    fake_probe: Callable[..., Path], store_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The engine refuses its options (exit 2) before measuring: nothing is stored, and
    neither an empty raw file nor the run's layout file is left in the store's runs/."""
    fake_probe("usage")
    code, _, err = run_cli(capsys, "run", "--duration", "2s", "--cpus", "0",
                           "--no-progress", "--no-report")
    assert code == 2, err
    assert "refused its arguments" in err
    runs = store_path.parent / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []
    store = Store.open(str(store_path))
    try:
        assert store.list() == []
    finally:
        store.close()


@pytest.mark.parametrize("argv", [
    ["results", "show", "last"], ["export", "last"],
    ["report", "last"], ["history", "--host", "b7"], ["spikes", "last"],
])
def test_read_commands_do_not_create_a_store(tmp_path: Path, argv: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "no" / "such" / "dir" / "x.db"
    code, _, err = run_cli(capsys, *argv, "--store", str(where))
    assert code == 2, err
    assert "there is no result store at" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()


def test_listing_a_store_that_does_not_exist_creates_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "no" / "such" / "dir" / "x.db"
    code, out, err = run_cli(capsys, "results", "list", "--store", str(where))
    assert code == 0, err
    assert "no runs stored" in out and str(where) in out
    assert not (tmp_path / "no").exists()


def test_import_of_a_raw_file_from_a_future_schema_is_a_usage_error(
    fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A raw file this rtlab cannot read is bad input: one line naming the file and its
    line, exit 2 (as docs/results.md promises), nothing stored."""
    raw = tmp_path / "future.jsonl"
    wrapper = fake_probe("schema")  # the fake engine writes schema 99
    subprocess.run([str(wrapper), "timer", "--cpus", "0", "--duration", "1s"],
                   stdout=raw.open("w"), check=False)
    code, _, err = run_cli(capsys, "results", "import", str(raw))
    assert code == 2, err
    assert f"{raw}:1:" in err and "schema 99" in err and len(err.strip().splitlines()) == 1
    store = Store.open(str(store_path))
    try:
        assert store.list() == []
    finally:
        store.close()
