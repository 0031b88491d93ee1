# SPDX-License-Identifier: MIT
"""Scenario runs: phases with their own statistics, real stress-ng loads that are gone
afterwards, a matrix sharing one comparison id, Ctrl-C keeping what ran, the shield
released on every path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
from rtlab.runner import RunOptions, run_scenario
from rtlab.scenario import parse_text
from tests.support.env import subprocess_env

MATRIX = """\
[scenario]
name = "m"

[shield]
user = "last"
cpuset = false

[[load]]
name = "hog"
kind = "stress"
cpu = 1
cpus = "system"
timeout = "30s"

[[phase]]
name = "loaded"
duration = "2s"
loads = ["hog"]

[[matrix.variant]]
name = "plain"
shield = false

[[matrix.variant]]
name = "idle"
shield = false
loads = []

[[matrix.variant]]
name = "again"
shield = false
"""


TAG = "RTLAB_TEST_LOADS_OF"


@pytest.fixture(autouse=True)
def _tag_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Mark this test's processes (loads inherit the environment) so that stress-ng
    started by other rtlab runs on this machine meanwhile is not taken for ours."""
    monkeypatch.setenv(TAG, str(tmp_path))


def _stress_alive() -> list[str]:
    """This test's stress-ng processes (pid and command line)."""
    mark = f"{TAG}={os.environ[TAG]}".encode()
    out = subprocess.run(["pgrep", "-a", "stress-ng"], capture_output=True, text=True)
    ours = []
    for line in out.stdout.splitlines():
        try:
            env = Path(f"/proc/{line.split()[0]}/environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if mark in env:
            ours.append(line)
    return ours


def _load_argvs(result: Any) -> list[list[str]]:
    return [ld["argv"] for ph in result.provenance["host"]["phases"] for ld in ph["loads"]]


def test_matrix_runs_share_a_comparison(
    fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    f = tmp_path / "m.toml"
    f.write_text(MATRIX)
    before = _stress_alive()
    code = main(["run", str(f), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    store = Store.open(str(store_path))
    rows = store.list()
    assert len(rows) == 3
    results = [store.get(r.id) for r in rows]
    comparisons = {r.scenario["comparison"] for r in results}
    assert len(comparisons) == 1 and next(iter(comparisons)).startswith("cmp-")
    assert f"comparison {comparisons.pop()}" in out
    by_variant = {r.scenario["variant"]: r for r in results}
    assert set(by_variant) == {"plain", "idle", "again"}
    assert by_variant["idle"].phases[0].channels  # measured, without the load
    assert _load_argvs(by_variant["idle"]) == []
    argv = _load_argvs(by_variant["plain"])[0]
    assert argv[:3] == ["stress-ng", "--cpu", "1"] and "--taskset" in argv
    assert by_variant["plain"].scenario["text"] == MATRIX
    assert by_variant["plain"].scenario["hash"] != by_variant["idle"].scenario["hash"]
    assert _stress_alive() == before  # every load is gone


def test_ctrl_c_mid_phase_keeps_partial_and_stops_loads(
    fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path,
) -> None:
    fake_probe("normal", period=0.1)
    before = _stress_alive()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtlab", "run", "quick", "--duration", "100s", "--cpus", "0",
         "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(),
    )
    runs = store_path.parent / "runs"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until the second phase (loaded) measures
        files = list(runs.glob("*.2-load.jsonl")) if runs.exists() else []
        if files and files[0].read_text().count('"snapshot"') >= 3:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the load phase never started")
    assert _stress_alive() != before  # the load runs during the phase
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "PARTIAL" in out and "interrupted" in err
    result = Store.open(str(store_path)).get("last")
    assert result.partial and result.status == "partial"
    assert [p.name for p in result.phases] == ["idle", "load"]
    shape = probe_shape(result.probe)
    assert result.phases[0].merged(shape).samples == 50 * 500  # the idle phase completed
    assert 0 < result.phases[1].merged(shape).samples < 50 * 500
    assert _stress_alive() == before


class FakeShield:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def apply(self) -> dict[str, Any]:
        self.log.append("apply")
        return {"ok": True, "cpus": [1]}

    def phase_start(self) -> None:
        self.log.append("phase_start")

    def phase_check(self, own: dict[int, str]) -> dict[str, Any]:
        self.log.append("phase_check")
        return {"ok": True, "problems": [], "new_tasks": [], "new_tasks_total": 0}

    def release(self) -> dict[str, Any]:
        self.log.append("release")
        return {"released": True}

    @property
    def recorder(self) -> None:
        return None


@pytest.mark.parametrize("mode", ["normal", "crash", "usage"])
def test_shield_released_on_every_path(
    fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path, mode: str,
) -> None:
    fake_probe(mode, crash_after=1)
    text = "[shield]\nuser = \"last\"\n[[phase]]\nname = \"a\"\nduration = \"2s\"\n" \
           "[[phase]]\nname = \"b\"\nduration = \"2s\"\n"
    (sc,) = parse_text(text, "s.toml", online=[0, 1]).variants
    log: list[str] = []
    opts = RunOptions(store=Store.open(str(store_path)), handle_signals=False,
                      shield_backend=lambda _spec, _target: FakeShield(log), doctor=False,
                      preflight=lambda _p, _q: _ok())
    if mode == "usage":
        with pytest.raises(Exception, match="refused its arguments"):
            run_scenario(sc, opts)
    else:
        out = run_scenario(sc, opts)
        shield = out.result.provenance["host"]["shield"]
        assert shield["requested"]["user"] == [1] and shield["in_effect"] == {
            "ok": True, "cpus": [1]}
        if mode == "crash":  # the first phase broke: the second is not run
            assert out.result.partial and "phases not run: b" in out.result.notes
        checks = shield["phase_checks"]
        assert [c["phase"] for c in checks] == (["a"] if mode == "crash" else ["a", "b"])
    per_phase = ["phase_start", "phase_check"]
    phases = {"normal": 2, "crash": 1, "usage": 1}[mode]
    assert log == ["apply", *per_phase * phases, "release"]


def _ok() -> Any:
    from rtlab.runner import Privileges

    return Privileges(True, True)


def test_stale_journal_refuses_before_anything(
    fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    jdir = Path(os.environ["RTLAB_JOURNAL_DIR"])
    jdir.mkdir(parents=True)
    (jdir / "session-1.journal").write_text(
        '{"schema":1,"seq":1,"op":"write","path":"/nonexistent","old":"x","time_ns":1}\n')
    argv_file = tmp_path / "argv.json"
    fake_probe("normal", argv_out=argv_file)
    code = main(["run", "seed-shielded-cyclic", "--duration", "1s", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert "stale journal" in err and "rtlab restore" in err and "--restore-first" in err
    assert not argv_file.exists()


def test_real_quick_run_two_phases_with_stress(
    probe_bin: str, require_root: None, tmp_path: Path,
) -> None:
    store = tmp_path / "rtlab.db"
    before = _stress_alive()
    proc = subprocess.run(
        [sys.executable, "-m", "rtlab", "run", "--duration", "4s", "--no-progress",
         "--store", str(store)],
        capture_output=True, text=True, timeout=120,
        env=subprocess_env({"RTLAB_PROBE": probe_bin,
                            "RTLAB_JOURNAL_DIR": str(tmp_path / "j")}),
    )
    assert proc.returncode == 0, proc.stderr
    assert "phase idle" in proc.stdout and "phase load" in proc.stdout
    result = Store.open(str(store)).get("last")
    assert [p.name for p in result.phases] == ["idle", "load"]
    for phase in result.phases:  # separate per-CPU statistics per phase
        assert {ch.cpu for ch in phase.channels} == set(os.sched_getaffinity(0))
        assert all(ch.samples > 500 for ch in phase.channels)
    (argv,) = _load_argvs(result)
    assert argv[0] == "stress-ng" and "--vm" in argv and "--cpu" in argv
    (load,) = result.provenance["host"]["phases"][1]["loads"]
    assert load["status"] == "stopped" and not load["died_early"]
    assert load["processes"][0]["workers_seen"] >= 1  # it really ran
    assert "doctor" in result.provenance and "top" in result.provenance["doctor"]
    assert result.scenario["name"] == "quick" and result.scenario["text"].startswith("#")
    assert _stress_alive() == before
