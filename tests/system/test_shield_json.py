# SPDX-License-Identifier: MIT
"""`rtlab shield --status --json` and `--reset --json`: always one object, with the same
keys whether a shield is applied or not (no root needed: an empty journal directory has
no shield; the applied cases are the real tests' shapes, fed in here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rtlab.cli import cmd_shield as shield_mod  # where the command looks them up
from rtlab.cli import main
from rtlab.system.journal_files import RestoreReport

STATUS = {"requested": {"cpus": "1", "irqs": True, "backend": "v1", "journal": "j"},
          "in_effect": {"cpus": {}, "cgroup": {"backend": "v1", "path": "/x"}},
          "problems": []}


@pytest.fixture(autouse=True)
def _local_engine(probe_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTLAB_PROBE", probe_bin)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_status_json_without_a_shield_is_an_object(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "shield", "--status", "--json", "--journal-dir",
                             str(tmp_path))
    assert code == 0, err
    doc = json.loads(out)
    assert doc == {"applied": False, "target": None, "requested": None, "in_effect": None,
                   "problems": [], "held_by": None, "run_shields": []}
    assert list(tmp_path.iterdir()) == []  # read-only
    code, out, _ = run_cli(capsys, "shield", "--status", "--journal-dir", str(tmp_path))
    assert code == 0 and out == "no shield is applied\n"


def test_status_json_keys_are_the_same_applied_or_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "shield", "--status", "--json", "--journal-dir", str(tmp_path))
    none = json.loads(out)
    # a persistent shield
    monkeypatch.setattr(shield_mod, "shield_status", lambda *_a: dict(STATUS))
    monkeypatch.setattr(shield_mod, "run_shields", lambda *_a: [])
    _, out, _ = run_cli(capsys, "shield", "--status", "--json", "--journal-dir", str(tmp_path))
    persistent = json.loads(out)
    assert persistent["applied"] is True and persistent["held_by"] is None
    assert persistent["requested"]["cpus"] == "1" and persistent["run_shields"] == []
    assert set(none) == set(persistent)
    # a shield held by a running `rtlab run`, and a second one beside it
    held = [{"held_by": {"who": f"rtlab run pid {pid}", "owner_pid": pid}, **STATUS}
            for pid in (41, 42)]
    monkeypatch.setattr(shield_mod, "shield_status", lambda *_a: None)
    monkeypatch.setattr(shield_mod, "run_shields", lambda *_a: [dict(h) for h in held])
    _, out, _ = run_cli(capsys, "shield", "--status", "--json", "--journal-dir", str(tmp_path))
    by_run = json.loads(out)
    assert by_run["applied"] is True and by_run["held_by"]["owner_pid"] == 41
    assert [r["held_by"]["owner_pid"] for r in by_run["run_shields"]] == [42]
    assert set(none) == set(by_run)


def test_reset_json_without_a_shield(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "shield", "--reset", "--json", "--journal-dir",
                             str(tmp_path))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["reset"] is False and doc["ok"] is True and doc["journal"] is None
    assert doc["restored"] == doc["failed"] == 0 and doc["entries"] == []
    code, out, _ = run_cli(capsys, "shield", "--reset", "--journal-dir", str(tmp_path))
    assert code == 0 and "nothing to reset" in out


@pytest.mark.parametrize("failed", [False, True])
def test_reset_json_says_what_was_restored_gone_and_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        failed: bool) -> None:
    entries: list[dict[str, Any]] = [
        {"type": "restored", "seq": 1, "op": "write", "result": "restored"},
        {"type": "restored", "seq": 2, "op": "affinity", "result": "gone"}]
    if failed:
        entries.append({"type": "restored", "seq": 3, "op": "write", "result": "failed",
                        "error": "EBUSY"})
    rep = RestoreReport(journal=str(tmp_path / "shield.journal"), restored=1, gone=1,
                        failed=int(failed), journal_kept=failed, entries=entries)
    monkeypatch.setattr(shield_mod, "reset_shield", lambda *_a: rep)
    code, out, _ = run_cli(capsys, "shield", "--reset", "--json", "--journal-dir",
                           str(tmp_path))
    doc = json.loads(out)
    assert code == (1 if failed else 0)
    assert doc["reset"] is True and doc["ok"] is (not failed)
    assert doc["journal"] == rep.journal and doc["restored"] == 1 and doc["gone"] == 1
    assert doc["failed"] == int(failed) and doc["journal_kept"] is failed
    assert doc["entries"] == entries and doc["summary"] == rep.summary()
    assert doc["failures"] == ([{"seq": 3, "op": "write", "error": "EBUSY"}] if failed else [])
    code, _, _ = run_cli(capsys, "shield", "--reset", "--journal-dir", str(tmp_path))
    assert code == (1 if failed else 0)


def test_shield_help_names_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["shield", "--help"])
    assert exc.value.code == 0 and "--json" in capsys.readouterr().out
