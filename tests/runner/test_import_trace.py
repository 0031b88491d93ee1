# SPDX-License-Identifier: MIT
"""`rtlab results import` of a traced run whose host died: the phase's trace capture and
samples beside its raw file are attributed at import as the runner does, and kept in the
store's runs directory (issue 26).

The files are recorded once by the real engine on this machine, as a traced run leaves
them: `ID.jsonl`, `ID.1-spin.samples`, `ID.1-spin.trace/` (CPU 1, where a FIFO 90 spinner
preempts the probe 300 µs every 20 ms) and `ID.1-spin.trace.p2/` (CPU 0: the second part of
a probe split in parts). Latency values are never asserted; the named cause is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rtlab.cli import main
from rtlab.results.store import Store
from rtlab.runner.importer import import_jsonl
from tests.conftest import machine_lock
from tests.support.paths import SPINNER

RUN = "0123abcd"
STEM = f"{RUN}.1-spin"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, probe_bin: str) -> Iterator[
        tuple[Path, int]]:
    """(the directory of the recorded files, the spinner's pid)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (tracefs, SCHED_FIFO)")
    if "tracefs" not in Path("/proc/filesystems").read_text():
        pytest.skip("kernel without tracefs")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs CPUs 0 and 1")
    d = tmp_path_factory.mktemp("recorded")
    with machine_lock():
        spinner = subprocess.Popen([sys.executable, str(SPINNER), "1", "90", "300", "20",
                                    "300"])
        try:
            main_part = subprocess.Popen(
                [probe_bin, "timer", "--cpus", "1", "--priority", "80", "--duration", "2s",
                 "--trace-dir", str(d / f"{STEM}.trace"), "--samples",
                 str(d / f"{STEM}.samples"), "--output", str(d / f"{RUN}.jsonl")],
                stderr=subprocess.PIPE, text=True)
            second = subprocess.run(
                [probe_bin, "timer", "--cpus", "0", "--priority", "70", "--duration", "2s",
                 "--trace-dir", str(d / f"{STEM}.trace.p2"), "--output",
                 str(d / "second.jsonl")], capture_output=True, text=True, timeout=300)
            err = main_part.communicate(timeout=300)[1]
        finally:
            spinner.kill()
            spinner.wait()
    assert main_part.returncode == 0 and second.returncode == 0, (err, second.stderr)
    (d / "second.jsonl").unlink()  # its raw file is not the run's (only its capture)
    yield d, spinner.pid


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _spun(spike: dict[str, Any], pid: int) -> int:
    return sum(c["duration_ns"] for c in spike["components"]
               if c["kind"] == "task" and c["id"] == pid)


def test_capture_beside_a_raw_file_is_attributed_at_import(
        recorded: tuple[Path, int], tmp_path: Path, store_path: Path) -> None:
    """A raw file from elsewhere: the run's phase named after its capture, spikes above the
    default 100 µs attributed, the spinner named, a note saying so; the capture's parts
    merged into the store's runs directory, the given directory unchanged."""
    src = _copy(recorded[0], tmp_path / "from")
    pid = recorded[1]
    before = sorted(p.name for p in src.rglob("*"))
    store = Store.open(str(store_path))
    try:
        result = import_jsonl(src / f"{RUN}.jsonl", store, ["rtlab"])
    finally:
        store.close()
    (phase,) = result.phases
    assert phase.name == "spin"
    assert phase.trace is not None and phase.spike_summary is not None
    assert phase.trace["capture"] == f"{STEM}.trace" and phase.trace["imported"] is True
    assert phase.trace["cpus"] == [0, 1] and phase.trace["channel_cpus"] == [1]
    summary = phase.spike_summary
    assert summary["threshold_ns"] == 100_000
    assert summary["spikes"] == sum(summary["by_class"].values()) > 0
    assert all(s["cpu"] == 1 and s["latency_ns"] > 100_000 for s in phase.spikes or [])
    mine = [s for s in phase.spikes or [] if _spun(s, pid) >= 150_000]
    assert len(mine) >= 10, [s["summary"] for s in (phase.spikes or [])[:10]]
    assert any("spikes attributed at import" in n and "100us" in n for n in result.notes)
    runs = store_path.parent / "runs"
    kept = runs / f"{STEM}.trace"
    assert json.loads((kept / "meta.json").read_text())["cpus"] == [0, 1]
    assert (kept / "cpu0.pages").is_file() and (kept / "cpu1.pages").is_file()
    assert not (runs / f"{STEM}.trace.p2").exists()
    assert (runs / f"{STEM}.samples").read_bytes() == (src / f"{STEM}.samples").read_bytes()
    assert sorted(p.name for p in src.rglob("*")) == before

    # rtlab spikes shows it as for a live traced run, and attributes again from the kept files
    assert main(["spikes", RUN, "--limit", "5"]) == 0
    assert main(["spikes", RUN, "--json", "--trace-threshold", "200us"]) == 0


def test_in_the_store_the_layout_gives_the_threshold_and_parts_merge_in_place(
        recorded: tuple[Path, int], store_path: Path, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """A killed run's files in the store's own runs directory, with the layout the runner
    wrote (its [trace] threshold): attributed with that threshold, parts merged in place."""
    runs = _copy(recorded[0], store_path.parent / "runs")
    (runs / f"{RUN}.layout.json").write_text(json.dumps({
        "version": 1, "run_id": RUN,
        "phases": [{"name": "spin", "files": [{"label": None, "file": f"{RUN}.jsonl"}]}],
        "trace": {"enabled": True, "threshold_ns": 200_000}}))
    assert main(["results", "import", str(runs / f"{RUN}.jsonl")]) == 0
    assert "spikes attributed at import" in capsys.readouterr().out
    store = Store.open(str(store_path))
    try:
        (phase,) = store.get(RUN).phases
    finally:
        store.close()
    assert phase.spike_summary is not None and phase.spike_summary["threshold_ns"] == 200_000
    assert all(s["latency_ns"] > 200_000 for s in phase.spikes or [])
    assert not (runs / f"{STEM}.trace.p2").exists()
    assert json.loads((runs / f"{STEM}.trace" / "meta.json").read_text())["cpus"] == [0, 1]


def test_a_capture_that_cannot_be_read_is_a_note(recorded: tuple[Path, int], tmp_path: Path,
                                                  store_path: Path) -> None:
    """A broken capture never fails the import: the run is stored, a note says why its
    spikes were not attributed."""
    src = _copy(recorded[0], tmp_path / "from")
    (src / f"{STEM}.trace" / "meta.json").write_text('{"version": 1, "cpus": [1]')
    store = Store.open(str(store_path))
    try:
        result = import_jsonl(src / f"{RUN}.jsonl", store, ["rtlab"])
        assert store.exists(RUN)
    finally:
        store.close()
    assert result.phases[0].trace is None
    assert any(f"the trace capture {STEM}.trace cannot be read" in n
               and "spikes not attributed" in n for n in result.notes), result.notes
