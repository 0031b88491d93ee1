# SPDX-License-Identifier: MIT
"""`rtlab results import` of a multi-phase run whose host was killed: real 2-phase
scenario runs (real engine) killed with SIGKILL in their second phase, their raw files
(`ID.jsonl`, `ID.2-PHASE.jsonl`, `ID.N-PHASE-LABEL.jsonl`) imported as one run.

The second phase lasts 30 s (not 1 s) so that the kill lands in it for sure: the test
kills as soon as that phase's raw files hold three snapshots (100 ms apart)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rtlab.cli import main
from rtlab.results.model import RunResult
from tests.support.env import subprocess_env
from tests.support.store_reading import stored_runs

PROBE = """
[[probe]]
name = "{label}"
probe = "timer"
cpus = "0"
interval = "1ms"
options = {{ snapshot_interval = "100ms" }}
"""
PHASES = """
[[phase]]
name = "{first}"
duration = "1s"

[[phase]]
name = "{second}"
duration = "{duration}"
"""


def _scenario(labels: list[str], first: str, second: str, duration: str) -> str:
    return ('[scenario]\nname = "reimport"\n'
            + "".join(PROBE.format(label=lb) for lb in labels)
            + PHASES.format(first=first, second=second, duration=duration))


def _snapshots(p: Path) -> int:
    return p.read_text(errors="replace").count('"type":"snapshot"')


def _run(base: Path, probe_bin: str, text: str, kill: bool) -> tuple[Path, Path]:
    """Run the scenario with the real engine (killed in phase 2 with `kill`): (the run's
    raw files' directory, its store)."""
    (base / "s.toml").write_text(text)
    store = base / "store" / "rtlab.db"
    env = subprocess_env({"RTLAB_PROBE": probe_bin, "RTLAB_STORE": str(store),
                          "XDG_DATA_HOME": str(base / "xdg"),
                          "RTLAB_JOURNAL_DIR": str(base / "journal")})
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtlab", "run", str(base / "s.toml"), "--no-progress",
         "--no-report", "--allow-non-rt"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    runs = store.parent / "runs"
    try:
        if kill:
            deadline = time.monotonic() + 60
            while True:
                later = list(runs.glob("*.2-*.jsonl")) if runs.is_dir() else []
                if later and all(_snapshots(p) >= 3 for p in later):
                    break
                assert proc.poll() is None, f"the run ended before phase 2: {proc.stderr}"
                assert time.monotonic() < deadline, "phase 2 never started"
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        else:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return runs, store


@pytest.fixture(scope="module")
def killed_one(tmp_path_factory: pytest.TempPathFactory, probe_bin: str) -> Path:
    """One probe: ID.jsonl (phase warm) and ID.2-busy.jsonl (killed)."""
    text = _scenario(["t"], "warm", "busy", "30s")
    runs, _ = _run(tmp_path_factory.mktemp("killed-one"), probe_bin, text, kill=True)
    return runs


@pytest.fixture(scope="module")
def killed_two(tmp_path_factory: pytest.TempPathFactory, probe_bin: str) -> Path:
    """Two probes zeta and alpha: ID.jsonl + ID.1-warm-up-alpha.jsonl, then
    ID.2-load-x-alpha.jsonl and ID.2-load-x-zeta.jsonl (killed)."""
    text = _scenario(["zeta", "alpha"], "warm-up", "load-x", "30s")
    runs, _ = _run(tmp_path_factory.mktemp("killed-two"), probe_bin, text, kill=True)
    return runs


@pytest.fixture(scope="module")
def completed_two(tmp_path_factory: pytest.TempPathFactory, probe_bin: str
                  ) -> tuple[Path, Path]:
    """Two probes, both phases 1 s, run to the end and stored by the runner."""
    text = _scenario(["zeta", "alpha"], "warm-up", "load-x", "1s")
    return _run(tmp_path_factory.mktemp("completed-two"), probe_bin, text, kill=False)


def _copy(runs: Path, dest: Path) -> dict[str, Path]:
    """The run's raw files copied to dest: {name pattern with ID for the id: path}."""
    dest.mkdir(parents=True, exist_ok=True)
    out = {}
    for p in sorted(runs.glob("*.jsonl")):
        shutil.copyfile(p, dest / p.name)
        out["ID" + p.name[8:]] = dest / p.name
    return out


def _raw_last(p: Path) -> dict[str, Any]:
    """The last complete snapshot/result line of a raw file (read here with json, not
    with the importer's reader)."""
    last = None
    for line in p.read_text().splitlines(keepends=True):
        if line.endswith("\n"):
            rec = json.loads(line)
            if rec["type"] in ("snapshot", "result"):
                last = rec
    assert last is not None
    return last


def _raw_samples(p: Path) -> dict[str, int]:
    return {c["name"]: c["samples"] for c in _raw_last(p)["channels"]}


def _samples(result: RunResult) -> list[dict[str, int]]:
    return [{c.name: c.samples for c in ph.channels} for ph in result.phases]


def _import(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["results", "import", *argv])
    return code, capsys.readouterr().err


def _imported(capsys: pytest.CaptureFixture[str], store_path: Path, *argv: str | Path
              ) -> RunResult:
    """`rtlab results import ARGV...` exits 0, and the store then holds one run: it."""
    code, err = _import(capsys, *map(str, argv))
    assert code == 0, err
    (result,) = stored_runs(store_path)
    return result


def _check_killed_one(result: RunResult, files: dict[str, Path]) -> None:
    run_id = files["ID.jsonl"].stem
    assert result.run_id == run_id
    assert [ph.name for ph in result.phases] == ["phase1", "busy"]
    assert _samples(result) == [_raw_samples(files["ID.jsonl"]),
                                _raw_samples(files["ID.2-busy.jsonl"])]
    first, second = _raw_last(files["ID.jsonl"]), _raw_last(files["ID.2-busy.jsonl"])
    assert (first["type"], first["status"], second["type"]) == ("result", "completed",
                                                                "snapshot")
    assert result.phases[0].channels[0].samples > 0
    assert 0 < result.phases[1].channels[0].samples < 30_000
    assert result.status == "partial" and result.partial
    assert any(n.startswith("phase busy: no final engine result") for n in result.notes)
    assert not any(n.startswith("phase phase1:") for n in result.notes)  # it completed
    assert "the first phase's name is in no raw file: called it 'phase1'" in result.notes
    assert f"imported from {run_id}.jsonl, {run_id}.2-busy.jsonl" in result.notes
    assert [ph["raw"] for ph in result.provenance["host"]["phases"]] == [
        [f"{run_id}.jsonl"], [f"{run_id}.2-busy.jsonl"]]


def test_killed_run_imported_as_one_run(
    killed_one: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _copy(killed_one, store_path.parent / "runs")  # where the runner left them
    result = _imported(capsys, store_path, files["ID.jsonl"])
    _check_killed_one(result, files)


@pytest.mark.parametrize("where", ["header", "capture"])
def test_first_phase_name_from_a_traced_run_s_files(
    where: str, killed_one: Path, store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A traced phase's samples file (ID.N-PHASE.samples, named in the engine header when
    the runner chose it) or its capture directory (ID.N-PHASE.trace) names it."""
    files = _copy(killed_one, tmp_path / "elsewhere")
    run_id = files["ID.jsonl"].stem
    if where == "capture":
        (tmp_path / "elsewhere" / f"{run_id}.1-warm.trace").mkdir()
    else:
        header, *rest = files["ID.jsonl"].read_text().splitlines(keepends=True)
        rec = json.loads(header)
        rec["config"]["samples_file"] = f"/elsewhere/runs/{run_id}.1-warm.samples"
        files["ID.jsonl"].write_text(json.dumps(rec) + "\n" + "".join(rest))
    result = _imported(capsys, store_path, files["ID.jsonl"])
    assert [ph.name for ph in result.phases] == ["warm", "busy"]
    assert not any("in no raw file" in n for n in result.notes)


def test_any_phase_file_brings_the_whole_run_and_its_files(
    killed_one: Path, store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _copy(killed_one, tmp_path / "elsewhere")
    result = _imported(capsys, store_path, files["ID.2-busy.jsonl"])
    _check_killed_one(result, files)
    runs = store_path.parent / "runs"
    assert sorted(p.name for p in runs.iterdir()) == sorted(p.name for p in files.values())
    for p in files.values():
        assert (runs / p.name).read_bytes() == p.read_bytes()


@pytest.mark.parametrize("damage", ["corrupt", "header-only", "empty"])
def test_lost_phase_file_the_rest_is_imported(
    damage: str, killed_one: Path, store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = _copy(killed_one, tmp_path / "elsewhere")
    second = files["ID.2-busy.jsonl"]
    lines = second.read_text().splitlines(keepends=True)
    second.write_text({"corrupt": "{\"type\": \"snap\n\x00\x01garbage\nnot json\n",
                       "header-only": lines[0], "empty": ""}[damage])
    result = _imported(capsys, store_path, files["ID.jsonl"])
    assert [ph.name for ph in result.phases] == ["phase1"]
    assert _samples(result) == [_raw_samples(files["ID.jsonl"])]
    why = f"phase busy lost: {second.name} holds no engine snapshot or result"
    assert why + (" (3 corrupt lines)" if damage == "corrupt" else "") in result.notes
    assert result.status == "partial" and result.partial  # phase 1 alone completed
    assert (store_path.parent / "runs" / second.name).read_bytes() == second.read_bytes()


def test_no_file_yields_anything_nothing_stored(
    killed_one: Path, store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _copy(killed_one, tmp_path / "elsewhere")
    files["ID.jsonl"].write_text("not json\n")
    files["ID.2-busy.jsonl"].write_text("")
    code, err = _import(capsys, str(files["ID.2-busy.jsonl"]))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "nothing to import" in err, err
    assert "Traceback" not in err
    assert stored_runs(store_path) == []
    assert not (store_path.parent / "runs").exists()


def test_missing_middle_phase_makes_the_run_partial(
    completed_two: tuple[Path, Path], store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = _copy(completed_two[0], tmp_path / "elsewhere")
    for key in ("ID.2-load-x-alpha.jsonl", "ID.2-load-x-zeta.jsonl"):
        p = files[key]
        p.rename(p.with_name(p.name.replace(".2-", ".3-")))
    result = _imported(capsys, store_path, files["ID.jsonl"])
    run_id = files["ID.jsonl"].stem
    assert [ph.name for ph in result.phases] == ["warm-up", "load-x"]
    assert f"phase 2 lost: no raw file {run_id}.2-*.jsonl" in result.notes
    assert result.status == "partial" and result.partial  # both phases it has completed


def test_multi_probe_phases_keep_their_label_prefixes(
    killed_two: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _copy(killed_two, store_path.parent / "runs")
    assert sorted(files) == ["ID.1-warm-up-alpha.jsonl", "ID.2-load-x-alpha.jsonl",
                             "ID.2-load-x-zeta.jsonl", "ID.jsonl"]
    result = _imported(capsys, store_path, files["ID.jsonl"])
    # the first phase's name comes from its second probe's file, the first probe's label
    # from the later phase's files; the probes in the scenario's order
    assert [ph.name for ph in result.phases] == ["warm-up", "load-x"]
    assert [[c.name for c in ph.channels] for ph in result.phases] == [
        ["zeta.cpu0", "alpha.cpu0"]] * 2

    def prefixed(label: str, p: Path) -> dict[str, int]:
        return {f"{label}.{k}": v for k, v in _raw_samples(p).items()}

    assert _samples(result) == [
        {**prefixed("zeta", files["ID.jsonl"]),
         **prefixed("alpha", files["ID.1-warm-up-alpha.jsonl"])},
        {**prefixed("zeta", files["ID.2-load-x-zeta.jsonl"]),
         **prefixed("alpha", files["ID.2-load-x-alpha.jsonl"])}]
    assert result.status == "partial" and result.partial
    for label in ("zeta", "alpha"):  # both probes of the killed phase say so, by label
        assert any(n.startswith(f"phase load-x: {label}: no final engine result")
                   for n in result.notes), result.notes
    assert not any("in no raw file" in n or "in no file name" in n for n in result.notes)


def test_completed_run_imports_as_the_runner_stored_it(
    completed_two: tuple[Path, Path], store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs, runner_store = completed_two
    (stored,) = stored_runs(runner_store)
    files = _copy(runs, tmp_path / "elsewhere")
    result = _imported(capsys, store_path, files["ID.2-load-x-zeta.jsonl"])
    assert result.run_id == stored.run_id
    assert [ph.to_dict() for ph in result.phases] == [ph.to_dict() for ph in stored.phases]
    assert (result.status, result.partial, result.rt_valid) == (
        stored.status, stored.partial, stored.rt_valid) == ("completed", False,
                                                           stored.rt_valid)
    assert result.provenance["engine"] == stored.provenance["engine"]
    assert [ph["raw"] for ph in result.provenance["host"]["phases"]] == [
        ph["raw"] for ph in stored.provenance["host"]["phases"]]


def test_stored_run_refused_and_one_file(
    killed_one: Path, store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _copy(killed_one, tmp_path / "elsewhere")
    run_id = files["ID.jsonl"].stem
    # --one-file: just that file, as before (the raw file of phase 1 keeps the run id)
    alone = _imported(capsys, store_path, "--one-file", files["ID.jsonl"])
    assert alone.run_id == run_id and [ph.name for ph in alone.phases] == ["main"]
    assert _samples(alone) == [_raw_samples(files["ID.jsonl"])]
    # the whole run has that id now: refused, from any of its files, nothing changed
    for name in ("ID.jsonl", "ID.2-busy.jsonl"):
        code, err = _import(capsys, str(files[name]))
        assert code == 1 and f"run {run_id} is already stored" in err, err
    assert [r.to_dict() for r in stored_runs(store_path)] == [alone.to_dict()]
    # a later phase's file alone gets a new id; so does a file not named like a raw file
    code, err = _import(capsys, "--one-file", str(files["ID.2-busy.jsonl"]))
    assert code == 0, err
    by_hand = tmp_path / "probe-out.jsonl"
    shutil.copyfile(files["ID.2-busy.jsonl"], by_hand)
    code, err = _import(capsys, str(by_hand))
    assert code == 0, err
    runs = stored_runs(store_path)
    assert len(runs) == 3 and len({r.run_id for r in runs}) == 3
    for r in runs:
        if r.run_id != run_id:
            assert [ph.name for ph in r.phases] == ["main"]
            assert _samples(r) == [_raw_samples(files["ID.2-busy.jsonl"])]
    code, err = _import(capsys, "--one-file", "--format", "sockperf", str(by_hand))
    assert code == 2 and "--one-file only applies" in err


def _with_layout(runs: Path, dest: Path) -> dict[str, Path]:
    """The run's raw files and the layout the runner wrote before it started."""
    files = _copy(runs, dest)
    (layout,) = runs.glob("*.layout.json")
    shutil.copyfile(layout, dest / layout.name)
    files["ID.layout.json"] = dest / layout.name
    return files


def test_the_runner_s_layout_names_every_phase_and_label(
    killed_one: Path, killed_two: Path, store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With `ID.layout.json` (written by the runner before anything ran) nothing is
    guessed: the first phase's name and the first probe's label are exact."""
    files = _with_layout(killed_one, tmp_path / "one")
    code, err = _import(capsys, str(files["ID.2-busy.jsonl"]))
    assert code == 0, err
    two = _with_layout(killed_two, tmp_path / "two")
    code, err = _import(capsys, str(two["ID.jsonl"]))
    assert code == 0, err
    one_r, two_r = sorted(stored_runs(store_path), key=lambda r: r.run_id != files["ID.jsonl"].stem)
    assert [ph.name for ph in one_r.phases] == ["warm", "busy"]
    assert _samples(one_r) == [_raw_samples(files["ID.jsonl"]),
                               _raw_samples(files["ID.2-busy.jsonl"])]
    assert [ph.name for ph in two_r.phases] == ["warm-up", "load-x"]
    assert [[c.name for c in ph.channels] for ph in two_r.phases] == [
        ["zeta.cpu0", "alpha.cpu0"]] * 2
    for r in (one_r, two_r):
        assert not any("in no raw file" in n or "in no file name" in n for n in r.notes)
        assert r.status == "partial" and r.partial
    runs = store_path.parent / "runs"
    assert (runs / files["ID.layout.json"].name).read_bytes() == \
        files["ID.layout.json"].read_bytes()


def test_phases_the_host_never_reached_are_named(
    completed_two: tuple[Path, Path], store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = _with_layout(completed_two[0], tmp_path / "elsewhere")
    for key in ("ID.2-load-x-alpha.jsonl", "ID.2-load-x-zeta.jsonl"):
        files.pop(key).unlink()  # as if the host died before phase 2 started
    result = _imported(capsys, store_path, files["ID.jsonl"])
    assert [ph.name for ph in result.phases] == ["warm-up"]
    assert "phases not run: load-x" in result.notes
    assert result.status == "partial" and result.partial


def test_a_raw_file_ending_in_zeros_keeps_its_lines(killed_one: Path, store_path: Path,
                                                    tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A crash can leave a file's tail as NUL bytes (a file system's delayed allocation):
    that is damage at the end, not a binary file: the lines before it are imported."""
    files = _copy(killed_one, tmp_path / "elsewhere")
    first = files["ID.jsonl"]
    first.write_bytes(first.read_bytes() + b"\0" * 4096)
    code, err = _import(capsys, str(first))
    assert code == 0, err
    (result,) = stored_runs(store_path)
    assert _samples(result)[0] == _raw_samples(first)
